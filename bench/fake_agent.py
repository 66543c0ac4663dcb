"""The benchmark's agent (command contract, stdlib only): adds one passing test and exits 0."""

from __future__ import annotations

import os
import re
from pathlib import Path


def main() -> int:
    """Write tests/test_inbox_<iteration>.py in the worktree (the cwd)."""
    iteration = re.sub(r"\W", "_", os.environ.get("SEED_ITERATION_ID", "x"))
    path = Path("tests") / f"test_inbox_{iteration}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        '"""Added by the benchmark\'s agent."""\n\n\ndef test_added() -> None:\n'
        "    assert 1 + 1 == 2\n",
        encoding="utf-8",
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
