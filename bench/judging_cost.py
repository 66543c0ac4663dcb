"""What issue 39's judging rules cost on a real project, as ratios to one plain suite run:
pytest's plugin autoload off, the kernel's judged run (autoload off, entry points from the
interpreter's own site-packages only), and the traced run that vouches for a changed file's
lines and both sides of its conditional jumps (opcode tracing in that file only).

    python bench/judging_cost.py /tmp/jc/boltons boltons/strutils.py [--line N] [--rounds 3]

Run it from two checkouts of seed (before and after a change) to compare: it imports the
kernel of the checkout it sits in. Medians of the rounds, interleaved, with the load average.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernel.config import QualityConfig
from kernel.measuring.measure import Target, run_lines, run_pytest


def _plain(root: Path, python: str, autoload: bool) -> None:
    env = dict(os.environ)
    env.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
    if not autoload:
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    subprocess.run(
        [python, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=root,
        env=env,
        capture_output=True,
        check=False,
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("changed", help="the file a change touches, relative to root")
    parser.add_argument("--line", type=int, help="a changed line: trace only code spanning it")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    root: Path = args.root.resolve()
    python = str(root / ".venv" / "bin" / "python")
    target = Target(root=root, python=python, quality=QualityConfig(tools=["pytest"]), strict=())
    work = Path(tempfile.mkdtemp(prefix="seed-judging-cost-"))
    steps: dict[str, Callable[[], object]] = {
        "plain run (autoload on)": lambda: _plain(root, python, True),
        "plain run, autoload off": lambda: _plain(root, python, False),
        "judged run (kernel's plugin)": lambda: run_pytest(root, target, work, 1800),
        "traced run (lines and jumps of the changed file)": lambda: run_lines(
            root, target, 1800, [], [args.changed]
        ),
    }
    if args.line:
        steps[f"traced run, code spanning line {args.line} only"] = lambda: run_lines(
            root, target, 1800, [], [args.changed], near={args.changed: [args.line]}
        )
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(args.rounds):
        for name, step in steps.items():
            t0 = time.monotonic()
            step()
            times[name].append(time.monotonic() - t0)
    base = statistics.median(times["plain run (autoload on)"])
    print(f"{root.name}, {args.changed}: medians of {args.rounds}, load {os.getloadavg()}")
    for name, spent in times.items():
        median = statistics.median(spent)
        print(f"  {name}: {median:.2f}s, {median / base:.2f}x the plain run")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
