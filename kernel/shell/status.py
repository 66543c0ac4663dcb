"""history/status.json: the daemon's live phase and latest ranking, and `status` reading it back."""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from domain import DaemonStatus, GapReport, InboxItem, InboxText, PlanningOrder, QueuedTask
from kernel.errors import SeedError
from kernel.fsutil import atomic_write_text
from kernel.host.answers import Backend
from kernel.host.context import Context
from kernel.isolation import gitops, ignored, jails, rayengine
from kernel.isolation.daemonlock import DaemonLock
from kernel.loop import modelrun, reporting, tournament
from kernel.loop.analysis import read_setup
from kernel.loop.following import forge_said
from kernel.loop.quarantine import read_quarantine
from kernel.measuring import mypyrun, pins, plainrun, pytestconfig
from kernel.measuring.gate import adoption, paths_at, read_at
from kernel.measuring.measure import python_reason
from kernel.records import budget, halt, inbox, limits
from kernel.records.journal import read_journal
from kernel.shell.progress import printable

STATUS_FILE = reporting.STATUS_NAME
LOG_TAIL_LINES = 5


class StatusWriter:
    """Keeps history/status.json current so `status` can show the live phase."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.path = ctx.paths.history / STATUS_FILE
        self.data: dict[str, Any] = {
            "pid": os.getpid(),
            "phase": "starting",
            "detail": "",
            "since": _now(),
        }
        self.written = ""
        """The text last written."""
        self._lock = threading.RLock()
        """The agent's usage so far comes from a thread of its own (kernel/loop/liveuse.py)."""

    def phase(self, phase: str, detail: str) -> None:
        """Record a phase change (the same phase again keeps its `since`)."""
        with self._lock:
            if (self.data.get("phase"), self.data.get("detail")) != (phase, detail):
                self.data.update(phase=phase, detail=detail, since=_now())
                self.data.pop("used", None)  # the figure of the run that ended
            self.flush()

    def used(self, figure: str) -> None:
        """What the running agent has used so far (kernel/loop/liveuse.py; shown, never judged)."""
        with self._lock:
            self.data["used"] = figure
            self.flush()

    def update(self, **values: Any) -> None:
        """Record other facts (backend, top gaps)."""
        with self._lock:
            self.data.update(values)
            self.flush()

    def analysed(
        self, report: GapReport, passed_over: Mapping[str, str], order: PlanningOrder | None
    ) -> None:
        """Record the head of the latest ranking and open gaps by source (the quarantine is
        kept in quarantine.json only), and with the planner's order the queue."""
        values: dict[str, Any] = {
            "top_gaps": [g.model_dump(mode="json") for g in reporting.ranked(report, passed_over)],
            "open_gaps": reporting.open_gaps(report),
            "gaps_as_of": _now(),
            "differences": list(report.differences),
        }
        if order is not None:
            queue = reporting.queue(report, passed_over, order)
            values["queue"] = [t.model_dump(mode="json") for t in queue]
            values["next_gap"] = reporting.next_gap(report, passed_over, order)
            values["new_task_place"] = order.new_task_place
        self.update(**values)

    def flush(self) -> None:
        """Write the file atomically when its content changed; a failure never stops the daemon."""
        with self._lock:
            text = json.dumps(self.data, indent=2, default=str) + "\n"
            if text == self.written:
                return  # an idle daemon writes nothing
            with contextlib.suppress(OSError):
                atomic_write_text(self.path, text)
                self.written = text

    def stopped(self) -> None:
        """Mark the daemon stopped."""
        with self._lock:
            self.data.update(phase="stopped", detail="", since=_now())
            self.data.pop("used", None)
            self.flush()


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _moment(value: Any) -> datetime | None:
    with contextlib.suppress(ValueError, TypeError):
        return datetime.fromisoformat(value) if isinstance(value, str) else None
    return None


def _status_backend(ctx: Context, live: dict[str, Any]) -> Backend:
    """The running daemon's backend, or the one a daemon started now would use (and why)."""
    if live.get("backend"):
        return Backend(str(live["backend"]), str(live.get("backend_reason", "")))
    try:
        return ctx.backend()
    except SeedError as exc:  # HostError and ConfigError alike: status must still answer
        return Backend("", f"cannot tell: {exc}")


def _tools(ctx: Context) -> tuple[str, ...]:
    """Which tools take part, read from HEAD's configuration, and how the kernel's pytest run
    differs from the project's own."""
    root = ctx.paths.root
    try:
        paths = paths_at(root, "HEAD")
    except gitops.GitError:
        paths = []  # no commit yet: nothing pins a version
    read = read_at(root, "HEAD")
    adopted = adoption(read, ctx.config.quality, paths)
    mypy = "mypy" in adopted.tools
    pin, setup = pins.pinned("mypy", read, tuple(paths)), mypyrun.configured(read)
    versions = (mypyrun.version_line(ctx.target.python, pin, setup, root),)
    return (
        adopted.why
        + (versions if mypy else ())
        + (pytestconfig.differences(read) if "pytest" in adopted.tools else ())
    )


def _agent_log(live: dict[str, Any], detail: str) -> tuple[str, tuple[str, ...]]:
    """A running agent's phase detail with its usage so far, and the last lines of its log."""
    if "log: " not in detail:
        return detail, ()
    log = Path(detail.split("log: ", 1)[1])
    used = printable(str(live.get("used", "")))[:200]
    if used and "; log: " in detail:
        detail = detail.replace("; log: ", f"; {used}; log: ", 1)
    try:
        # the agent wrote these bytes: no escape of theirs reaches the person's terminal
        text = log.read_bytes()[-4000:].decode("utf-8", errors="replace")
    except OSError:
        return detail, ()
    return detail, tuple(printable(line) for line in text.splitlines()[-5:])


def _limited(ctx: Context, backend: str) -> tuple[limits.Pause | None, str]:
    """The usage limit to show, and the backends it pauses while the others run."""
    scope = ctx.config.daemon.limit_scope, tournament.backends(ctx.config.candidates, backend)
    return limits.shown(ctx.paths.history, datetime.now(UTC), *scope)


def read_status(ctx: Context) -> DaemonStatus:
    """The daemon's status, from its live file, the halt state, the lock and the record index."""
    live, unreadable = reporting.read_live(ctx.paths.history)
    running = DaemonLock(ctx.paths.lock).held_elsewhere()
    hstate = halt.read_halt(ctx.paths.history)
    latest = ctx.store.summaries(limit=1)
    spent = budget.spent_on(ctx.store)
    held = budget.held_now(ctx.paths.history, read_journal(ctx.paths.running))
    phase = str(live.get("phase", "stopped")) if running else "stopped"
    detail = str(live.get("detail", "")) if running else ""
    if unreadable:
        phase, detail = ("unknown" if running else phase), unreadable
    detail, tail = (
        _agent_log(live, detail) if running and phase == "agent running" else (detail, ())
    )
    since = live.get("since") if running else None
    backend = _status_backend(ctx, live if running else {})
    paused, limited_for = _limited(ctx, backend.name)
    as_of = live.get("gaps_as_of")
    caps = ctx.config.budget
    return DaemonStatus(
        root=str(ctx.paths.root),
        command=ctx.paths.command(),
        running=running,
        pid=int(live["pid"]) if running and live.get("pid") else None,
        phase=phase,
        phase_detail=detail,
        phase_since=datetime.fromisoformat(since) if isinstance(since, str) else None,
        halted=hstate.halted,
        halt_reason=hstate.reason,
        limited_until=paused.moment() if paused is not None else None,
        limit_reason=paused.reason if paused is not None else "",
        limit_backend=paused.backend if paused is not None else "",
        limited_for=limited_for,
        config_problem=ctx.config_problem,
        backend=backend.name,
        backend_reason=backend.reason,
        sandbox=jails.describe(ctx.config.guard, ctx.paths, Path(ctx.target.python)),
        network=modelrun.said(ctx.config.agent, backend.name, jails.active(ctx.config.guard)),
        network_notes=tuple(
            modelrun.warnings(
                ctx.config.agent,
                backend.name,
                jails.active(ctx.config.guard),
                Path(os.environ.get("HOME") or "/nonexistent"),
            )
        )
        + rayengine.door(ctx.config.scale),
        tools=_tools(ctx),
        land_blocker=gitops.land_blocker(ctx.paths.root),
        last_iteration_id=latest[0].iteration_id if latest else None,
        last_outcome=latest[0].outcome if latest else None,
        last_uncovered=_uncovered(ctx, latest[0].iteration_id) if latest else (),
        iterations=ctx.store.count(),
        cost_today_usd=spent.cost_usd,
        held_usd=held.usd,
        held_by=held.iteration_id if held.usd else "",
        budget_left_today_usd=max(spent.cost_left(ctx.config.budget) - held.usd, 0.0),
        iterations_today=spent.iterations,
        log_tail=tail,
        top_gaps=reporting.last_ranking(live),
        quarantined=tuple(sorted(read_quarantine(ctx))),
        open_gaps={
            str(k): int(v)
            for k, v in cast(dict[str, Any], live.get("open_gaps") or {}).items()
            if isinstance(v, int)
        },
        gaps_as_of=_moment(as_of),
        gaps_stale=_stale(ctx, _moment(as_of)),
        queue=_queue_now(ctx, live),
        budget_left_today_iterations=max(caps.max_iterations_per_day - spent.iterations, 0),
        max_cost_usd_per_day=caps.max_cost_usd_per_day,
        max_iterations_per_day=caps.max_iterations_per_day,
        metrics_url=str(live.get("metrics_url", "")) if running else "",
        setup=read_setup(ctx),
        differences=_differences(ctx, live),
        dirty=tuple(gitops.uncommitted(ctx.paths.root)),
        python=ctx.target.python,
        forge=str(live.get("forge", "")) if running else forge_said(ctx),
        forge_problem=str(live.get("forge_problem", "")) if running else "",
        python_reason=python_reason(ctx.paths.root, ctx.config.quality.python),
        test_network=ctx.config.quality.test_network,
    )


def _differences(ctx: Context, live: dict[str, Any]) -> tuple[str, ...]:
    """The ignored files shown now, the skips the latest analysis counted, tox's default
    selection at HEAD, and what the latest plain run said."""
    found = cast(list[Any], live.get("differences") or [])
    # skip_lines' own lines: the plain run's (`... skip in seed's runs but not ...`) come next
    skips = [str(d) for d in found if "skip in seed's runs: " in str(d)]
    root = ctx.paths.root
    tox = pytestconfig.tox_selection(read_at(root, "HEAD"))
    plain = plainrun.kept_lines(ctx.paths.state) if ctx.config.analysis.plain_run else ()
    said = (*ignored.said(root, jails.active(ctx.config.guard)), *skips, *tox, *plain)
    return tuple(dict.fromkeys(said))


def _queue_now(ctx: Context, live: dict[str, Any]) -> tuple[QueuedTask, ...]:
    """The daemon's last queue as the inbox is now (the modules read the tasks dropped since)."""

    def read(tasks: list[InboxText]) -> list[InboxItem | str]:
        try:
            ctx.start_host()
            return ctx.host.read_inbox(tasks)
        except SeedError as exc:  # status must answer even with broken modules
            return [str(exc)] * len(tasks)

    known = [t.name for t in reporting.last_queue(live)]
    present, dropped = inbox.peek(ctx.paths.inbox, known, read, reporting.QUEUE_MAX)
    return reporting.queue_now(live, present, dropped)


def _stale(ctx: Context, as_of: datetime | None) -> str:
    """Why the latest ranking predates the code: a landing after its analysis ('' when none)."""
    landed = ctx.store.summaries(outcome="SUCCESS", limit=1)
    ended = _moment(landed[0].ended) if landed else None
    if as_of is None or ended is None or ended <= as_of:
        return ""
    return f"analysed before {landed[0].iteration_id} landed; the next analysis replaces them"


def _uncovered(ctx: Context, iteration_id: str) -> tuple[str, ...]:
    """The places of an iteration's change that no passing test ran."""
    record = ctx.store.get(iteration_id)
    return record.uncovered if record is not None else ()


def status_text(ctx: Context, status: DaemonStatus) -> str:
    """`status` as the reporter renders it, or a plain kernel-side text when the host fails."""
    try:
        ctx.start_host()
        return ctx.host.render_status(status, datetime.now(UTC))
    except SeedError as exc:  # status must answer even with broken modules
        return _bare_status(status, str(exc))


def config_lines(status: DaemonStatus) -> list[str]:
    """What is wrong with seed.toml, and what that means for the daemon ([] when nothing)."""
    if not status.config_problem:
        return []
    then = (
        "the daemon keeps the config it read before"
        if status.running
        else "the daemon does not start until it is fixed"
    )
    return [f"config:      cannot be used ({then}): {status.config_problem}"]


def _checkout_lines(status: DaemonStatus) -> list[str]:
    lines = [f"python:      {status.python} ({status.python_reason})"] if status.python else []
    if status.test_network == "full":
        lines.append(
            'tests:       the test runs have the network ([quality] test_network = "full")'
        )
    lines += [f"forge:       {status.forge}"] if status.forge else []
    lines += [f"forge:       {status.forge_problem}"] if status.forge_problem else []
    if status.dirty:
        more = f" and {len(status.dirty) - 10} more" if len(status.dirty) > 10 else ""
        lines.append(f"uncommitted: {', '.join(status.dirty[:10])}{more}")
    return lines


def _for(status: DaemonStatus) -> str:
    """Which backends a limit pauses while the others run ('' when it holds every agent)."""
    return f" for {status.limited_for} (the others run)" if status.limited_for else ""


def _bare_status(status: DaemonStatus, problem: str) -> str:
    daemon = f"running (pid {status.pid}): {status.phase}" if status.running else "not running"
    halted = f"YES: {status.halt_reason}; run `{status.command} resume`" if status.halted else "no"
    lines = [
        f"repository:  {status.root}",
        *_checkout_lines(status),
        f"daemon:      {daemon}",
        f"halted:      {halted}",
        *(
            [f"limited:     until {status.limited_until:%Y-%m-%d %H:%M:%S}Z{_for(status)}"]
            if status.limited_until
            else []
        ),
        *config_lines(status),
        f"backend:     {status.backend or '-'} {status.backend_reason}".rstrip(),
        f"iterations:  {status.iterations} in all, {status.iterations_today} today; "
        f"last: {status.last_iteration_id or '-'} {status.last_outcome or ''}".rstrip(),
        f"budget:      today ${status.cost_today_usd:.2f} spent, "
        f"${status.budget_left_today_usd:.2f} left",
        *(f"setup:       {line.removeprefix('setup: ')}" for line in status.setup),
        *(f"differs:     {line}" for line in status.differences),
        f"(the status view could not be rendered: {problem})",
    ]
    return "\n".join(lines)
