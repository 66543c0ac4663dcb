"""Stuck runs read while they go: turns that change nothing in the checkout, and the agent's
log where no gateway serves the run (docs/limits.md).

A turn is a model request through the gateway (kernel/loop/modelrun.py counts them), else a
tool call in the agent's log (kernel/records/logsteps.py reads the log's known events). The
checkout is looked at as a digest of its files' paths, sizes and change times, never their
content; a look waits at least COST_SHARE times as long as the last one took (its CPU stays
under 5%), and always comes before a run is called stuck, so a change is never missed.
"""

from __future__ import annotations

import contextlib
import threading
import time
from pathlib import Path

from kernel.isolation import trees
from kernel.loop.liveuse import Watch
from kernel.records.logsteps import LINE_MAX, LogRepeats, Reader

LOOK_EVERY_S = 2.0
"""The least time between two looks at the checkout, before a run's turns reach the limit."""
COST_SHARE = 20
INTERVAL_S = 0.5
"""Seconds between two readings of the log."""
_READ_MAX = 4 << 20
"""Bytes of the log read at one reading."""


class Still:
    """Turns in a row that brought no change to a checkout; `turn` says when `limit` passed."""

    def __init__(self, limit: int, worktree: Path, unit: str) -> None:
        self.limit = limit
        """Turns with no change that end the run (0: never)."""
        self.worktree = worktree
        self.unit = unit
        """What a turn is, as the reason says it (model requests, tool calls)."""
        self._lock = threading.Lock()
        self._turns = 0
        self._next = 0.0
        self._seen: str = trees.fingerprint(worktree) if limit > 0 else ""

    def turn(self) -> str:
        """Count one turn; why the run is stuck ('' while it is not)."""
        if self.limit <= 0:
            return ""
        with self._lock:
            self._turns += 1
            if self._turns < self.limit and time.monotonic() < self._next:
                return ""
            started = time.monotonic()
            found = trees.fingerprint(self.worktree)
            took = time.monotonic() - started
            self._next = time.monotonic() + max(LOOK_EVERY_S, took * COST_SHARE)
            if found != self._seen:
                self._seen, self._turns = found, 0
                return ""
            if self._turns < self.limit:
                return ""
            return f"no change to the checkout in {self._turns} turns in a row ({self.unit})"


class LogWatch(Watch):
    """A thread that reads the run's log as it grows and sets `ended` once it shows the run
    stuck (the process group is then ended, as at the time cap)."""

    def __init__(self, log: Path, repeats: int, still: Still) -> None:
        self.log = log
        self.ended = threading.Event()
        self.stuck = ""
        """Why the run was ended as stuck ('' while it was not)."""
        self._reader = Reader()
        self._repeats = LogRepeats(repeats)
        self._still = still
        super().__init__("seed-stuck")
        self._offset = 0
        self._partial = b""
        self._skipping = False
        """Within a line longer than LINE_MAX: it is skipped to its end."""

    def _loop(self) -> None:
        while not self._stop.wait(INTERVAL_S) and not self.ended.is_set():
            for raw in self._lines():
                why = self._line(raw)
                if why:
                    self.stuck = why
                    self.ended.set()
                    return

    def _lines(self) -> list[bytes]:
        """The whole lines the log gained since the last reading."""
        chunk = b""
        with contextlib.suppress(OSError), self.log.open("rb") as handle:
            handle.seek(self._offset)
            chunk = handle.read(_READ_MAX)
        self._offset += len(chunk)
        *lines, rest = (self._partial + chunk).split(b"\n")
        if self._skipping and lines:
            lines, self._skipping = lines[1:], False
        self._partial = rest
        if len(rest) > LINE_MAX:
            self._partial, self._skipping = b"", True
        return lines

    def _line(self, raw: bytes) -> str:
        seen = self._reader.line(raw.rstrip(b"\r"))
        for step in seen.steps:
            why = self._repeats.seen(step)
            if why:
                return why
        for _ in range(seen.turns):
            why = self._still.turn()
            if why:
                return why
        return ""
