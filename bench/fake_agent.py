"""The benchmark's agent (command contract, stdlib only): adds one passing test and exits 0.

`fake_agent.py TRACE` (bench/overnight.py): each run first appends a line to TRACE (its
iteration, round and gap), then a task whose text says FAIL fails (exit 1, nothing changed),
and a task whose text says SHARED adds its test to tests/test_shared.py, the file the person
edits, instead of a file of its own.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    """Write tests/test_inbox_<iteration>.py in the worktree (the cwd)."""
    raw = os.environ.get("SEED_ITERATION_ID", "x")
    iteration = re.sub(r"\W", "_", raw)
    body = ""
    if len(argv) > 1:
        plan = json.loads(Path(os.environ["SEED_PLAN_FILE"]).read_text(encoding="utf-8"))
        gap = plan.get("gap") or {}
        body = str((gap.get("inbox") or {}).get("body", ""))
        line = {"iteration": raw, "round": os.environ.get("SEED_ROUND", ""), "gap": gap.get("key")}
        with open(argv[1], "a", encoding="utf-8") as trace:
            trace.write(json.dumps(line) + "\n")
    if "FAIL" in body:
        return 1
    test = f"\n\ndef test_added_{iteration}() -> None:\n    assert 1 + 1 == 2\n"
    if "SHARED" in body:
        with open(Path("tests") / "test_shared.py", "a", encoding="utf-8") as shared:
            shared.write(test)
        return 0
    path = Path("tests") / f"test_inbox_{iteration}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        '"""Added by the benchmark\'s agent."""\n\n\ndef test_added() -> None:\n'
        "    assert 1 + 1 == 2\n",
        encoding="utf-8",
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
