"""The walk of one plan through the kernel: which kernel files it enters and which call which.

Run: `.venv/bin/python bench/plan_walk.py [SEED_REPO]` (default: this checkout). It makes a
small repository with one lint finding, runs `once` in this process with the ruff-fix backend
(the kernel's whole path: analyse, plan, clamp, run, judge, land, record) under a profiler,
and prints the kernel files entered from the planner's call to the written record, the rooms
each phase entered (a phase: one call of the loop into another room's file; rooms as
kernel/README.md's floor plan names them, a flat kernel's files placed by their names), and
every call that climbs from a room into one above it (issues 18 and 26's "walk of one plan").
Before issue 26: `git worktree add /tmp/before cf70e69 && python bench/plan_walk.py /tmp/before`.
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

_HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(_HERE / "bench"))
import kernel_shape  # noqa: E402  (this checkout's floor plan names the rooms)

_ROOMS = [room for room, _ in kernel_shape.rooms(_HERE)]
_BY_NAME = {Path(f).name: Path(f).parent.name for f in kernel_shape.floor_plan(_HERE)}
"""A flat kernel's file (before issue 26) -> the room this floor plan gives it."""


def room(file: str) -> str:
    """The room of a kernel file: its folder, or for a flat kernel the floor plan's room."""
    parts = Path(file).parts
    if len(parts) > 1:
        return parts[0]
    return _BY_NAME.get(file, "")


def _shown(name: str) -> str:
    return f"kernel/{name + '/' if name else ''}"


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
    seed = Path(argv[1] if len(argv) > 1 else _HERE).resolve()
    sys.path.insert(0, str(seed))
    os.chdir(seed)
    try:  # the checkout's own kernel, imported from seed (rooms since issue 26, flat before)
        from kernel.shell.cli import main as cli  # pyright: ignore[reportMissingImports]
    except ImportError:
        from kernel.cli import main as cli  # pyright: ignore

    kernel = str(seed / "kernel") + os.sep
    edges: Counter[tuple[str, str]] = Counter()
    entered: list[str] = []
    walking = [False]
    phases: list[tuple[str, Counter[str]]] = []
    """(the loop's call that began a phase, entries into each room during it)."""
    current: list[Any] = [None]

    def kernel_file(frame: FrameType | None) -> str:
        while frame is not None:
            name = frame.f_code.co_filename
            if name.startswith(kernel):
                return name[len(kernel) :]
            frame = frame.f_back
        return ""

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "return" and current[0] is frame:
            current[0] = None
        if event != "call":
            return
        callee = kernel_file(frame)
        if not callee or callee != frame.f_code.co_filename[len(kernel) :]:
            return
        caller = kernel_file(frame.f_back)
        planning = frame.f_code.co_name == "plan" and Path(callee).name == "host.py"
        if planning and Path(caller).name == "loop.py":
            walking[0] = True  # the loop asks the planner (the self-check's plan is not it)
        if not walking[0]:
            return
        if callee not in entered:
            entered.append(callee)
        if caller and caller != callee:
            edges[(caller, callee)] += 1
            if current[0] is None and Path(caller).name == "loop.py" and room(callee) != "":
                current[0] = frame  # a phase: the loop's call into another room's file
                phases.append((f"{Path(callee).name}:{frame.f_code.co_name}", Counter()))
            if current[0] is not None and room(caller) != room(callee):
                phases[-1][1][room(callee)] += 1
        if frame.f_code.co_name == "after_record":
            walking[0] = False

    with tempfile.TemporaryDirectory() as tmp:
        repo = _repo(Path(tmp))
        sys.setprofile(profile)
        try:
            code = cli(["--root", str(repo), "once"])
        finally:
            sys.setprofile(None)
    rooms = sorted({room(f) for f in entered}, key=_ROOMS.index)
    print(f"once exited {code}; kernel files entered from the plan to the record: {len(entered)}")
    print(f"  in {len(rooms)} rooms: " + ", ".join(_shown(r) for r in rooms))
    print("phases (the loop's calls into another room) and the rooms each entered (times):")
    merged: dict[str, Counter[str]] = {}
    for name, seen in phases:
        merged.setdefault(name, Counter()).update(seen)
    for name, seen in merged.items():
        shown = ", ".join(
            f"{_shown(r)} {n}" for r, n in sorted(seen.items(), key=lambda x: _ROOMS.index(x[0]))
        )
        print(f"  {name}: {shown}")
    graph = kernel_shape.import_graph(seed)

    def imported(a: str, b: str) -> bool:
        """Whether file a imports file b (else a call from a into b is a callback handed down)."""
        name = kernel_shape.module_name
        return name(seed, seed / "kernel" / b) in graph.get(name(seed, seed / "kernel" / a), set())

    up = Counter[tuple[str, str]]()
    for (a, b), n in edges.items():
        if (
            room(a) in _ROOMS
            and room(b) in _ROOMS
            and _ROOMS.index(room(b)) > _ROOMS.index(room(a))
        ):
            up[(a, b)] += n
    into_loop = sum(n for (a, b), n in up.items() if room(b) == "loop")
    by_import = sum(n for (a, b), n in up.items() if imported(a, b))
    print(
        f"climbs (a call from a room into one above it): {sum(up.values())}; into kernel/loop/: "
        f"{into_loop}; through an import: {by_import}, through a callback handed down: "
        f"{sum(up.values()) - by_import}"
    )
    for (a, b), n in sorted(up.items()):
        how = "import" if imported(a, b) else "callback"
        print(f"  {a} ({_shown(room(a))}) -> {b} ({_shown(room(b))}): {n} ({how})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
