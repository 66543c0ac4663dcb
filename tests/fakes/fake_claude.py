"""Fake `claude` (Claude Code 2.1.x, print mode), faithful to docs/agent-clis.md section 1.

An unknown option in print mode is commander's `error: unknown option '--x'`, exit 1
(reported for 2.1.132 in getpaseo/paseo#807).

Outcomes: success; max_turns (subtype error_max_turns, is_error true, exit 1); denied (the
script's tool asked for and refused, as print mode does: nothing edited, subtype success,
`permission_denials` in 2.1.332's shape); limited (its model's usage limit: is_error true,
api_error_status 429, the reset in epoch seconds after a `|`, exit 1). An API error is the real program's own:
tests/agents_real/test_claude.py.
"""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

from tests.fakes import fakecli

VERSION = "2.1.330 (Claude Code)"
PERMISSION_MODES = ("default", "acceptEdits", "bypassPermissions", "plan", "dontAsk", "auto")
_BOOL = {"-p", "--print", "--verbose", "--dangerously-skip-permissions", "-c", "--continue"}
_BOOL |= {"--debug", "-v", "--version", "-h", "--help"}
_VALUE = {"--output-format", "--permission-mode", "--max-turns", "--model"}
_VALUE |= {"--append-system-prompt", "--system-prompt", "--max-budget-usd", "-r", "--resume"}
_VALUE |= {"--settings", "--fallback-model", "--session-id"}
_VARIADIC = {"--allowedTools", "--allowed-tools", "--disallowedTools", "--disallowed-tools"}
_VARIADIC |= {"--add-dir", "--mcp-config"}


def _fail(message: str) -> int:
    fakecli.err(f"error: {message}\n")
    return 1


def parse(args: list[str]) -> tuple[dict[str, object], list[str]] | int:
    """Commander-style parsing: unknown options are errors, variadic options eat non-flags."""
    try:
        flags = fakecli.parse_flags(args, _BOOL, _VALUE, variadic=_VARIADIC, end_of_options=True)
    except fakecli.MissingValue as missing:
        shape = "<values...>" if str(missing) in _VARIADIC else "<value>"
        return _fail(f"option '{missing} {shape}' argument missing")
    except fakecli.UnknownFlag as unknown:
        return _fail(f"unknown option '{unknown.arg}'")
    return flags.options, flags.positional


def main(args: list[str]) -> int:
    fakecli.trace("claude", args)
    parsed = parse(args)
    if isinstance(parsed, int):
        return parsed
    options, positional = parsed
    if options.get("-v") or options.get("--version"):
        fakecli.out(VERSION + "\n")
        return 0
    if not (options.get("-p") or options.get("--print")):
        return _fail("this fake only knows print mode (-p); interactive mode needs a terminal")
    fmt = str(options.get("--output-format", "text"))
    if fmt not in ("text", "json", "stream-json"):
        return _fail(f"option '--output-format <format>' argument '{fmt}' is invalid")
    if fmt == "stream-json" and not options.get("--verbose"):
        fakecli.err("Error: When using --print, --output-format=stream-json requires --verbose\n")
        return 1
    mode = str(options.get("--permission-mode", "default"))
    if mode not in PERMISSION_MODES:
        return _fail(
            f"option '--permission-mode <mode>' argument '{mode}' is invalid. "
            f"Allowed choices are {', '.join(PERMISSION_MODES)}."
        )
    bypass = mode == "bypassPermissions" or options.get("--dangerously-skip-permissions")
    # as root the real CLI bypasses its prompts only where it is told it is sandboxed
    sandboxed = "1" in (os.environ.get("IS_SANDBOX"), os.environ.get("CLAUDE_CODE_BUBBLEWRAP"))
    if bypass and os.geteuid() == 0 and not sandboxed:
        fakecli.err(
            "--dangerously-skip-permissions cannot be used with root/sudo privileges for security reasons\n"
        )
        return 1
    stdin = fakecli.read_stdin_to_eof()  # -p combines piped stdin with the prompt
    prompt = " ".join(positional) or stdin
    if not prompt.strip():
        fakecli.err(
            "Error: Input must be provided either through stdin or as a prompt argument when using --print\n"
        )
        return 1
    plan = fakecli.script()
    fakecli.barriers(plan)
    outcome = plan.get("outcome", "success")
    used = fakecli.usage(plan)
    can_edit = mode in ("acceptEdits", "bypassPermissions", "auto") or bool(bypass)
    changed = fakecli.apply_edits(plan, Path.cwd()) if can_edit and outcome == "success" else []
    turns = int(plan.get("turns", 3))
    result: dict[str, object] = {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "duration_ms": 19431,
        "duration_api_ms": 17200,
        "num_turns": turns,
        "result": plan.get("summary", f"Done. Changed {', '.join(changed) or 'nothing'}."),
        "stop_reason": "end_turn",
        "session_id": str(uuid.uuid4()),
        "total_cost_usd": used["cost"] or 0,
        "usage": {
            "input_tokens": used["input"] - used["cached"],
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": used["cached"],
            "output_tokens": used["output"],
            "server_tool_use": {"web_search_requests": 0},
            "service_tier": "standard",
        },
        "modelUsage": {
            str(options.get("--model", "claude-sonnet-4-5")): {
                "inputTokens": used["input"] - used["cached"],
                "outputTokens": used["output"],
                "cacheReadInputTokens": used["cached"],
                "cacheCreationInputTokens": 0,
                "webSearchRequests": 0,
                "costUSD": used["cost"] or 0,
                "contextWindow": 200000,
                "maxOutputTokens": 64000,
            }
        },
        "permission_denials": [],
        "uuid": str(uuid.uuid4()),
    }
    code = 0
    if outcome == "max_turns":
        del result["result"]
        result.update(
            subtype="error_max_turns",
            is_error=True,
            errors=[f"Reached maximum number of turns ({options.get('--max-turns', turns)})"],
            terminal_reason="max_turns",
        )
        code = 1
    if outcome == "limited":  # the CLI's own result for its model's 429: status and reset
        result.update(
            is_error=True,
            api_error_status=429,
            result=f"Claude AI usage limit reached|{int(plan.get('reset', 0))}",
        )
        code = 1
    if outcome == "denied":
        tool = str(plan.get("tool", "Bash"))
        result["permission_denials"] = [
            {"tool_name": tool, "tool_use_id": "toolu_1", "tool_input": plan.get("input", {})}
        ]
    if fmt == "json":
        fakecli.out(fakecli.compact(result) + "\n")
    elif fmt == "stream-json":
        fakecli.out(fakecli.compact({"type": "system", "subtype": "init"}) + "\n")
        fakecli.out(fakecli.compact(result) + "\n")
    else:
        fakecli.out(str(result.get("result", "")) + "\n")
    return code


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
