"""Stuck runs on the agent's log: its tool calls and their results, where no gateway serves it.

Read only from the structured events of a known format, one whole JSON object a line:
Claude Code's stream-json (an assistant message's `tool_use` block, then the user message's
`tool_result` block with its id) and Codex's `--json` (`item.completed` of a command, a file
change, an MCP tool call or a web search, which holds the call and its result). Any other
line (free text, a tool's own output, an event of another kind) is never read. A step is one
call with its result, ids left out; each conversation (Claude's sub-agents have their own)
counts its own steps alike in a row. An API error the CLI retries is no step: it neither
counts nor breaks a count.

The agent writes its log, so it could print a loop it is not in: that ends its own run as
STUCK, a failure of the run, so faking one gains it nothing.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, cast

from kernel.bounds import printable
from kernel.records.repeats import Streaks, without_ids

LINE_MAX = 1 << 20
"""Bytes of one log line read (a longer one is skipped whole)."""
_PENDING_MAX = 1000
"""Claude tool calls kept waiting for their result."""
_SHOWN = 300
_CODEX_ACTIONS = frozenset({"command_execution", "file_change", "mcp_tool_call", "web_search"})


@dataclass(frozen=True)
class Step:
    """One tool call and its result, in its conversation."""

    conversation: str
    digest: str
    shown: str


@dataclass(frozen=True)
class Seen:
    """What one log line held: the steps it ended, and whether it began a turn."""

    steps: tuple[Step, ...] = ()
    turns: int = 0


def _step(conversation: str, call: Any, result: Any) -> Step:
    text = json.dumps([call, result], sort_keys=True, default=str)
    shown = printable(json.dumps(call, sort_keys=True, default=str), _SHOWN)
    return Step(conversation, hashlib.sha256(text.encode()).hexdigest(), shown)


def _blocks(event: dict[str, Any]) -> list[dict[str, Any]]:
    message = event.get("message")
    content = cast(dict[str, Any], message).get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return []
    return [cast(dict[str, Any], b) for b in cast(list[Any], content) if isinstance(b, dict)]


@dataclass
class Reader:
    """Reads log lines one by one, remembering Claude's calls until their results come."""

    _pending: dict[str, tuple[str, Any]] = field(default_factory=dict[str, tuple[str, Any]])
    _messages: set[str] = field(default_factory=set[str])

    def line(self, raw: bytes) -> Seen:
        """The steps and turns of one line (nothing for a line of no known event)."""
        if not raw.startswith(b'{"type"') or len(raw) > LINE_MAX:
            return Seen()
        try:
            event = json.loads(raw)
        except (ValueError, RecursionError):
            return Seen()
        if not isinstance(event, dict):
            return Seen()
        event = cast(dict[str, Any], event)
        kind = event.get("type")
        if kind == "assistant":
            return self._calls(event)
        if kind == "user":
            return self._results(event)
        if kind == "item.completed":
            return _codex(event)
        return Seen()

    def _calls(self, event: dict[str, Any]) -> Seen:
        conversation = str(event.get("parent_tool_use_id") or "")
        turns = 0
        for block in _blocks(event):
            use = block.get("id")
            if block.get("type") != "tool_use" or not isinstance(use, str):
                continue
            if len(self._pending) < _PENDING_MAX:
                self._pending[use] = (conversation, without_ids(block))
            message = cast(dict[str, Any], event["message"]).get("id")
            key = message if isinstance(message, str) else use
            if key not in self._messages:  # one message's parallel calls are one turn
                self._messages.add(key)
                turns = 1
        return Seen(turns=turns)

    def _results(self, event: dict[str, Any]) -> Seen:
        steps: list[Step] = []
        for block in _blocks(event):
            use = block.get("tool_use_id")
            if block.get("type") != "tool_result" or not isinstance(use, str):
                continue
            found = self._pending.pop(use, None)
            if found is not None:
                steps.append(_step(found[0], found[1], without_ids(block)))
        return Seen(tuple(steps))


def _codex(event: dict[str, Any]) -> Seen:
    item = event.get("item")
    if not isinstance(item, dict):
        return Seen()
    item = cast(dict[str, Any], item)
    if item.get("type") not in _CODEX_ACTIONS:
        return Seen()
    call = {k: v for k, v in without_ids(item).items() if k not in ("aggregated_output", "result")}
    return Seen((_step("codex", call, without_ids(item)),), turns=1)


class LogRepeats:
    """The counts of one run's conversations in its log; `seen` says when one reached `limit`."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        """Steps alike in a row that end the run (0: never)."""
        self._streaks = Streaks()

    def seen(self, step: Step) -> str:
        """Count one step; why the run is stuck ('' while it is not)."""
        if self.limit <= 0:
            return ""
        times = self._streaks.count(step.conversation, step.digest)
        if times < self.limit:
            return ""
        return (
            f"{times} identical tool calls in a row in the agent's log, each with the "
            f"same result; the repeated call: {step.shown}"
        )
