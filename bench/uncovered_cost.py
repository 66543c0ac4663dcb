"""What judging uncovered lines costs on a real project: the judged whole-suite run, the
traced run of the tests that ran one changed file, and (no test map) the whole suite traced.

    python -m bench.uncovered_cost /tmp/real/click src/click/utils.py tests/test_utils.py
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from kernel.config import QualityConfig
from kernel.measuring.measure import Target, run_lines, run_pytest


def main(argv: list[str]) -> int:
    root, changed, tests = Path(argv[1]), argv[2], argv[3]
    python = str(root / ".venv" / "bin" / "python")
    target = Target(root=root, python=python, quality=QualityConfig(tools=["pytest"]), strict=())
    work = Path(tempfile.mkdtemp(prefix="seed-cost-"))
    t0 = time.monotonic()
    judged = run_pytest(root, target, work, 900)
    t1 = time.monotonic()
    passed, ran = run_lines(root, target, 900, [tests], [changed])
    t2 = time.monotonic()
    whole, _ = run_lines(root, target, 900, [], [changed])
    t3 = time.monotonic()
    lines = set().union(*(r.get(changed, frozenset()) for n, r in ran.items() if n in passed))
    print(f"judged whole suite (untraced): {t1 - t0:.1f}s, {len(judged.passed)} passed")
    print(
        f"traced, {tests} only: {t2 - t1:.1f}s, {len(passed)} passed, {len(lines)} lines of {changed} run"
    )
    print(f"traced, whole suite (no map): {t3 - t2:.1f}s, {len(whole)} passed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
