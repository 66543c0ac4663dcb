"""The candidates bench's agent (command contract, stdlib only): right with probability p.

`candidate_agent.py P SECONDS SEED COST`: waits SECONDS (an agent waiting on its model), then
edits the planted function of its gap (`gap<i>` in a `pkg*/` module, i from the plan's gap
key): the fix when `decides(SEED, i, k, P)` says so for its candidate number k (the -cK of
SEED_ITERATION_ID, 1 without), else a wrong change that leaves the gap's test failing. Reports
COST dollars in its result file. The same (SEED, gap, candidate) always decides the same, so runs are reproducible
and every configuration of the bench meets the same right and wrong candidates.
"""

from __future__ import annotations

import json
import os
import random
import re
import sys
import time
from pathlib import Path


def bug(gap: int) -> str:
    """The planted function's wrong line (one of its own, so several may share a module)."""
    return f"return f1(x) - 1  # gap {gap}"


def fix(gap: int) -> str:
    """The line that makes the gap's test pass."""
    return f"return f1(x) + 1  # gap {gap}"


def wrong(gap: int) -> str:
    """A change that leaves the gap's test failing."""
    return f"return f1(x) - 2  # gap {gap}"


def decides(seed: int, gap: int, candidate: int, p: float) -> bool:
    """Whether candidate k of gap i is right (a seeded draw of its own)."""
    return random.Random(f"{seed}:{gap}:{candidate}").random() < p


def main(argv: list[str]) -> int:
    """Wait, then fix the gap or change it wrongly; the run's cost in the result file."""
    p, seconds, seed, cost = float(argv[1]), float(argv[2]), int(argv[3]), float(argv[4])
    plan = json.loads(Path(os.environ["SEED_PLAN_FILE"]).read_text(encoding="utf-8"))
    key = str((plan.get("gap") or {}).get("key", ""))
    found = re.search(r"gap(\d+)", key)
    number = os.environ.get("SEED_ITERATION_ID", "").rpartition("-c")[2]
    candidate = int(number) if number.isdigit() else 1
    time.sleep(seconds)
    result = {"cost_usd": cost, "summary": f"gap {key}, candidate {candidate}"}
    Path(os.environ["SEED_RESULT_FILE"]).write_text(json.dumps(result), encoding="utf-8")
    if found is None:
        return 1  # not a planted gap: nothing this agent knows how to do
    gap = int(found.group(1))
    right = decides(seed, gap, candidate, p)
    for module in Path.cwd().glob("pkg*/*.py"):
        text = module.read_text(encoding="utf-8")
        if bug(gap) in text:
            module.write_text(text.replace(bug(gap), (fix if right else wrong)(gap)), "utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
