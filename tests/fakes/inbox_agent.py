"""The inbox load's agent (command contract, stdlib only): one passing test per task, or exit 1.

It reads the plan (SEED_PLAN_FILE): a task whose text says FAIL fails; any other gets a new
test file named after the task, so every landed task leaves its own trace in the tree.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path


def main() -> int:
    """Do the planned inbox task in the worktree (the cwd)."""
    plan = json.loads(Path(os.environ["SEED_PLAN_FILE"]).read_text(encoding="utf-8"))
    item = (plan.get("gap") or {}).get("inbox") or {}
    if "FAIL" in str(item.get("body", "")):
        return 1
    stem = re.sub(r"\W", "_", str(item.get("name", "task")))
    path = Path("tests") / f"test_inbox_{stem}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f'def test_{stem}() -> None:\n    assert "{stem}".isidentifier()\n', encoding="utf-8"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
