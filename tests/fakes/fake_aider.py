"""Fake `aider` (aider-chat 0.86.2, --message mode), faithful to docs/agent-clis.md section 3.

Outcomes: success. An API error is the real program's own: tests/agents_real/test_aider.py.
Like aider it commits its edits unless --no-auto-commits, adds .aider* to .gitignore unless
--no-gitignore, and writes its history files into the repository unless told otherwise.
"""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path

from tests.fakes import fakecli

VERSION = "0.86.2"
_PAIRS = {"auto-commits", "dirty-commits", "gitignore", "pretty", "stream", "check-update", "git"}
_PAIRS |= {"show-model-warnings", "show-release-notes", "fancy-input", "auto-lint", "auto-test"}
_PAIRS |= {"restore-chat-history", "suggest-shell-commands", "detect-urls", "analytics"}
_TRUE = {"--yes-always", "--analytics-disable", "--subtree-only", "--version", "-h", "--help"}
_TRUE |= {"--no-verify-ssl", "--show-diffs"}
_VALUE = {"--model", "--message", "--msg", "-m", "--message-file", "-f", "--openai-api-base"}
_VALUE |= {"--openai-api-key", "--api-key", "--set-env", "--model-metadata-file", "--map-tokens"}
_VALUE |= {"--input-history-file", "--chat-history-file", "--llm-history-file", "--edit-format"}
_VALUE |= {"--read", "--encoding", "--env-file", "--lint-cmd", "--test-cmd", "--weak-model"}
_USAGE = (
    "usage: aider [-h] [--model MODEL] [--openai-api-key OPENAI_API_KEY]\n"
    "             [--message COMMAND] [--message-file MESSAGE_FILE]\n"
    "             [--yes-always] [--auto-commits | --no-auto-commits]\n"
    "             [FILE ...]\n"
)


def format_tokens(count: int) -> str:
    """aider.utils.format_tokens."""
    if count < 1000:
        return f"{count}"
    if count < 10000:
        return f"{count / 1000:.1f}k"
    return f"{round(count / 1000)}k"


def format_cost(value: float) -> str:
    """base_coder's format_cost."""
    if value == 0:
        return "0.00"
    if abs(value) >= 0.01:
        return f"{value:.2f}"
    import math

    return f"{value:.{max(2, 2 - int(math.log10(abs(value))))}f}"


def parse(args: list[str]) -> tuple[dict[str, object], list[str]] | int:
    """argparse-style: unknown arguments are collected and reported together (exit 2)."""
    options: dict[str, object] = {}
    files: list[str] = []
    unknown: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        name = arg.split("=", 1)[0] if arg.startswith("--") else arg
        bare = name[5:] if name.startswith("--no-") else name[2:]
        if not arg.startswith("-"):
            files.append(arg)
            i += 1
        elif name.startswith("--") and bare in _PAIRS:
            options[bare] = not name.startswith("--no-")
            i += 1
        elif name in _TRUE:
            options[name] = True
            i += 1
        elif name in _VALUE:
            try:
                options[name], i = fakecli.take_value(args, i, name)
            except fakecli.MissingValue:
                fakecli.err(f"{_USAGE}aider: error: argument {name}: expected one argument\n")
                return 2
        else:
            unknown.append(arg)
            i += 1
    if unknown:
        fakecli.err(f"{_USAGE}aider: error: unrecognized arguments: {' '.join(unknown)}\n")
        return 2
    return options, files


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.update(GIT_AUTHOR_NAME="aider", GIT_AUTHOR_EMAIL="aider@example.com")
    env.update(GIT_COMMITTER_NAME="aider", GIT_COMMITTER_EMAIL="aider@example.com")
    return subprocess.run(
        ["git", *args], cwd=root, env=env, capture_output=True, text=True, check=False
    )


def main(args: list[str]) -> int:
    fakecli.trace("aider", args)
    parsed = parse(args)
    if isinstance(parsed, int):
        return parsed
    options, files = parsed
    if options.get("--version"):
        fakecli.out(f"aider {VERSION}\n")
        return 0
    root = Path.cwd()
    in_git = options.get("git", True) and _git(root, "rev-parse", "--git-dir").returncode == 0
    message = options.get("--message") or options.get("--msg") or options.get("-m")
    message_file = options.get("--message-file") or options.get("-f")
    if isinstance(message_file, str):
        try:
            message = Path(message_file).read_text(encoding="utf-8")
        except OSError:
            fakecli.out(f"Message file not found: {message_file}\n")
            return 1
    yes = bool(options.get("--yes-always"))
    if options.get("--analytics-disable"):
        fakecli.out("Analytics have been permanently disabled.\n\n")
    if in_git and options.get("gitignore", True):
        ignore = root / ".gitignore"
        text = ignore.read_text(encoding="utf-8") if ignore.exists() else ""
        if ".aider*" not in text:
            fakecli.out("Add .aider* to .gitignore (recommended)? (Y)es/(N)o [Yes]: ")
            if not yes:
                sys.stdin.readline()  # a confirmation reads stdin: an open pipe blocks here
            fakecli.out("y\nAdded .aider* to .gitignore\n")
            ignore.write_text(
                text + (".aider*\n" if text.endswith("\n") or not text else "\n.aider*\n")
            )
    model = str(options.get("--model", "gpt-4o"))
    fakecli.out(f"Aider v{VERSION}\nModel: {model} with whole edit format\n")
    fakecli.out(
        "Git repo: .git with 3 files\nRepo-map: using 1024 tokens, auto refresh\n"
        if in_git
        else "Git repo: none\nRepo-map: disabled\n"
    )
    for name in files:
        fakecli.out(f"Added {name} to the chat.\n")
    if not isinstance(message, str) or not message.strip():
        fakecli.read_stdin_to_eof()  # the interactive chat: EOF ends it
        return 0
    plan = fakecli.script()
    fakecli.barriers(plan)
    history = Path(str(options.get("--chat-history-file", root / ".aider.chat.history.md")))
    with history.open("a", encoding="utf-8") as handle:
        handle.write(
            f"\n# aider chat started at {datetime.now():%Y-%m-%d %H:%M:%S}\n\n#### {message[:200]}\n"
        )
    fakecli.out("\n")
    changed = fakecli.apply_edits(plan, root)
    fakecli.out(str(plan.get("summary", "I made the change.")) + "\n\n")
    for name in changed:
        fakecli.out(f"Applied edit to {name}\n")
    if changed and in_git and options.get("auto-commits", True):
        _git(root, "add", "--", *changed)
        result = _git(root, "commit", "-q", "-m", "fix: scripted change")
        if result.returncode == 0:
            commit = _git(root, "rev-parse", "--short", "HEAD").stdout.strip()
            fakecli.out(f"Commit {commit} fix: scripted change\n")
    used = fakecli.usage(plan)
    line = f"Tokens: {format_tokens(used['input'])} sent, {format_tokens(used['output'])} received."
    if used["cost"] is not None:
        cost = float(used["cost"])
        line += f" Cost: ${format_cost(cost)} message, ${format_cost(cost)} session."
    fakecli.out("\n" + line + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
