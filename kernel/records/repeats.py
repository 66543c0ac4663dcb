"""Stuck runs: model requests that repeat with no change, as the gateway sees them.

Each request carries the conversation so far, so what is new in it is its last two items:
the model's latest answer (a tool call) and what came of it (the tool's result). A request
repeats the one before in its conversation when those two are the same (the ids the tools
and the vendors give each call left out) and its answer is the same again (numbers left out:
ids, times and token counts differ in every answer). N such requests in a row end the run.
A request answered with an error is not counted either way (a retry after an error is not a
repeat), and each conversation (its model, system prompt and first message) keeps its own
count, so a CLI's side calls (titles, summaries) do not break one.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any, cast

from kernel.bounds import printable

_IDS = frozenset({"id", "call_id", "tool_call_id", "tool_use_id", "index"})
"""Keys whose values name one call, not what it does."""
_NUMBERS = re.compile(rb"\d+")
_SHOWN = 300
"""Characters of the repeated call quoted in the evidence."""
_DEPTH_MAX = 64


def without_ids(value: Any, depth: int = 0) -> Any:
    """The value with the keys that name one call (ids) left out, at every depth."""
    if depth > _DEPTH_MAX:
        return None
    if isinstance(value, dict):
        items = cast(dict[str, Any], value).items()
        return {k: without_ids(v, depth + 1) for k, v in items if k not in _IDS}
    if isinstance(value, list):
        return [without_ids(v, depth + 1) for v in cast(list[Any], value)]
    return value


def _conversation(doc: dict[str, Any]) -> list[Any] | None:
    """The request's conversation: Anthropic's and chat's messages, the Responses API's
    input, Gemini's contents."""
    for name in ("messages", "input", "contents"):
        value = doc.get(name)
        if isinstance(value, list):
            return cast(list[Any], value)
    return None


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class Step:
    """What one request adds to its conversation, and the conversation it belongs to."""

    conversation: str
    step: str
    shown: str


def step_of(body: bytes) -> Step | None:
    """The request's step (None for a body that holds no conversation of two items or more)."""
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(doc, dict):
        return None
    doc = cast(dict[str, Any], doc)
    items = _conversation(doc)
    if items is None or len(items) < 2:
        return None
    root = [doc.get("model"), doc.get("system"), doc.get("instructions"), without_ids(items[0])]
    last = without_ids(items[-2:])
    shown = printable(json.dumps(last, sort_keys=True, default=str), _SHOWN)
    return Step(_digest(root), _digest(last), shown)


class Streaks:
    """How many times in a row each conversation brought the same key."""

    def __init__(self) -> None:
        self._last: dict[str, tuple[str, int]] = {}

    def count(self, conversation: str, key: str) -> int:
        """Count one key in its conversation; how many alike in a row, this one included."""
        last, times = self._last.get(conversation, ("", 0))
        times = times + 1 if last == key else 1
        self._last[conversation] = (key, times)
        return times


class Repeats:
    """The counts of one run's conversations; `seen` says when one reached `limit`."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        """Requests alike in a row that end the run (0: never)."""
        self._streaks = Streaks()

    def seen(self, request: bytes, status: int, answer: bytes) -> str:
        """Count one answered request; why the run is stuck ('' while it is not)."""
        if self.limit <= 0 or status >= 400 or status < 200:
            return ""
        step = step_of(request)
        if step is None:
            return ""
        shape = hashlib.sha256(_NUMBERS.sub(b"0", answer)).hexdigest()
        times = self._streaks.count(step.conversation, f"{step.step} {shape}")
        if times < self.limit:
            return ""
        return (
            f"{times} identical model requests in a row, each answered alike; "
            f"the repeated step: {step.shown}"
        )
