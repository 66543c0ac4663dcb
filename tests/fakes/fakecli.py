"""What the fake agent CLIs in tests/fakes/cli/ share (stdlib only).

Each fake accepts the real tool's flags (and fails on others the way the tool does), writes
the tool's real output shapes, and follows a script named by FAKE_AGENT_SCRIPT (a JSON file):

    {"edits": [...],            steps as in scripted_agent.py: write, append, replace, delete
     "outcome": "success",      or a tool-specific failure (see each fake)
     "usage": {"input": 1200, "output": 300, "cached": 0, "cost": 0.05},
     "summary": "what the agent says it did",
     "touch": "/abs/barrier", "wait_for": "/abs/barrier", "hang": false,
     "noise_lines": 0}          opencode: log lines on stderr before its events

With no script the fake changes nothing and succeeds. Every run appends one JSON line to
FAKE_AGENT_TRACE (if set): tool, argv, cwd, the environment's variable names, and what stdin was.
Both variables reach the fake only if seed.toml's [agent] env lists them.
"""

from __future__ import annotations

import json
import os
import select
import stat
import sys
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def _in_sandbox() -> bool:
    """Inside a new PID namespace: the process with pid 1 is bubblewrap, not the machine's init."""
    try:
        return Path("/proc/1/comm").read_text().strip() == "bwrap"
    except OSError:
        return False


def script() -> dict[str, Any]:
    """The scripted behaviour ({} when FAKE_AGENT_SCRIPT is unset)."""
    path = os.environ.get("FAKE_AGENT_SCRIPT")
    if not path:
        return {}
    return json.loads(Path(path).read_text(encoding="utf-8"))


def stdin_kind() -> str:
    """closed, devnull, tty, pipe or file: what the parent left on fd 0."""
    try:
        mode = os.fstat(0).st_mode
    except OSError:
        return "closed"
    if os.isatty(0):
        return "tty"
    if stat.S_ISCHR(mode):
        return "devnull"
    if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
        return "pipe"
    return "file"


def trace(tool: str, argv: list[str]) -> None:
    """Append how this fake was started to FAKE_AGENT_TRACE."""
    path = os.environ.get("FAKE_AGENT_TRACE")
    if not path:
        return
    entry = {
        "tool": tool,
        "argv": argv,
        "cwd": os.getcwd(),
        "env": sorted(os.environ),
        "stdin": stdin_kind(),
        # its own group, or (in seed's sandbox) the group its PID namespace's init leads
        "pgid_is_own": os.getpgid(0) == os.getpid() or (os.getpgid(0) == 1 and _in_sandbox()),
    }
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry) + "\n")


def read_stdin_to_eof() -> str:
    """What tools that read a non-terminal stdin do: block until EOF (an open pipe hangs them)."""
    if stdin_kind() in ("tty", "closed"):
        return ""
    return sys.stdin.buffer.read().decode("utf-8", errors="replace")


def read_stdin_if_data(wait_s: float) -> str:
    """gemini's readStdin: wait briefly for data; once some arrives, read to EOF."""
    if stdin_kind() in ("tty", "closed"):
        return ""
    ready, _, _ = select.select([0], [], [], wait_s)
    if not ready:
        return ""
    return sys.stdin.buffer.read().decode("utf-8", errors="replace")


def barriers(plan: dict[str, Any]) -> None:
    """touch / wait_for / hang, for tests that need the agent to pause."""
    if plan.get("touch"):
        Path(plan["touch"]).write_text(str(os.getpid()), encoding="utf-8")
    if plan.get("wait_for"):
        while not Path(plan["wait_for"]).exists():
            time.sleep(0.05)
    while plan.get("hang"):
        time.sleep(1)


def apply_edits(plan: dict[str, Any], root: Path) -> list[str]:
    """Carry out the scripted edits under root; the relative paths changed."""
    changed: list[str] = []
    for step in plan.get("edits", []):
        kind = next(k for k in ("write", "append", "replace", "delete") if k in step)
        target = root / step[kind]
        if kind == "write":
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(step["text"], encoding="utf-8")
        elif kind == "append":
            with target.open("a", encoding="utf-8") as handle:
                handle.write(step["text"])
        elif kind == "replace":
            text = target.read_text(encoding="utf-8")
            target.write_text(text.replace(step["old"], step["new"]), encoding="utf-8")
        else:
            target.unlink()
        changed.append(step[kind])
    return changed


def usage(plan: dict[str, Any]) -> dict[str, Any]:
    """Scripted token counts and cost (cost None: the model has no price)."""
    raw = plan.get("usage", {})
    return {
        "input": int(raw.get("input", 1200)),
        "output": int(raw.get("output", 300)),
        "cached": int(raw.get("cached", 0)),
        "cost": raw.get("cost", 0.05),
    }


def out(text: str) -> None:
    """Write to stdout and flush."""
    sys.stdout.write(text)
    sys.stdout.flush()


def err(text: str) -> None:
    """Write to stderr and flush."""
    sys.stderr.write(text)
    sys.stderr.flush()


def take_value(args: list[str], i: int, flag: str) -> tuple[str, int]:
    """The value of a flag given as `--flag value` or `--flag=value`; (value, next index)."""
    if "=" in args[i] and args[i].startswith("--"):
        return args[i].split("=", 1)[1], i + 1
    if i + 1 >= len(args):
        raise MissingValue(flag)
    return args[i + 1], i + 2


class MissingValue(Exception):
    """A flag that needs a value came last."""


class UnknownFlag(Exception):
    """A flag the tool does not know: `arg` as given, `name` without its `=value`."""

    def __init__(self, arg: str, name: str) -> None:
        super().__init__(arg)
        self.arg, self.name = arg, name


@dataclass
class Flags:
    """A command line split into options, repeated options and positionals."""

    options: dict[str, object] = field(default_factory=dict[str, object])
    repeated: list[str] = field(default_factory=list[str])
    positional: list[str] = field(default_factory=list[str])


def parse_flags(
    args: list[str],
    bools: Collection[str],
    values: Collection[str],
    *,
    repeat: Collection[str] = (),
    variadic: Collection[str] = (),
    end_of_options: bool = False,
) -> Flags:
    """Split args the way option parsers do; raises UnknownFlag or MissingValue.

    Variadic options take every following argument up to the next flag; with
    end_of_options, `--` makes the rest positional and a lone `-` is a positional.
    """
    flags = Flags()
    i = 0
    while i < len(args):
        arg = args[i]
        name = arg.split("=", 1)[0] if arg.startswith("--") else arg
        if end_of_options and arg == "--":
            flags.positional += args[i + 1 :]
            break
        if not arg.startswith("-") or (end_of_options and arg == "-"):
            flags.positional.append(arg)
            i += 1
        elif name in bools:
            flags.options[name] = True
            i += 1
        elif name in values or name in repeat:
            value, i = take_value(args, i, name)
            if name in repeat:
                flags.repeated.append(value)
            else:
                flags.options[name] = value
        elif name in variadic:
            taken: list[str] = []
            i += 1
            while i < len(args) and not args[i].startswith("-"):
                taken.append(args[i])
                i += 1
            if not taken:
                raise MissingValue(name)
            flags.options[name] = taken
        else:
            raise UnknownFlag(arg, name)
    return flags


def compact(value: object) -> str:
    """JSON as JavaScript's and Rust's serializers write it (no spaces)."""
    return json.dumps(value, separators=(",", ":"))
