"""The benchmark's agent (command contract, stdlib only): adds one passing test and exits 0.

`fake_agent.py TRACE` (bench/overnight.py): each run first appends a line to TRACE (its
iteration, round and gap), then a task whose text says FAIL fails (exit 1, nothing changed),
and a task whose text says SHARED adds its test to tests/test_shared.py, the file the person
edits, instead of a file of its own, and a task whose text says LIMIT first asks its model
(SEED_MODEL_BASE_URL, through the kernel's gateway) once, failing (exit 1) on an error answer.
"""

from __future__ import annotations

import json
import os
import re
import sys
import urllib.error
import urllib.request
from pathlib import Path


def _ask() -> bool:
    """One chat completion from the model; whether it answered."""
    body = {"model": "bench", "max_tokens": 50, "messages": [{"role": "user", "content": "go"}]}
    request = urllib.request.Request(
        f"{os.environ['SEED_MODEL_BASE_URL']}/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            answer.read()
    except (OSError, urllib.error.URLError):
        return False
    return True


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
    if "FAIL" in body or ("LIMIT" in body and not _ask()):
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
