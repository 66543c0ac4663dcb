"""A command agent that prints a Claude Code-like stream-json log as it works (stdlib only).

Usage: looping_agent.py MODE TURNS [SECONDS]
Each turn is one tool call (an assistant tool_use event) and its result (a user tool_result
event), SECONDS apart (0.1 by default), TURNS of them, then a result object and exit 0:
  same   the same call with the same result every turn (a loop)
  vary   a different read every turn, nothing written (no new bytes in the checkout)
  write  a different line appended to notes.txt every turn (work going on)
  text   the same call and result every turn, but as plain text, not as events
Ids differ in every turn, as the real CLI's do.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def _event(value: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(value, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def _turn(mode: str, n: int) -> None:
    command = (
        "grep -n 'return a - b' calc.py" if mode in ("same", "text") else f"sed -n {n}p calc.py"
    )
    output = "2:    return a - b" if mode in ("same", "text") else f"line {n}"
    if mode == "write":
        with Path("notes.txt").open("a", encoding="utf-8") as notes:
            notes.write(f"turn {n}\n")
        command, output = f"echo 'turn {n}' >> notes.txt", ""
    if mode == "text":
        print(f"$ {command}\n{output}", flush=True)
        return
    use = f"toolu_{n:04d}"
    call = {"type": "tool_use", "id": use, "name": "Bash", "input": {"command": command}}
    message = {
        "id": f"msg_{n}",
        "role": "assistant",
        "content": [call],
        "usage": {"input_tokens": 100 + n, "output_tokens": 20},
    }
    _event(
        {"type": "assistant", "message": message, "parent_tool_use_id": None, "session_id": "s1"}
    )
    result = {"type": "tool_result", "tool_use_id": use, "content": output, "is_error": False}
    _event(
        {
            "type": "user",
            "message": {"role": "user", "content": [result]},
            "parent_tool_use_id": None,
            "session_id": "s1",
        }
    )


def main(argv: list[str]) -> int:
    mode, turns = argv[0], int(argv[1])
    seconds = float(argv[2]) if len(argv) > 2 else 0.1
    _event({"type": "system", "subtype": "init", "session_id": "s1", "tools": ["Bash"]})
    for n in range(1, turns + 1):
        _turn(mode, n)
        time.sleep(seconds)
    _event(
        {
            "type": "result",
            "subtype": "success",
            "is_error": False,
            "result": "done",
            "num_turns": turns,
        }
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
