"""Fake `gemini` (Gemini CLI 0.61.0, headless), faithful to docs/agent-clis.md section 5.

Outcomes: success; turn_limit (exit 53). An API error and a failed authentication (exit 41)
are the real program's own: tests/agents_real/test_gemini.py.
With --output-format json, errors go to stderr as JSON and stdout stays empty. An untrusted
folder (no --skip-trust, no GEMINI_CLI_TRUST_WORKSPACE=true) exits 55 with plain text.
Without yolo approval, headless runs deny edits.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from pathlib import Path

from tests.fakes import fakecli

VERSION = "0.61.0"
APPROVAL_MODES = ("default", "auto_edit", "yolo", "plan")
_BOOL = {"-d", "--debug", "--skip-trust", "-s", "--sandbox", "-y", "--yolo", "-l"}
_BOOL |= {"--list-extensions", "--screen-reader", "-v", "--version", "-h", "--help"}
_BOOL |= {"--raw-output", "--accept-raw-output-risk", "--acp", "--list-sessions"}
_VALUE = {"-m", "--model", "-p", "--prompt", "-i", "--prompt-interactive", "--approval-mode"}
_VALUE |= {"-o", "--output-format", "-r", "--resume", "--session-id", "--include-directories"}
_VALUE |= {"-e", "--extensions", "--policy", "--allowed-tools"}
_USAGE = (
    "Usage: gemini [options] [command]\n\n"
    "Gemini CLI - Defaults to interactive mode. Use -p/--prompt for non-interactive (headless) mode.\n"
)


def _fail(message: str) -> int:
    fakecli.err(f"{message}\n{_USAGE}")
    return 1


def _stats(model: str, used: dict[str, int | float | None], requests: int) -> dict[str, object]:
    prompt = int(used["input"] or 0)
    candidates = int(used["output"] or 0)
    cached = int(used["cached"] or 0)
    tokens = {
        "input": prompt - cached,
        "prompt": prompt,
        "candidates": candidates,
        "total": prompt + candidates,
        "cached": cached,
        "thoughts": 0,
        "tool": 0,
    }
    api = {"totalRequests": requests, "totalErrors": 0, "totalLatencyMs": 39, "errorsByType": {}}
    return {
        "models": {
            model: {"api": api, "tokens": tokens, "roles": {"main": {**api, "tokens": tokens}}}
        },
        "tools": {
            "totalCalls": 0,
            "totalSuccess": 0,
            "totalFail": 0,
            "totalDurationMs": 0,
            "totalDecisions": {"accept": 0, "reject": 0, "modify": 0, "auto_accept": 0},
            "byName": {},
        },
        "files": {"totalLinesAdded": 0, "totalLinesRemoved": 0},
    }


def _error(session: str, kind: str, message: str, code: int, fmt: str) -> int:
    if fmt == "json":
        body = {"session_id": session, "error": {"type": kind, "message": message, "code": code}}
        fakecli.err(json.dumps(body, separators=(",", ":")) + "\n")
    else:
        fakecli.err(f"Error: {message}\n")
    return code & 0xFF


def main(args: list[str]) -> int:
    fakecli.trace("gemini", args)
    try:
        flags = fakecli.parse_flags(args, _BOOL, _VALUE)
    except fakecli.MissingValue as missing:
        return _fail(f"Not enough arguments following: {str(missing).lstrip('-')}")
    except fakecli.UnknownFlag as unknown:
        return _fail(f"Unknown argument: {unknown.name.lstrip('-')}")
    options, positional = flags.options, flags.positional
    if options.get("-v") or options.get("--version"):
        fakecli.out(VERSION + "\n")
        return 0
    fmt = str(options.get("-o", options.get("--output-format", "text")))
    if fmt not in ("text", "json", "stream-json"):
        return _fail(
            f'Invalid values:\n  Argument: output-format, Given: "{fmt}", Choices: "text", "json", "stream-json"'
        )
    mode = options.get("--approval-mode")
    yolo = bool(options.get("-y") or options.get("--yolo"))
    if yolo and mode:
        fakecli.err(
            "Cannot use both --yolo (-y) and --approval-mode together. Use --approval-mode=yolo instead.\n"
        )
        return 1
    mode = "yolo" if yolo else str(mode or "default")
    if mode not in APPROVAL_MODES:
        return _fail(
            f'Invalid values:\n  Argument: approval-mode, Given: "{mode}", Choices: "default", "auto_edit", "yolo", "plan"'
        )
    prompt = options.get("-p", options.get("--prompt"))
    if isinstance(prompt, str) and positional:
        return _fail("Cannot use both a positional prompt and the --prompt (-p) flag together")
    stdin = fakecli.read_stdin_if_data(0.5)
    if not isinstance(prompt, str):
        if fakecli.stdin_kind() == "tty":
            return _fail("this fake has no interactive mode")
        prompt = " ".join(positional)
    prompt = f"{stdin}\n\n{prompt}" if stdin else prompt
    session = str(uuid.uuid4())
    if not prompt.strip():
        return _error(
            session,
            "FatalInputError",
            "No input provided via stdin. Input can be provided by piping data into gemini or using the --prompt option.",
            42,
            fmt,
        )
    trusted = options.get("--skip-trust") or os.environ.get("GEMINI_CLI_TRUST_WORKSPACE") == "true"
    if not trusted:
        fakecli.err(
            "\x1b[31mGemini CLI is not running in a trusted directory. To proceed, either use "
            "--skip-trust, set the GEMINI_CLI_TRUST_WORKSPACE=true environment variable, or trust "
            "this directory in interactive mode.\x1b[0m\n"
        )
        return 55
    fakecli.err(
        "Warning: 256-color support not detected. Using a terminal with at least 256-color support is recommended for a better experience.\n"
    )
    plan = fakecli.script()
    fakecli.barriers(plan)
    outcome = plan.get("outcome", "success")
    used = fakecli.usage(plan)
    model = str(options.get("-m", options.get("--model", "gemini-2.5-pro")))
    if outcome == "turn_limit":
        return _error(
            session,
            "FatalTurnLimitedError",
            "Reached max session turns for this session. Increase the number of turns by specifying maxSessionTurns in settings.json.",
            53,
            fmt,
        )
    can_edit = mode in ("yolo", "auto_edit")
    changed = fakecli.apply_edits(plan, Path.cwd()) if can_edit else []
    response = (
        str(plan.get("summary", "Done."))
        if changed or not plan.get("edits")
        else ("I could not change the files: the edit tool was denied by policy.")
    )
    document = {"session_id": session, "response": response, "stats": _stats(model, used, 2)}
    if fmt == "json":
        fakecli.out(json.dumps(document, indent=2))  # JSON.stringify(..., null, 2): no newline
    else:
        fakecli.out(response + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
