"""Replay: a recorded iteration's model answers given back in order, in place of the upstream.

The recording is read through exchanges.read (a line edited by hand breaks its seal and is
refused, named). The gateway is started with `answer_from=Replay.answer`: each request of the
agent is the next turn of the round replayed; it is compared with the recorded request (method,
path, model, body hash: the first that differs is named) and, when alike, answered with the
recorded status, content headers and body bytes, an event stream piece by piece. At the first
difference the replay stops answering: that request and every one after it get an error in the
vendor's shape that no CLI retries, and `divergence` says the turn and what differed. Nothing
goes to the network and nothing is spent.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import cast

from kernel.bounds import MODEL_BODY_MAX, printable
from kernel.isolation.gateway import Answer, Exchange, Refusal
from kernel.records import exchanges
from kernel.records.exchanges import ExchangeLine, RecordingRefused
from kernel.records.wire import REFUSAL_STATUS

STATUS = REFUSAL_STATUS
"""The divergence's error status: the one none of the six CLIs retries (records/wire.py)."""
_CONTENT = frozenset({"content-type", "content-encoding"})
"""The answer headers a replay sends as recorded (the gateway frames the body itself)."""
_EVENT_END = re.compile(rb"\r?\n\r?\n")
_UUID = re.compile(rb"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")
_MODEL_MAX = 200
VOLATILE: dict[str, tuple[re.Pattern[bytes], ...]] = {
    "claude": (
        re.compile(rb"Today's date is [0-9]{4}-[0-9]{2}-[0-9]{2}\."),  # its system prompt
        # metadata.user_id's device id: made afresh in each run's fresh HOME
        re.compile(rb'device_id\\":\\"[0-9a-f]{64}\\"'),
    ),
    "codex": (
        # ids and the turn's start time, its keys in a hash map's order (new on every run): the
        # object of string values only, up to its own closing brace
        re.compile(rb'"client_metadata":\{(?:"[^"\\]*":"(?:[^"\\]|\\.)*",?)*\}'),
        # its shell tool's output header: a random chunk id and the command's own wall time
        re.compile(rb"Chunk ID: [0-9a-f]{6}"),
        re.compile(rb"Wall time: [0-9]+\.[0-9]+ seconds"),
    ),
    "gemini": (
        # its project temp folder, named after the checkout's folder
        re.compile(rb"\.gemini/tmp/wt-[0-9]+-[0-9]{20}"),
        # the id it gives a function call: the tool's name, the time in ms, a counter
        re.compile(rb'"id":"[A-Za-z0-9_]+?_[0-9]{13}_[0-9]+"'),
    ),
}
"""Per backend, what its requests hold that differs on every run beyond UUIDs and the
checkout's path (a date, a temp path): masked for the match, each named and narrow."""


@dataclass(frozen=True)
class Divergence:
    """Where the replayed agent's requests left the recording: the turn and the first difference."""

    turn: int
    what: str
    """"method", "path", "model", "body", or "turns" (a request past the recording's end)."""
    recorded: str
    replayed: str

    def __str__(self) -> str:
        return f"turn {self.turn}: the {self.what} differs (recorded {self.recorded}, replayed {self.replayed})"


@dataclass(frozen=True)
class _Turn:
    line: ExchangeLine
    folder: Path

    @property
    def request(self) -> bytes:
        return exchanges.body(self.folder, self.line.request)

    @property
    def answer(self) -> bytes:
        return exchanges.body(self.folder, self.line.answer)


def checkouts(folder: Path) -> re.Pattern[bytes]:
    """The path of any agent checkout in the kernel's folder of them (wt-PID-TIME, loop.prepare):
    a replay runs in a fresh one, and the CLIs tell the model where they work; also spelled as
    a folder name (every character but a letter or digit a dash: Claude Code's project folder)."""
    path = os.fsencode(folder)
    slug = re.sub(rb"[^A-Za-z0-9]", b"-", path)
    return re.compile(rb"(?:%s/|%s-)wt-[0-9]+-[0-9]+" % (re.escape(path), re.escape(slug)))


def rounds(lines: Sequence[ExchangeLine]) -> list[list[ExchangeLine]]:
    """The recording's rounds, each in request order: a round's gateway numbers from 1, and lines
    are written as answers end (so out of order within a round, never across a new 1)."""
    found: list[list[ExchangeLine]] = []
    for line in lines:
        if line.seq == 1 or not found:
            found.append([])
        found[-1].append(line)
    return [sorted(round_, key=lambda line: line.seq) for round_ in found]


class Replay:
    """One round of a recording, answering the gateway's requests in order (thread-safe).

    Requests the recording had in flight together (a CLI's side call beside its main one) may
    come in either order; any other request must be the next recorded one. A request body is
    compared without what differs on every run: fresh UUIDs (numbered by first appearance) and
    whatever `volatile` matches (the run's checkout path)."""

    def __init__(
        self,
        folder: Path,
        lines: Sequence[ExchangeLine],
        volatile: Sequence[re.Pattern[bytes]] = (),
    ) -> None:
        self._volatile = tuple(volatile)
        self._turns: list[_Turn] = []
        for line in lines:
            if line.answer.cut:
                raise RecordingRefused(0, f"turn {line.seq}'s answer was cut when recorded")
            turn = _Turn(line, folder)
            # every stored body checked now, held only when its turn comes (they may be large)
            _ = (len(turn.request), len(turn.answer))
            self._turns.append(turn)
        self._lock = threading.Lock()
        self._done: set[int] = set()
        self.divergence: Divergence | None = None

    @classmethod
    def load(
        cls,
        folder: Path,
        state: Path,
        round_: int = 1,
        volatile: Sequence[re.Pattern[bytes]] = (),
    ) -> Replay:
        """Round `round_` (from 1) of history/<id>/model.jsonl, verified against its seal."""
        found = rounds(exchanges.read(folder, state))
        if not 1 <= round_ <= len(found):
            raise RecordingRefused(0, f"no round {round_} recorded (rounds: {len(found)})")
        return cls(folder, found[round_ - 1], volatile)

    @property
    def turns(self) -> int:
        """How many requests the round recorded."""
        return len(self._turns)

    @property
    def answered(self) -> int:
        """Requests answered from the recording."""
        return len(self._done)

    @property
    def finished(self) -> bool:
        """Every recorded turn was asked for and answered, and nothing diverged."""
        return self.divergence is None and self.answered == len(self._turns)

    def answer(self, exchange: Exchange) -> Answer | Refusal:
        """The recorded answer to the next turn, or the divergence's error from there on."""
        with self._lock:
            if self.divergence is None:
                index, self.divergence = self._next(exchange)
                if self.divergence is None:
                    self._done.add(index)
                    return _answer(self._turns[index])
            message = f"seed replay: the agent's request left the recording at {self.divergence}"
            refusal = Refusal.of(exchange.api, STATUS, message)
            return Refusal(refusal.status, refusal.body, (("x-should-retry", "false"),))

    def _next(self, exchange: Exchange) -> tuple[int, Divergence | None]:
        """The recorded turn this request is, or how it differs from the one it should be."""
        waiting = [i for i in range(len(self._turns)) if i not in self._done]
        if not waiting:
            extra = len(self._turns) + 1
            return -1, Divergence(
                extra, "turns", f"{len(self._turns)} requests", f"request {extra}"
            )
        first = self._turns[waiting[0]].line
        ends = first.started + timedelta(seconds=first.seconds)
        together = [i for i in waiting if self._turns[i].line.started < ends]
        for index in together or waiting[:1]:
            if _differs(index + 1, self._turns[index], exchange, self._volatile) is None:
                return index, None
        return -1, _differs(waiting[0] + 1, self._turns[waiting[0]], exchange, self._volatile)


def _differs(
    turn: int, recorded: _Turn, exchange: Exchange, volatile: Sequence[re.Pattern[bytes]]
) -> Divergence | None:
    """The first of method, path, model and body hash that differs from the recorded request."""
    line, before = recorded.line, recorded.request
    body = exchange.body[:MODEL_BODY_MAX]  # as the recording kept it
    pairs = (
        ("method", line.method, printable(exchange.method, 20)),
        ("path", line.path, exchanges.redact_path(exchange.path)),
        ("model", _model(before, line.path), _model(body, exchange.path)),
        ("body", _hashed(steady(before, volatile)), _hashed(steady(body, volatile))),
    )
    for what, was, now in pairs:
        if was != now:
            return Divergence(turn, what, was or "none", now or "none")
    return None


def steady(body: bytes, volatile: Sequence[re.Pattern[bytes]] = ()) -> bytes:
    """The body without what differs on every run: what `volatile` matches, and UUIDs (a
    session's, a request's), each numbered by its first appearance so the same one stays one."""
    for pattern in volatile:
        body = pattern.sub(b"<volatile>", body)
    seen: dict[bytes, int] = {}
    return _UUID.sub(
        lambda found: b"<uuid-%d>" % seen.setdefault(found.group().lower(), len(seen) + 1), body
    )


def _hashed(body: bytes) -> str:
    return f"sha256 {exchanges.sha256(body)[:16]}, {len(body):,} bytes"


def _model(body: bytes, path: str) -> str:
    """The model a request names: its body's "model", or Gemini's path."""
    try:
        doc: object = json.loads(body)
    except (ValueError, RecursionError):
        doc = None
    if isinstance(doc, dict):
        model = cast(dict[str, object], doc).get("model")
        if isinstance(model, str):
            return printable(model, _MODEL_MAX)
    if "/models/" in path:
        return printable(path.split("/models/", 1)[1].split(":", 1)[0], _MODEL_MAX)
    return ""


def _answer(turn: _Turn) -> Answer:
    """The recorded answer: its status and content headers, its body cut after each event."""
    headers = turn.line.answer_headers
    kept = tuple(
        (name, value)
        for name, value in headers.items()
        if name in _CONTENT and value != exchanges.REDACTED
    )
    data = turn.answer
    if "content-type" not in headers:  # recorded without its head: told from its first byte
        json_like = data.lstrip()[:1] in (b"{", b"[")
        kept += (("content-type", "application/json" if json_like else "text/event-stream"),)
    # framed by its length if it was, and an event stream event by event either way
    return Answer(turn.line.status, kept, tuple(_events(data)), "content-length" in headers)


def _events(data: bytes) -> list[bytes]:
    """The body cut after each event's blank line, so a stream goes out event by event."""
    pieces: list[bytes] = []
    start = 0
    for end in _EVENT_END.finditer(data):
        pieces.append(data[start : end.end()])
        start = end.end()
    if start < len(data):
        pieces.append(data[start:])
    return pieces
