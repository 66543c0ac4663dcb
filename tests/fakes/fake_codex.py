"""Fake `codex` (Codex CLI 0.169.0, `codex exec`), faithful to docs/agent-clis.md section 2.

Outcomes: success (an API error is the real program's own: tests/agents_real/). Like the
real CLI, a shell edit is one command_execution item (no file_change item follows).
The default sandbox is read-only: edits are refused unless -s workspace-write (or higher).
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

from tests.fakes import fakecli

VERSION = "codex-cli 0.169.0"
SANDBOXES = ("read-only", "workspace-write", "danger-full-access")
_BOOL = {"--json", "--experimental-json", "--skip-git-repo-check", "--ephemeral"}
_BOOL |= {"--ignore-user-config", "--dangerously-bypass-approvals-and-sandbox", "--yolo"}
_BOOL |= {"--oss", "-h", "--help"}
_VALUE = {"-s", "--sandbox", "-C", "--cd", "-m", "--model", "-o", "--output-last-message"}
_VALUE |= {"--output-schema", "--add-dir", "-p", "--profile", "--color", "--local-provider"}
_REPEAT = {"-c", "--config", "-i", "--image"}
_USAGE = "Usage: codex exec [OPTIONS] [PROMPT]\n       codex exec [OPTIONS] <COMMAND> [ARGS]\n"


def _usage_error(message: str) -> int:
    fakecli.err(f"error: {message}\n\n{_USAGE}\nFor more information, try '--help'.\n")
    return 2


def _event(value: dict[str, object]) -> None:
    fakecli.out(fakecli.compact(value) + "\n")


def _in_git_repo(root: Path) -> bool:
    result = subprocess.run(
        ["git", "rev-parse", "--is-inside-work-tree"],
        cwd=root,
        capture_output=True,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    return result.returncode == 0


def main(args: list[str]) -> int:
    fakecli.trace("codex", args)
    if args[:1] in (["--version"], ["-V"]):
        fakecli.out(VERSION + "\n")
        return 0
    if args[:1] != ["exec"]:
        return _usage_error("this fake only knows `codex exec` and `codex --version`")
    try:
        flags = fakecli.parse_flags(args[1:], _BOOL, _VALUE, repeat=_REPEAT, end_of_options=True)
    except fakecli.MissingValue as missing:
        return _usage_error(f"a value is required for '{missing} <VALUE>' but none was supplied")
    except fakecli.UnknownFlag as unknown:
        arg = unknown.arg
        return _usage_error(
            f"unexpected argument '{arg}' found\n\n  tip: to pass '{arg}' as a value, use '-- {arg}'"
        )
    options, positional = flags.options, flags.positional
    sandbox = str(options.get("-s", options.get("--sandbox", "read-only")))
    if sandbox not in SANDBOXES:
        fakecli.err(
            f"error: invalid value '{sandbox}' for '--sandbox <SANDBOX_MODE>'\n"
            f"  [possible values: {', '.join(SANDBOXES)}]\n\nFor more information, try '--help'.\n"
        )
        return 2
    yolo = bool(options.get("--yolo") or options.get("--dangerously-bypass-approvals-and-sandbox"))
    root = Path(str(options.get("-C", options.get("--cd", ".")))).resolve()
    if not root.is_dir():
        fakecli.err(f"Error: No such file or directory (os error 2): {root}\n")
        return 1
    if not (options.get("--skip-git-repo-check") or yolo or _in_git_repo(root)):
        fakecli.err("Not inside a trusted directory and --skip-git-repo-check was not specified.\n")
        return 1
    prompt = " ".join(positional)
    if fakecli.stdin_kind() not in ("tty", "closed"):
        fakecli.err("Reading additional input from stdin...\n")
        extra = fakecli.read_stdin_to_eof()  # blocks until EOF, even with a prompt argument
        prompt = (prompt + f"\n<stdin>\n{extra}\n</stdin>") if prompt and extra else prompt or extra
    if not prompt.strip() or prompt == "-":
        fakecli.err("No prompt provided via stdin.\n")
        return 1
    plan = fakecli.script()
    fakecli.barriers(plan)
    used = fakecli.usage(plan)
    if not options.get("--json") and not options.get("--experimental-json"):
        fakecli.err("codex (human output; this fake writes events only with --json)\n")
    _event({"type": "thread.started", "thread_id": str(uuid.uuid4())})
    _event(
        {
            "type": "item.completed",
            "item": {
                "id": "item_0",
                "type": "error",
                "message": "Model metadata for `fake-model` not found. Defaulting to fallback metadata; this can degrade performance and cause issues.",
            },
        }
    )
    _event({"type": "turn.started"})
    n = 1
    writable = yolo or sandbox != "read-only"
    if plan.get("edits"):
        command = "/bin/bash -lc 'apply the scripted edits'"
        _event(
            {
                "type": "item.started",
                "item": {
                    "id": f"item_{n}",
                    "type": "command_execution",
                    "command": command,
                    "aggregated_output": "",
                    "exit_code": None,
                    "status": "in_progress",
                },
            }
        )
        if writable:
            fakecli.apply_edits(plan, root)
            output, code, status = "done\n", 0, "completed"
        else:
            output, code, status = "bash: Read-only file system\n", 1, "failed"
        _event(
            {
                "type": "item.completed",
                "item": {
                    "id": f"item_{n}",
                    "type": "command_execution",
                    "command": command,
                    "aggregated_output": output,
                    "exit_code": code,
                    "status": status,
                },
            }
        )
        n += 1
    summary = str(plan.get("summary", "Done."))
    _event(
        {
            "type": "item.completed",
            "item": {"id": f"item_{n}", "type": "agent_message", "text": summary},
        }
    )
    _event(
        {
            "type": "turn.completed",
            "usage": {
                "input_tokens": used["input"],
                "cached_input_tokens": used["cached"],
                "cache_write_input_tokens": 0,
                "output_tokens": used["output"],
                "reasoning_output_tokens": 0,
            },
        }
    )
    last = options.get("-o", options.get("--output-last-message"))
    if isinstance(last, str):
        Path(last).write_text(summary, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
