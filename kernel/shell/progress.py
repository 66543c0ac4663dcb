"""Live progress on the person's screen: the daemon's phase, how long it has been in it, the
agent's latest line, and what the iteration has used so far.

One reader for `once`, `run` and `status --follow` alike: history/status.json (the daemon's
phase, written by StatusWriter) and the agent's log it names. On a terminal one line is drawn
again in place; otherwise one line per phase change, and nothing in between.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from kernel.bounds import printable
from kernel.loop import reporting
from kernel.terminal import say

TICK_S = 0.5
"""How often the line is drawn again."""
_LOG_TAIL_BYTES = 4000


@dataclass(frozen=True)
class Reading:
    """What the daemon is doing, as status.json and the agent's log say."""

    phase: str
    detail: str
    seconds: float
    latest: str
    """The agent's latest line ("" when no agent runs)."""
    used: str = ""
    """What the running agent has used so far ("" before its output says)."""


def _latest_line(log: Path) -> str:
    """The last non-empty line of the agent's log."""
    try:
        with log.open("rb") as handle:
            handle.seek(max(handle.seek(0, os.SEEK_END) - _LOG_TAIL_BYTES, 0))
            tail = handle.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    lines = [line.strip() for line in tail.splitlines() if line.strip()]
    return printable(lines[-1]) if lines else ""


NOT_RUNNING = Reading("not running", "waiting for a daemon to start", 0.0, "")


def read(history: Path, pid: int | None = None) -> Reading | None:
    """The daemon's phase now. With pid (the daemon itself): None until that process has
    written status.json. Without (`status --follow`): NOT_RUNNING unless a live daemon wrote it."""
    live, _ = reporting.read_live(history)
    if pid is not None and live.get("pid") != pid:
        return None
    if pid is None and (live.get("phase") == "stopped" or not _alive(live.get("pid"))):
        return NOT_RUNNING
    phase = printable(str(live.get("phase", "")))
    detail = printable(str(live.get("detail", "")))
    seconds = _since(live.get("since"))
    latest = used = ""
    if phase == "agent running" and "; log: " in detail:
        detail, log = detail.split("; log: ", 1)
        latest = _latest_line(Path(log))
        used = printable(str(live.get("used", "")))
    return Reading(phase, detail, seconds, latest, used)


def _alive(pid: Any) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _since(value: Any) -> float:
    try:
        moment = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        moment = None
    return (datetime.now(UTC) - moment).total_seconds() if moment else 0.0


def line(reading: Reading) -> str:
    """The one line a terminal shows: phase, time in it, detail, what the agent has used so
    far, its latest line."""
    parts = [f"{reading.phase} {_span(reading.seconds)}"]
    if reading.detail:
        parts.append(reading.detail)
    if reading.used:
        parts.append(reading.used)
    if reading.latest:
        parts.append(f"agent: {reading.latest}")
    return " | ".join(parts)


def _span(seconds: float) -> str:
    """A duration as the text views write it (42s, 3m12s, 2h05m)."""
    whole = max(int(seconds), 0)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{(whole % 3600) // 60:02d}m"


class Progress:
    """Shows a daemon's progress on a stream until stopped (a thread of its own)."""

    def __init__(
        self, history: Path, out: TextIO, *, pid: int | None = None, tty: bool | None = None
    ) -> None:
        self.history = history
        self.out = out
        self.pid = pid
        self.tty = out.isatty() if tty is None else tty
        self._shown: tuple[str, str] | None = None
        self._drawn = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def tick(self) -> None:
        """Read the daemon's state once and show it (a write that fails is dropped)."""
        reading = read(self.history, self.pid)
        if reading is None:
            return
        with contextlib.suppress(OSError, ValueError):  # a closed pipe must not stop the daemon
            if self.tty:
                width = max(shutil.get_terminal_size().columns - 1, 20)
                say(line(reading)[:width], self.out, end="", redraw=True)
                self._drawn = True
            elif (reading.phase, reading.detail) != self._shown:
                say(f"{reading.phase}: {reading.detail}".rstrip(": "), self.out)
            self.out.flush()
        self._shown = (reading.phase, reading.detail)

    def _loop(self) -> None:
        while not self._stop.wait(TICK_S):
            self.tick()
        self._last()

    def _last(self) -> None:
        """The last phase (stopped) too, and the terminal's cursor left on a fresh line."""
        self.tick()
        if self._drawn:
            with contextlib.suppress(OSError, ValueError):
                say("", self.out, flush=True)

    def start(self) -> Progress:
        """Begin showing progress."""
        self.tick()
        self._thread = threading.Thread(target=self._loop, name="seed-progress", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop showing progress; a write blocked on a reader that does not read (a full
        pipe) holds up the daemon's exit for a few seconds at most."""
        self._stop.set()
        if self._thread is None:
            self._last()
        else:
            self._thread.join(timeout=5)
