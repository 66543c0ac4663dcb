"""An idle daemon stays idle, whatever happened before: counted, not timed (issue 25, item 1).

The real daemon (`seed.py run`) on a small repository, backend none: during quiet intervals
before a halt, while halted and after `resume`, it makes no analysis, no checkout and no write
of status.json. It wakes at once on what changed (a resume, seed.toml, a commit, a checkout of
another branch and a commit there), and a quiet
daemon still re-analyses every `[daemon] poll_interval_s`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

from kernel.records import halt
from kernel.records.store import RecordStore
from tests.support import (
    BROKEN_ADD,
    agent_checkouts,
    git,
    make_repo,
    seed,
    start_daemon,
    wait_for,
)

QUIET_S = 2.0
CONFIG = '[agent]\nbackend = "none"\n\n[daemon]\npoll_interval_s = 3600\n'
_WRITES = {("moved", "status.json"), ("modified", "status.json")}
"""A status.json written: replaced (atomic writes), or written in place."""
ZERO = {"analyses": 0, "checkouts made": 0, "status.json writes": 0}


class _Counter(FileSystemEventHandler):
    """Counts the daemon's wake-ups: analyses (its log), checkouts made, status.json writes."""

    def __init__(self, repo: Path) -> None:
        self.log = repo / "history" / "daemon.log"
        self.checkouts = agent_checkouts(repo)
        self.lock = threading.Lock()
        self.made = 0
        self.writes = 0
        self.seen: set[str] = set()
        self.observer = Observer()

    def __enter__(self) -> _Counter:
        self.checkouts.mkdir(parents=True, exist_ok=True)
        self.observer.schedule(self, str(self.log.parent), recursive=False)
        self.observer.schedule(self, str(self.checkouts), recursive=False)
        self.observer.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.observer.stop()
        self.observer.join(timeout=10)

    def on_any_event(self, event: FileSystemEvent) -> None:
        src, dest = os.fsdecode(event.src_path), os.fsdecode(event.dest_path or "")
        with self.lock:
            if event.event_type == "created" and Path(src).name.startswith(".barrier-"):
                self.seen.add(src)
            elif event.event_type == "created" and event.is_directory:
                self.made += Path(src).parent == self.checkouts
            elif (event.event_type, Path(dest or src).name) in _WRITES:
                self.writes += 1

    def analyses(self) -> int:
        """Analyses the daemon logged so far."""
        return sum("Z analysed " in line for line in self.log.read_text().splitlines())

    def _barrier(self) -> None:
        """Wait until every event before now has been counted (a file made in each folder)."""
        marks = [
            folder / f".barrier-{time.monotonic_ns()}"
            for folder in (self.log.parent, self.checkouts)
        ]
        for mark in marks:
            mark.touch()
        wait_for(lambda: all(str(m) in self.seen for m in marks), 30, "the events to arrive")
        for mark in marks:
            mark.unlink()

    def now(self) -> dict[str, int]:
        self._barrier()
        with self.lock:
            return {
                "analyses": self.analyses(),
                "checkouts made": self.made,
                "status.json writes": self.writes,
            }

    def over(self, seconds: float, change: Callable[[], object] = lambda: None) -> dict[str, int]:
        """What the daemon did during `seconds` of quiet (after `change`, if given)."""
        before = self.now()
        change()
        time.sleep(seconds)
        after = self.now()
        return {key: after[key] - before[key] for key in after}


def _phase(repo: Path) -> object:
    try:
        return json.loads((repo / "history" / "status.json").read_text()).get("phase")
    except (OSError, ValueError):
        return None


def _wakes(repo: Path, count: _Counter, what: str, change: Callable[[], object]) -> None:
    """The change wakes the daemon at once: it re-analyses, then is idle again."""
    before = count.analyses()
    change()
    wait_for(lambda: count.analyses() > before, 30, f"a re-analysis after {what}")
    wait_for(lambda: _phase(repo) == "idle", 60, f"idle after {what}")


def test_an_idle_daemon_does_nothing_before_a_halt_while_halted_and_after_resume(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path / "repo", BROKEN_ADD, CONFIG)
    daemon = start_daemon(repo, stdout=subprocess.DEVNULL)
    try:
        wait_for(lambda: _phase(repo) == "idle", 120, "the daemon to go idle", alive=daemon)
        with _Counter(repo) as count:
            assert count.analyses() == 1  # the counter counts: the first analysis is logged
            assert count.over(QUIET_S) == ZERO, "idle before a halt"

            halt.halt(RecordStore(repo / "history"), "halted by the test")
            wait_for(lambda: _phase(repo) == "halted", 30, "the daemon to see the halt")
            assert count.over(QUIET_S) == ZERO, "halted"

            _wakes(repo, count, "resume", lambda: seed(repo, "resume").check_returncode())
            assert count.over(QUIET_S) == ZERO, "idle after resume"
            config = repo / "seed.toml"
            assert count.over(QUIET_S, lambda: config.write_text(CONFIG)) == ZERO, "saved as it was"

            # what changed wakes it at once: the configuration, a commit, another branch
            _wakes(
                repo, count, "seed.toml", lambda: config.write_text(CONFIG.replace("3600", "3599"))
            )
            (repo / "notes.py").write_text("NOTE = 1\n")
            git(repo, "add", "notes.py")
            _wakes(repo, count, "a commit", lambda: git(repo, "commit", "-q", "-m", "a note"))
            _wakes(repo, count, "a checkout", lambda: git(repo, "checkout", "-q", "-b", "topic/x"))
            _wakes(
                repo,
                count,
                "its commit",
                lambda: git(repo, "commit", "-q", "--allow-empty", "-m", "x"),
            )
            assert count.over(QUIET_S) == ZERO, "idle after a config change and a commit"

            # a quiet daemon still re-analyses on its timer (the new config is in force)
            before = count.analyses()
            config.write_text(CONFIG.replace("3600", "1"))
            wait_for(lambda: count.analyses() >= before + 3, 30, "re-analyses every second")
        daemon.send_signal(signal.SIGINT)
        _, stderr = daemon.communicate(timeout=60)
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.communicate(timeout=60)
    assert daemon.returncode == 0, stderr
    assert "InotifyEmitter" not in stderr and "Traceback" not in stderr, stderr
