"""The daemon: one lock per repository, recovery at start, the loop, signals, and waiting.

Ctrl-C or SIGTERM sets procs.STOP: the running agent's process group is ended, the
worktree discarded, an ABORTED record written, and `run` exits 0.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, cast

from domain import GapReport, IterationOutcome, IterationPlan, IterationRecord, PlanningOrder
from kernel.errors import HostError, Interrupted, SeedError
from kernel.host.context import Context, log_line
from kernel.isolation import blockers, gitops, jails, procs, rayengine
from kernel.isolation.daemonlock import DaemonLock
from kernel.isolation.paths import discover
from kernel.loop import modelrun, tournament
from kernel.loop.analysis import analyse, read_inbox
from kernel.loop.following import PROPOSAL_WAITS, Follower, forge_said
from kernel.loop.loop import Loop, for_planner, passed_over, planning_history
from kernel.loop.quarantine import quarantined, tree_digest
from kernel.loop.recording import WAITING
from kernel.loop.recovery import mark_daemon, recover
from kernel.measuring.baseline import Baseline
from kernel.records import halt, inbox, limits, notify
from kernel.shell.metrics import MetricsServer, exposition, snapshot
from kernel.shell.status import StatusWriter

if TYPE_CHECKING:
    from watchdog.events import FileSystemEvent, FileSystemEventHandler
    from watchdog.observers.api import BaseObserver

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_HALTED, EXIT_NOTHING = 0, 1, 2, 3, 5
EXIT_LIMITED = 5
"""`once` on a usage limit (issue 42): like nothing to do, nothing ran to a verdict; try later."""
_LISTED = 5
"""Waiting gaps `once` names when it has nothing to do (the rest are counted)."""

CHANGES = ("created", "modified", "moved", "deleted")
"""Event kinds that say a file changed. Opened and closed-without-writing are anyone's reads,
the daemon's own among them: they never wake it."""
INBOX_CHANGES = (*CHANGES, "closed")
"""In inbox/, a file closed after writing is also news: it is complete."""
CONFIG, HEAD, HALT, INBOX, BLOCKER = "config", "HEAD", "halt", "inbox", "blocker"
_BLOCKED_LOOKBACK = 200
"""Latest records read for the files that block a gap (a blocked gap's record is recent)."""


@dataclass
class Wake:
    """Why and when the sleeping daemon should look again."""

    event: threading.Event = field(default_factory=threading.Event)
    ready: set[str] = field(default_factory=set[str])
    """Inbox files known to be complete (closed after writing, or moved in)."""
    news: set[str] = field(default_factory=set[str])
    """What changed since the loop last looked (CONFIG, HEAD, HALT, INBOX, BLOCKER)."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def poke(self, name: str = "") -> None:
        """Wake the daemon (optionally marking an inbox file complete)."""
        with self.lock:
            self.news.add(INBOX)
            if name:
                self.ready.add(name)
        self.event.set()

    def unready(self, name: str) -> None:
        """An inbox file is being written (again): it is not complete until it is closed."""
        with self.lock:
            self.ready.discard(name)

    def snapshot(self) -> frozenset[str]:
        """The inbox files known to be complete, now."""
        with self.lock:
            return frozenset(self.ready)

    def notice(self, what: str) -> None:
        """Wake the daemon for a change outside inbox/ (a resume, the config, a commit)."""
        with self.lock:
            self.news.add(what)
        self.event.set()

    def take_only(self, what: str) -> bool:
        """Take the news if `what` is all of it, and clear the event with it (atomically: a
        poke after this still wakes)."""
        with self.lock:
            if self.news != {what}:
                return False
            self.news.clear()
            self.event.clear()
            return True

    def take_news(self) -> frozenset[str]:
        """The changes noticed since the last call."""
        with self.lock:
            news, self.news = frozenset(self.news), set[str]()
            return news


_STOPPED_BY: list[str] = []
"""The signal that stopped the daemon (for its "stopped" line)."""


def _install_signals() -> None:
    def handler(signum: int, frame: FrameType | None) -> None:
        _STOPPED_BY[:] = [signal.Signals(signum).name]
        procs.STOP.set()

    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)


def inbox_event(
    wake: Wake, folder: Path, kind: str, src: str, dest: str = "", is_directory: bool = False
) -> None:
    """What one file-system event in inbox/ means for the loop.

    A file closed after writing or moved in is complete: the loop wakes to take it. A file
    created wakes the loop too (moved in from elsewhere it is whole; if it is still being
    written, intake sees the writer and waits for the close). A write makes it incomplete.
    Moves into inbox's own folders (done/, .active/, ...) are the daemon's own doing.
    """
    if kind not in INBOX_CHANGES:
        return
    if kind in ("moved", "deleted") and Path(src).parent == folder:
        wake.unready(Path(src).name)  # gone from the queue (claimed, set aside, removed)
    if kind == "deleted":
        return
    where = Path(dest if kind == "moved" else src)
    if where.parent != folder or inbox.ignored(where.name):
        return
    if is_directory:
        if kind in ("created", "moved"):
            wake.poke()  # set aside as a directory by the next scan
        return
    if kind in ("closed", "moved"):
        wake.poke(where.name)
    elif kind == "modified":
        wake.unready(where.name)
    elif kind == "created":
        wake.unready(where.name)
        wake.poke()


def blocked_paths(records: Sequence[IterationRecord]) -> tuple[str, ...]:
    """The checkout's files that block a gap now: those its latest record was blocked by
    (a checkout-wide blocker moves HEAD or the branch's ref when it clears)."""
    latest: dict[str, IterationRecord] = {}
    for record in records:
        latest[record.gap.key] = record
    paths = {
        path
        for record in latest.values()
        if record.blocked_by and not blockers.checkout_wide(record.blocked_by)
        for path in record.blocked_by
    }
    return tuple(sorted(paths))


def watched_files(ctx: Context, blocked: Sequence[str] = ()) -> dict[Path, str]:
    """The files outside inbox/ whose change wakes the daemon, and what each change is.

    halt.json (a resume), seed.toml, what a commit or checkout moves (HEAD, the branch's ref
    and packed-refs), and the checkout's files that block a gap (a person reverting an edit
    clears its blocker). The daemon's own writes elsewhere in their folders (status.json, the
    log, records, its kept branches) are not among them.
    """
    root = ctx.paths.root
    files = {
        root / path: BLOCKER
        for path in blocked
        if path and not Path(path).is_absolute() and ".." not in Path(path).parts
    }
    files |= {
        ctx.paths.history / halt.HALT_FILE: HALT,
        Path(os.path.abspath(ctx.config_path)): CONFIG,
        ctx.paths.common / "packed-refs": HEAD,
    }
    with contextlib.suppress(gitops.GitError, OSError):
        files[gitops.git_dir(ctx.paths.root) / "HEAD"] = HEAD
        ref = gitops.git(ctx.paths.root, "symbolic-ref", "--quiet", "HEAD", check=False)
        if ref.ok and ref.text().strip().startswith("refs/heads/"):
            files[ctx.paths.common / ref.text().strip()] = HEAD
    return files


def file_event(wake: Wake, files: Mapping[Path, str], kind: str, src: str, dest: str = "") -> None:
    """What one event in a watched folder other than inbox/ means: a named file changed."""
    if kind not in CHANGES:
        return
    for raw in (src, dest):
        what = files.get(Path(raw)) if raw else None
        if what is not None:
            wake.notice(what)
            return


class _StopRace(logging.Filter):
    """watchdog 7 logs "InotifyEmitter.queue_events() called when the thread is inactive" at
    ERROR when an event was still pending as its emitter stopped; the daemon is stopping and
    nothing it needs is lost, so the line is not shown."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "called when the thread is inactive" not in record.getMessage()


def _handler(on_event: Callable[[str, str, str, bool], None]) -> FileSystemEventHandler:
    """A watchdog handler passing on each event's kind, paths and whether it is a folder."""
    from watchdog.events import FileSystemEventHandler

    class Handler(FileSystemEventHandler):
        def on_any_event(self, event: FileSystemEvent) -> None:
            src, dest = os.fsdecode(event.src_path), os.fsdecode(event.dest_path or "")
            on_event(event.event_type, src, dest, event.is_directory)

    return Handler()


def _change_kinds() -> list[type[FileSystemEvent]]:
    """watchdog's events for CHANGES: inotify is asked for no other kind."""
    from watchdog.events import (
        DirCreatedEvent,
        DirDeletedEvent,
        DirMovedEvent,
        FileCreatedEvent,
        FileDeletedEvent,
        FileModifiedEvent,
        FileMovedEvent,
    )

    return [
        FileCreatedEvent,
        FileModifiedEvent,
        FileMovedEvent,
        FileDeletedEvent,
        DirCreatedEvent,
        DirMovedEvent,
        DirDeletedEvent,
    ]


class _Watch:
    """inbox/ and the folders of `watched_files`, watched with watchdog, none recursively."""

    def __init__(self, ctx: Context, wake: Wake) -> None:
        self.ctx = ctx
        self.files = watched_files(ctx)
        """Replaced whole, never changed in place: the handler reads it unlocked."""
        self.parents: set[Path] = set()
        self.kinds = _change_kinds()
        self.inbox = _handler(partial(inbox_event, wake, ctx.paths.inbox))
        self.named = _handler(
            lambda kind, src, dest, _: file_event(wake, self.files, kind, src, dest)
        )
        self.observer: BaseObserver | None = None

    def start(self) -> None:
        """Watch, with inotify, or by polling where it is unavailable (no close events)."""
        from watchdog.observers import Observer
        from watchdog.observers.polling import PollingObserver

        self.ctx.paths.inbox.mkdir(parents=True, exist_ok=True)
        self.ctx.paths.history.mkdir(parents=True, exist_ok=True)
        try:
            self._schedule(Observer())
        except OSError as exc:  # no inotify (or out of watches)
            self.ctx.log(f"file events unavailable ({exc}); polling inbox/ every second")
            self._schedule(PollingObserver(timeout=1.0))

    def _schedule(self, observer: BaseObserver) -> None:
        from watchdog.events import FileClosedEvent

        self.observer = observer
        self.parents.clear()
        folder = str(self.ctx.paths.inbox)
        observer.schedule(self.inbox, folder, event_filter=[*self.kinds, FileClosedEvent])
        self._watch_parents()
        observer.daemon = True
        observer.start()

    def _watch_parents(self) -> None:
        for parent in sorted({path.parent for path in self.files} - self.parents):
            if self.observer is not None and parent.is_dir():
                self.observer.schedule(self.named, str(parent), event_filter=self.kinds)
                self.parents.add(parent)

    def refresh(self, blocked: Sequence[str] = ()) -> None:
        """Watch the ref of the branch HEAD names now, and the files that block a gap."""
        fresh = watched_files(self.ctx, blocked)
        if fresh != self.files:
            self.files = fresh
            with contextlib.suppress(OSError):  # out of watches: the timer still re-analyses
                self._watch_parents()

    def stop(self) -> None:
        """Stop watching, and wait for watchdog's threads to end."""
        if self.observer is not None:
            self.observer.stop()
            self.observer.join(timeout=5)


@contextlib.contextmanager
def _watch(ctx: Context, wake: Wake) -> Generator[Callable[[Sequence[str]], None]]:
    """Wake the loop on changes of inbox/ and of `watched_files`; yields what to call with
    the files that block a gap now, after HEAD moved or an iteration (another branch's ref
    and those files are watched from then on).

    Each watch asks inotify only for the event kinds that mean a change: the daemon's own
    reads of halt.json or HEAD never wake it.
    """
    watch = _Watch(ctx, wake)
    watch.start()
    race = _StopRace()
    logging.getLogger("watchdog.observers.inotify").addFilter(race)
    try:
        yield watch.refresh
    finally:
        watch.stop()
        logging.getLogger("watchdog.observers.inotify").removeFilter(race)


class Daemon:
    """The loop behind `run` and `once`."""

    def __init__(self, ctx: Context, metrics_port: int | None = None) -> None:
        self.ctx = ctx
        self.status = StatusWriter(ctx)
        self.lock = DaemonLock(ctx.paths.lock)
        self.wake = Wake()
        self.metrics_port = metrics_port
        self.metrics: MetricsServer | None = None
        ctx.inbox_ready = self.wake.snapshot
        ctx.used_so_far = self.status.used
        self.outbox = notify.Outbox(
            ctx.paths.history, ctx.paths.root, lambda: ctx.config.notify, ctx.log
        )
        self.passed_over: Mapping[str, str] = {}
        self.follower = Follower()
        """Reads seed's open pull requests each cycle (bounded, backing off)."""
        self.blocked: tuple[str, ...] = ()
        """The checkout's files that block a gap, as watched now (blocked_paths)."""
        """The gaps the latest analysis passed over, and why (waiting, quarantined)."""

    def _start(self) -> None:
        self.lock.acquire()
        if self.metrics_port is not None:
            try:
                self.metrics = MetricsServer(self.metrics_port)
            except SeedError:
                self.lock.release()
                raise
        procs.become_subreaper()
        procs.STOP.clear()
        _STOPPED_BY.clear()
        _install_signals()
        self.outbox.start()  # before recovery: a halt it finds is told too
        self.ctx.notify = self.outbox
        recover(self.ctx)
        mark_daemon(self.ctx)
        self.ctx.daemon = True
        self.ctx.start_host()
        backend = self.ctx.backend()
        self.ctx.remember_config()
        self.status.update(backend=backend.name, backend_reason=backend.reason, config_problem="")
        self.status.update(forge=forge_said(self.ctx))
        if self.metrics is not None:
            self.status.update(metrics_url=self.metrics.url)
            self._refresh_metrics()
            self.ctx.log(f"serving Prometheus metrics at {self.metrics.url}")
        self.ctx.log(
            f"watching {self.ctx.paths.root} with backend {backend.name} ({backend.reason})"
        )
        guard, python = self.ctx.config.guard, Path(self.ctx.target.python)
        self.ctx.log(f"sandbox: {jails.describe(guard, self.ctx.paths, python)}")
        home = Path(os.environ.get("HOME") or "/nonexistent")
        agent, sandboxed = self.ctx.config.agent, jails.active(guard)
        for note in modelrun.warnings(agent, backend.name, sandboxed, home):
            self.ctx.log(f"agent: {note}")
        for note in rayengine.door(self.ctx.config.scale):
            self.ctx.log(note)
        argv = [os.path.expanduser(a) if a.startswith("~/") else a for a in agent.command]
        if backend.name == "command" and sandboxed:
            for note in jails.own_folders(argv, agent.files, self.ctx.paths)[1]:
                self.ctx.log(f"agent: {note} (docs/command-agents.md)")

    def _refresh_metrics(self) -> None:
        """Render the metrics page in this (the main) thread; the server only serves it."""
        # once stopping, the host is left to the ABORTED record (a request cut short by the
        # stop would leave its answer in the pipe for the next one)
        if self.metrics is not None and not procs.STOP.is_set():
            gaps = cast(dict[str, int], self.status.data.get("open_gaps") or {})
            snap = snapshot(self.ctx, gaps, str(self.status.data["phase"]))
            self.metrics.update(exposition(self.ctx, snap))

    def _phase(self, phase: str, detail: str) -> None:
        """A phase change, in status.json and on the metrics page."""
        self.status.phase(phase, detail)
        self._refresh_metrics()

    def _analysed(
        self, report: GapReport, passed_over: Mapping[str, str], order: PlanningOrder | None
    ) -> None:
        self.passed_over = passed_over
        if order is None:
            # one line per analysis: how often an idle daemon wakes can be counted from its log
            self.ctx.log(
                f"analysed tree {report.tree[:12]}: {len(report.gaps)} open gap(s), "
                f"{len(passed_over)} passed over"
            )
        self.status.analysed(report, passed_over, order)
        self._refresh_metrics()

    def _stop(self, ran: int | None = None) -> None:
        """Stop; `ran`: the iterations `run` did (None for `once`)."""
        if ran is not None:
            self._tell_stop(ran)
        self.outbox.drain()  # before the lock goes: the next daemon sends what is left
        if self.metrics is not None:
            self.metrics.stop()
            self.metrics = None
            self.status.data.pop("metrics_url", None)
        self.status.stopped()
        self.ctx.host.stop()
        self.ctx.store.close()
        self.ctx.log(f"stopped ({_STOPPED_BY[0]})" if _STOPPED_BY else "stopped")
        self.lock.release()

    def _tell_stop(self, ran: int) -> None:
        """Send word that `run` ended by itself (an error nothing caught, max_iterations); a
        stop by the person (a signal) is not told. Called from run's `finally`."""
        if _STOPPED_BY or procs.STOP.is_set():
            return
        error = sys.exc_info()[1]
        why = (
            f"{type(error).__name__}: {error}"
            if error
            else f"it ran the {ran} iteration(s) it was to run (max_iterations)"
        )
        start = self.ctx.paths.command("run")
        message = f"The daemon stopped by itself: {why}. Start it again: `{start}`."
        self.ctx.notify("stopped", "", message)

    def iterate(self, *, single: bool = False) -> list[IterationRecord]:
        """One pass: follow seed's pull requests, analyse, then plan and run what can run
        (single: one record at most)."""
        self.follower.follow(self.ctx)
        self.status.update(forge_problem=self.follower.problem)
        try:
            return Loop(self.ctx, self._phase, self._analysed).run(single=single)
        finally:
            self._refresh_metrics()

    def once(self) -> int:
        """One iteration; the exit code says how it went."""
        self._start()
        try:
            before = halt.read_halt(self.ctx.paths.history)
            if before.halted:
                resume = self.ctx.paths.command("resume")
                self.ctx.log(f"halted: {before.reason}; run `{resume}` to continue")
                return EXIT_HALTED
            paused = self._holding(datetime.now(UTC))
            if paused is not None:
                self.ctx.log(f"limited until {paused.until}: {paused.reason}")
                return EXIT_LIMITED
            try:
                records = self.iterate(single=True)
            except Interrupted:
                return EXIT_FAILED
            after = halt.read_halt(self.ctx.paths.history)
            ran = [r for r in records if r.outcome != IterationOutcome.WAITING]
            if after.halted:
                return EXIT_HALTED
            if not ran:
                self.ctx.log(self._nothing_to_do(records))
                return EXIT_NOTHING
            if ran[-1].outcome == IterationOutcome.LIMITED:
                return EXIT_LIMITED
            landed = (IterationOutcome.SUCCESS, IterationOutcome.PROPOSED)
            return EXIT_OK if ran[-1].outcome in landed else EXIT_FAILED
        finally:
            self._stop()

    def _nothing_to_do(self, records: Sequence[IterationRecord]) -> str:
        """Why `once` ran nothing: the gaps that wait, and what each waits for."""
        reasons = {r.gap.key: r.reason for r in records}
        held = [k for k, why in self.passed_over.items() if why == WAITING and k not in reasons]
        for record in self.ctx.store.for_gaps(held, per_gap=1, brief=True):
            reasons[record.gap.key] = record.reason
        for key, why in self.passed_over.items():
            if why.startswith(PROPOSAL_WAITS) and key not in reasons:
                reasons[key] = why
        if not reasons:
            return "nothing to do: no open gap an agent can take"
        shown = [f"{key} ({why})" for key, why in list(reasons.items())[:_LISTED]]
        more = f"; and {len(reasons) - _LISTED} more" if len(reasons) > _LISTED else ""
        return f"nothing to do: {len(reasons)} gap(s) waiting: {'; '.join(shown)}{more}"

    def run(self, max_iterations: int = 0) -> int:
        """Iterate while there is work an agent can take; otherwise sleep until an event or the timer."""
        self._start()
        done = 0
        backoff = 1.0
        try:
            with _watch(self.ctx, self.wake) as watch:
                while not procs.STOP.is_set():
                    self.wake.event.clear()
                    ran: list[IterationRecord] = []
                    try:
                        self._news(watch)
                        hstate = halt.read_halt(self.ctx.paths.history)
                        if hstate.halted:
                            fresh = self._while_halted(hstate)
                            # a file too fresh to read now is looked at again in a moment
                            self._sleep(
                                inbox.QUIET_S + 0.2
                                if fresh
                                else self.ctx.config.daemon.poll_interval_s
                            )
                            continue
                        if self._limited():
                            continue
                        else:
                            ran = [
                                r for r in self.iterate() if r.outcome != IterationOutcome.WAITING
                            ]
                        backoff = 1.0
                    except Interrupted:
                        break
                    except (HostError, SeedError, OSError) as exc:
                        self.ctx.log(f"error: {exc}; trying again in {backoff:.0f}s")
                        self.ctx.store.event("error", str(exc)[:2000])
                        self.ctx.host.stop()
                        self._sleep(backoff)
                        backoff = min(backoff * 2, 300.0)
                        continue
                    except Exception as exc:  # a bug must not kill a daemon left running overnight
                        self.ctx.log(f"unexpected error: {type(exc).__name__}: {exc}")
                        self.ctx.store.event("error", traceback.format_exc()[-4000:])
                        self._sleep(backoff)
                        backoff = min(backoff * 2, 300.0)
                        continue
                    done += len(ran)
                    if max_iterations and done >= max_iterations:
                        break
                    if ran:
                        continue
                    self._watch_blocked(watch)  # what this pass found blocked wakes it
                    poll = self.ctx.config.daemon.poll_interval_s
                    at = datetime.now(UTC) + timedelta(seconds=poll)
                    self._phase(
                        "idle",
                        f"until a change (inbox, seed.toml, a commit, a resume, a file that blocks a gap) or the next re-analysis at {at:%H:%M:%S}Z",
                    )
                    self._sleep(self.ctx.config.daemon.poll_interval_s)
        finally:
            self._stop(done)
        return EXIT_OK

    def _news(self, watch: Callable[[Sequence[str]], None]) -> None:
        """Changes seen while the loop slept: another branch and the files that block a gap
        to watch, seed.toml to read."""
        news = self.wake.take_news()
        if HEAD in news:
            watch(self.blocked)  # the ref of the branch HEAD names now
        if CONFIG in news:
            self._reload_config()

    def _watch_blocked(self, watch: Callable[[Sequence[str]], None]) -> None:
        """Watch the files that block a gap now, when they are not the ones watched already
        (an idle pass reads the record index once and runs no git)."""
        blocked = blocked_paths(self.ctx.store.recent(_BLOCKED_LOOKBACK, brief=True))
        if blocked != self.blocked:
            self.blocked = blocked
            watch(blocked)

    def _reload_config(self) -> bool:
        """seed.toml changed: use it from now on (a broken one is named, the old one kept).

        Returns whether the configuration in force changed."""
        try:
            changed = self.ctx.reload_config()
        except SeedError as exc:
            # never the end of the night: the config in force stays, whole, and says why
            self.ctx.log(f"{self.ctx.config_path} changed but cannot be used, so it is not: {exc}")
            self.status.update(config_problem=str(exc)[:2000])
            return False
        self.status.update(config_problem="")
        if changed:
            backend = self.ctx.backend()
            self.status.update(backend=backend.name, backend_reason=backend.reason)
            self.ctx.log(
                f"{self.ctx.config_path.name} changed: now in force (backend {backend.name})"
            )
        return changed

    def _limited(self) -> bool:
        """A usage limit holds (history/limit.json): no agent runs and no model is asked until
        its reset; the daemon sleeps until then (a change wakes it to look again). Once it has
        passed, the pause is cleared and said. Returns whether the loop waited."""
        history, now = self.ctx.paths.history, datetime.now(UTC)
        if limits.waiting(history, now) is None:
            if limits.read(history) is not None:
                limits.clear(history)
                self.status.update(limited_until="")
                self.ctx.log("the usage limit has reset: the daemon goes on")
                self.ctx.store.event("limit", "the usage limit has reset: resumed by itself")
            return False
        paused, others = limits.shown(history, now, *self._scope())
        if paused is None:
            return False
        moment = paused.moment() or now
        until = f"{moment:%Y-%m-%d %H:%M:%S}Z"
        if self.status.data.get("limited_until") != paused.until:
            self.status.update(limited_until=paused.until)
            said = f" for {others}: the portfolio's other agents run meanwhile" if others else ""
            self.ctx.log(f"limited until {until}{said}: {paused.reason}")
            self.ctx.store.event("limit", f"waiting until {until}{said}: {paused.reason}")
        if others:
            return False
        self._phase(
            "limited", f"the model's usage limit: no agent runs until {until}, then by itself"
        )
        left = (moment - now).total_seconds()
        self._sleep(min(max(left, 0.05), self.ctx.config.daemon.poll_interval_s))
        return True

    def _scope(self) -> tuple[str, set[str]]:
        """What a usage limit pauses ([daemon] limit_scope), and the backends it may send."""
        config = self.ctx.config
        names = tournament.backends(config.candidates, self.ctx.backend().name)
        return config.daemon.limit_scope, names

    def _holding(self, now: datetime) -> limits.Pause | None:
        """The usage limit that holds every agent now (None: one may run)."""
        return limits.holding(self.ctx.paths.history, now, *self._scope())

    def _while_halted(self, hstate: halt.HaltState) -> bool:
        """Halted: run no agent, but keep taking in (and setting aside) inbox files and reporting.

        Returns whether an inbox file was too fresh to read yet.
        """
        now = datetime.now(UTC)
        items = read_inbox(self.ctx, now)
        self.status.update(inbox_queued=len(items))
        self._phase("halted", f"{hstate.reason} ({self.ctx.paths.command('resume')})")
        folder = self.ctx.paths.inbox
        entries = (
            [e for e in folder.iterdir() if not inbox.ignored(e.name)] if folder.is_dir() else []
        )
        fresh = False
        for entry in entries:
            with contextlib.suppress(OSError):
                fresh = fresh or now.timestamp() - entry.stat().st_mtime < inbox.QUIET_S
        return fresh

    def _sleep(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not procs.STOP.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            if self.wake.event.wait(timeout=min(left, 0.5)):
                time.sleep(0.05)  # let a burst of events (a save, then a rename) arrive
                if self.wake.take_only(CONFIG) and not self._reload_config():
                    continue  # seed.toml saved as it was, or broken: nothing new to look at
                return


def log_ending(root: Path | None, command: str, started: bool, exc: BaseException) -> None:
    """Why `run` or `once` ends on an error, in history/daemon.log as well as on stderr (the
    terminal may be one nobody watches); nothing when the repository cannot be found."""
    with contextlib.suppress(SeedError, OSError):
        paths = discover((root or Path.cwd()).resolve())
        what = f"`{command}` (pid {os.getpid()}) " + ("ended" if started else "not started")
        reason = str(exc) if isinstance(exc, SeedError) else f"{type(exc).__name__}: {exc}"
        log_line(paths, f"{what}: {reason}"[:4000], echo=False)


def analyse_head(ctx: Context) -> Baseline | None:
    """The ranked gaps of a clean worktree at HEAD (None with no commits); changes nothing."""
    it = Loop(ctx)
    prepared = it.prepare()
    if prepared is None:
        return None
    head, worktree = prepared
    try:
        # a look: no second, traced test run for the test map (the daemon's next whole run maps)
        return analyse(ctx, worktree, head, datetime.now(UTC).replace(microsecond=0), map_run=False)
    finally:
        it.discard(worktree)


def plan_only(ctx: Context) -> tuple[Baseline | None, IterationPlan | None]:
    """Analyse a clean worktree at HEAD and ask the planner, changing nothing."""
    it = Loop(ctx)
    prepared = it.prepare()
    if prepared is None:
        return None, None
    head, worktree = prepared
    try:
        now = datetime.now(UTC).replace(microsecond=0)
        baseline = analyse(ctx, worktree, head, now, map_run=False)
        history = planning_history(ctx.store, baseline.report)
        held = quarantined(baseline.report, history, tree_digest(ctx.paths.root), head)
        backend = ctx.backend()
        state = it.project_state(
            now,
            ctx.store.next_sequence(),
            worktree,
            head,
            gitops.land_blocker(ctx.paths.root),
            backend,
            halt.read_halt(ctx.paths.history),
            held,
        )
        report = baseline.report.model_copy(
            update={"gaps": tuple(g for g in baseline.report.gaps if g.key not in held)}
        )
        plan = ctx.host.plan(report, for_planner(history, report), state)
        why = dict.fromkeys(held, "quarantined")
        plan = plan and passed_over(plan, baseline.report, why)
        return baseline, it.clamp(plan, baseline) if plan is not None else None
    finally:
        it.discard(worktree)
