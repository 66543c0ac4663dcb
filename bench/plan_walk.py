"""The walk of one plan through the kernel: which kernel files it enters and which call which.

Run: `.venv/bin/python bench/plan_walk.py [SEED_REPO]` (default: this checkout). It makes a
small repository with one lint finding, runs `once` in this process with the ruff-fix backend
(the kernel's whole path: analyse, plan, clamp, run, judge, land, record) under a profiler,
and prints the kernel files entered from the planner's call to the written record, and the
calls between the files of the iteration's phases (issue 18's "walk of one plan").
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

PHASE_FILES = (
    "iteration.py",
    "loop.py",
    "agentrun.py",
    "judge.py",
    "landing.py",
    "recording.py",
)
"""The files of the iteration's phases (before issue 18: iteration, agentrun, landing, recording)."""


def _repo(root: Path) -> Path:
    files = {
        "calc.py": "import os\n\n\ndef add(a: int, b: int) -> int:\n    return a + b\n",
        "tests/test_calc.py": "from calc import add\n\n\ndef test_add() -> None:\n    assert add(1, 2) == 3\n",
        "seed.toml": '[agent]\nbackend = "ruff-fix"\n',
        ".gitignore": "history/*\ninbox/*\n*.log\n__pycache__/\n",
        "pyproject.toml": "[tool.ruff]\n\n[tool.ruff.format]\n",  # ruff takes part
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    for args in (
        ("init", "-q", "-b", "main"),
        ("add", "-A"),
        ("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "start"),
    ):
        subprocess.run(["git", *args], cwd=root, check=True)
    return root


def main(argv: list[str]) -> int:
    """Trace one `once` of the seed checkout given and print the walk."""
    seed = Path(argv[1] if len(argv) > 1 else Path(__file__).resolve().parent.parent).resolve()
    sys.path.insert(0, str(seed))
    os.chdir(seed)
    from kernel.shell.cli import main as cli  # the checkout's own kernel, imported from seed

    kernel = str(seed / "kernel") + os.sep
    edges: Counter[tuple[str, str]] = Counter()
    entered: list[str] = []
    walking = [False]

    def kernel_file(frame: FrameType | None) -> str:
        while frame is not None:
            name = frame.f_code.co_filename
            if name.startswith(kernel):
                return name[len(kernel) :]
            frame = frame.f_back
        return ""

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        callee = kernel_file(frame)
        if not callee or callee != frame.f_code.co_filename[len(kernel) :]:
            return
        caller = kernel_file(frame.f_back)
        if frame.f_code.co_name == "plan" and callee == "host.py" and caller in PHASE_FILES:
            walking[0] = True  # the loop asks the planner (the self-check's plan is not it)
        if not walking[0]:
            return
        if callee not in entered:
            entered.append(callee)
        if caller and caller != callee:
            edges[(caller, callee)] += 1
        if frame.f_code.co_name == "after_record":
            walking[0] = False

    with tempfile.TemporaryDirectory() as tmp:
        repo = _repo(Path(tmp))
        sys.setprofile(profile)
        try:
            code = cli(["--root", str(repo), "once"])
        finally:
            sys.setprofile(None)
    print(f"once exited {code}; kernel files entered from the plan to the record: {len(entered)}")
    print("  " + ", ".join(entered))
    phase = [
        (a, b, n) for (a, b), n in sorted(edges.items()) if a in PHASE_FILES and b in PHASE_FILES
    ]
    print("calls between the phases' files (caller -> callee: calls):")
    for a, b, n in phase:
        print(f"  {a} -> {b}: {n}")
    into_record = sum(n for (a, b), n in edges.items() if b == "recording.py")
    print(
        f"calls into recording.py: {into_record}, from {sorted({a for a, b in edges if b == 'recording.py'})}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
