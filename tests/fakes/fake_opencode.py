"""Fake `opencode` (opencode 1.18.33, `opencode run`), faithful to docs/agent-clis.md section 6.

Outcomes: success (an API error is the real program's own: tests/agents_real/). Without --auto, `run` rejects the
permissions an edit asks for. A non-terminal stdin is read to EOF (an open pipe blocks).
"""

from __future__ import annotations

import random
import string
import sys
import time
from pathlib import Path

from tests.fakes import fakecli

VERSION = "1.18.33"
_BOOL = {"-h", "--help", "-v", "--version", "--print-logs", "--pure", "-c", "--continue"}
_BOOL |= {"--fork", "--share", "--thinking", "-i", "--interactive", "--auto", "--yolo"}
_BOOL |= {"--dangerously-skip-permissions"}
_VALUE = {"--log-level", "--command", "-s", "--session", "-m", "--model", "--agent", "--format"}
_VALUE |= {"-f", "--file", "--title", "--attach", "-p", "--password", "-u", "--username"}
_VALUE |= {"--dir", "--port", "--variant"}
_HELP = (
    "opencode run [message..]\n\nrun opencode with a message\n\nPositionals:\n"
    "  message  message to send                                                     [array] [default: []]\n\n"
    "Options:\n  -m, --model        model to use in the format of provider/model                           [string]\n"
    "      --format       format: default (formatted) or json (raw JSON events)\n"
    "      --auto         auto-approve permissions that are not explicitly denied (dangerous!)\n"
)


def _id(prefix: str) -> str:
    return prefix + "_" + "".join(random.choices(string.ascii_letters + string.digits, k=26))


def main(args: list[str]) -> int:
    fakecli.trace("opencode", args)
    if args[:1] in (["--version"], ["-v"]):
        fakecli.out(VERSION + "\n")
        return 0
    if args[:1] != ["run"]:
        fakecli.err("this fake only knows `opencode run` and `opencode --version`\n")
        return 1
    try:
        flags = fakecli.parse_flags(args[1:], _BOOL, _VALUE)
    except (fakecli.MissingValue, fakecli.UnknownFlag):
        fakecli.err(_HELP)  # yargs prints the command's help and exits 1
        return 1
    options, message = flags.options, flags.positional
    fmt = str(options.get("--format", "default"))
    if fmt not in ("default", "json"):
        fakecli.err(
            _HELP
            + f'\nInvalid values:\n  Argument: format, Given: "{fmt}", Choices: "default", "json"\n'
        )
        return 1
    text = " ".join(message)
    if fakecli.stdin_kind() not in ("tty", "closed"):
        piped = fakecli.read_stdin_to_eof()  # Bun.stdin.text(): until EOF
        text = f"{text}\n{piped}" if text and piped else text or piped
    if not text.strip():
        fakecli.err("You must provide a message or a command\n")
        return 1
    fakecli.err(
        "Performing one time database migration, may take a few minutes...\nsqlite-migration:done\n"
    )
    root = Path(str(options.get("--dir", "."))).resolve()
    auto = any(options.get(k) for k in ("--auto", "--yolo", "--dangerously-skip-permissions"))
    plan = fakecli.script()
    fakecli.err("INFO service=log noise\n" * int(plan.get("noise_lines", 0)))
    fakecli.barriers(plan)
    session = _id("ses")
    msg = _id("msg")

    def event(kind: str, **data: object) -> None:
        line = {"type": kind, "timestamp": int(time.time() * 1000), "sessionID": session, **data}
        if fmt == "json":
            fakecli.out(fakecli.compact(line) + "\n")

    used = fakecli.usage(plan)
    steps = 2 if plan.get("edits") else 1
    for step in range(steps):
        event(
            "step_start",
            part={"id": _id("prt"), "messageID": msg, "sessionID": session, "type": "step-start"},
        )
        if step == 0 and plan.get("edits"):
            if auto:
                changed = fakecli.apply_edits(plan, root)
                state = {
                    "status": "completed",
                    "input": {"files": changed},
                    "output": "",
                    "title": "edit",
                    "metadata": {},
                    "time": {"start": 1, "end": 2},
                }
            else:
                state = {
                    "status": "error",
                    "input": {},
                    "error": "The user rejected permission to use this specific tool call.",
                    "time": {"start": 1, "end": 2},
                }
            event(
                "tool_use",
                part={
                    "id": _id("prt"),
                    "messageID": msg,
                    "sessionID": session,
                    "type": "tool",
                    "callID": "call_1",
                    "tool": "edit",
                    "state": state,
                },
            )
        else:
            event(
                "text",
                part={
                    "id": _id("prt"),
                    "messageID": msg,
                    "sessionID": session,
                    "type": "text",
                    "text": str(plan.get("summary", "Done.")),
                    "time": {"start": 1, "end": 2},
                },
            )
        inputs, outputs = int(used["input"]) // steps, int(used["output"]) // steps
        cached = int(used["cached"]) // steps
        cost = float(used["cost"] or 0) / steps
        event(
            "step_finish",
            part={
                "id": _id("prt"),
                "reason": "tool-calls" if step < steps - 1 else "stop",
                "messageID": msg,
                "sessionID": session,
                "type": "step-finish",
                "tokens": {
                    "total": inputs + outputs,
                    "input": inputs - cached,
                    "output": outputs,
                    "reasoning": 0,
                    "cache": {"write": 0, "read": cached},
                },
                "cost": round(cost, 6),
            },
        )
    if fmt != "json":
        fakecli.out(str(plan.get("summary", "Done.")) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
