"""What the agent has used so far, read while it runs: a figure for the person's screen only.

While the agent's process runs, the daemon's main thread waits on it (kernel/isolation/procs.py). A
UsageWatch thread looks at the run's output every few seconds and, only when it grew, hands
the partial output to the adapter's parse (through the module host, whose calls take turns
under its lock), validated and priced as the run's end would; the figure goes into
status.json, where the progress line (`once`, `run`, `status --follow`) and `status` show it.

Nothing else reads the figure: the ledger, the per-iteration budget and every verdict come
from the run's end, as before. The agent writes its own output, so an agent that prints
fake usage lines changes only its own figure on the screen, never what is spent or judged
beyond what the same lines already do at the run's end.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

from domain import AgentReport
from kernel.errors import SeedError

INTERVAL_S = 2.0
"""The least time between two readings (the progress line is drawn every 0.5 s)."""
_COST_SHARE = 20
"""A reading waits at least this many times as long as the last one took (CPU under 5%)."""

Fingerprint = tuple[tuple[int, int] | None, ...]


def so_far(report: AgentReport) -> str:
    """'12,345 tokens, $0.0123 so far' ('' before any; no dollars when nothing priced it)."""
    if not (report.tokens_used or report.cost_usd):
        return ""
    cost = f", ${report.cost_usd:.4f}" if report.cost_usd > 0 else ""
    return f"{report.tokens_used:,} tokens{cost} so far"


def _fingerprint(sources: Sequence[Path]) -> Fingerprint:
    """Size and change time of each source (None when absent); links are not followed."""
    found: list[tuple[int, int] | None] = []
    for source in sources:
        try:
            info = os.stat(source, follow_symlinks=False)
        except OSError:
            found.append(None)
            continue
        found.append((info.st_size, info.st_mtime_ns))
    return tuple(found)


class Watch:
    """A thread beside a run: started on enter; on exit stopped, and a reading under way
    waited for, so nothing is acted on after the run."""

    def __init__(self, name: str) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def _loop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()


class UsageWatch(Watch):
    """A thread that reads what the agent used so far whenever its output changed."""

    def __init__(
        self,
        sources: Sequence[Path],
        read: Callable[[], AgentReport],
        show: Callable[[str], None],
        *,
        interval_s: float = INTERVAL_S,
    ) -> None:
        self.sources = tuple(sources)
        """The run's output (its log, its result file): a reading only when one changed."""
        self.read = read
        self.show = show
        self.interval_s = interval_s
        super().__init__("seed-usage")

    def _loop(self) -> None:
        # an empty or absent output is nothing to read
        seen = _fingerprint([])
        shown = ""
        pause = self.interval_s
        while not self._stop.wait(pause):
            now = _fingerprint(self.sources)
            if now == seen or all(f is None or f[0] == 0 for f in now):
                continue
            seen = now
            started = time.monotonic()
            # a partial output the adapter cannot read yet shows nothing: no error, no change
            with contextlib.suppress(SeedError, OSError, ValueError):
                text = so_far(self.read())
                if text and text != shown and not self._stop.is_set():
                    self.show(text)
                    shown = text
            pause = max(self.interval_s, (time.monotonic() - started) * _COST_SHARE)
