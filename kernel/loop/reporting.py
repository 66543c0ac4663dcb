"""History for people: the kernel gathers facts from the record index; the reporter renders them.

The kernel never renders prose itself (beyond a bare fallback when the module host fails);
it reads history through the store's index only, never by scanning iteration folders.
"""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from pydantic import ValidationError

from domain import (
    DaemonNote,
    EventNote,
    GapReport,
    GenerationNote,
    HaltNote,
    HistoryDigest,
    HistoryLine,
    HistoryListing,
    HistoryRow,
    HistoryTotals,
    InboxItem,
    IterationRecord,
    PlanningOrder,
    QueuedTask,
    RankedGap,
)
from domain.fitness import Fitness
from kernel.bounds import GENERATION_LINE_MAX, STATUS_FILE_MAX
from kernel.errors import HostError, SeedError
from kernel.fsutil import atomic_write_text
from kernel.host.context import Context
from kernel.isolation.daemonlock import DaemonLock
from kernel.loop import tournament
from kernel.loop.quarantine import read_quarantine
from kernel.records import budget, halt, jsonl, limits
from kernel.records.store import ReportRow, Summary

STATUS_NAME = "status.json"
"""history/status.json, kept by the daemon's StatusWriter."""
INDEX_NAME = "README.md"
DASHBOARD_NAME = "index.html"
INDEX_ROWS = 100
"""How many of the latest iterations history/README.md lists."""
TOP_GAPS = 5
QUEUE_MAX = 20
"""Waiting inbox tasks `status` places in the queue at most."""
EVENTS = 10
"""How many of the latest events (halts, resumes, recoveries, errors) the index shows."""


def ranked(
    report: GapReport, skipped: Mapping[str, str] = {}, top: int = TOP_GAPS, chosen: str = ""
) -> tuple[RankedGap, ...]:
    """The head of a ranking (and the chosen gap wherever it stood), with why gaps were passed over."""
    out: list[RankedGap] = []
    for rank, gap in enumerate(report.gaps, start=1):
        if rank > top and gap.key != chosen:
            continue
        out.append(
            RankedGap(
                key=gap.key,
                category=gap.category,
                source=gap.source,
                title=gap.title,
                rank=rank,
                severity=gap.severity,
                rank_reason=gap.rank_reason,
                skipped=skipped.get(gap.key, ""),
            )
        )
    return tuple(out)


def queue(
    report: GapReport, passed_over: Mapping[str, str], order: PlanningOrder
) -> tuple[QueuedTask, ...]:
    """Each inbox task's place in the planner's order (gaps passed over by the kernel or the
    planner are not in the queue, and say why), and the first gap ahead of it."""
    gaps = {g.key: g for g in report.gaps}
    queued = [gaps[k] for k in order.keys if k in gaps and k not in passed_over]
    places = {g.key: i for i, g in enumerate(queued, start=1)}
    why = {**order.passed_over, **passed_over}
    out: list[QueuedTask] = []
    for gap in report.gaps:
        if gap.inbox is None:
            continue
        priority = gap.inbox.priority.value
        place = places.get(gap.key, 0)
        if not place:
            reason = why.get(gap.key, "not planned now")
            out.append(QueuedTask(name=gap.inbox.name, passed_over=reason, priority=priority))
            continue
        first = queued[0] if place > 1 else None
        out.append(
            QueuedTask(
                name=gap.inbox.name,
                place=place,
                ahead_source=first.source if first else "",
                ahead_title=(first.title or first.key) if first else "",
                priority=priority,
            )
        )
    return tuple(sorted(out, key=lambda t: (t.place or QUEUE_MAX * 100, t.name))[:QUEUE_MAX])


def next_gap(report: GapReport, passed_over: Mapping[str, str], order: PlanningOrder) -> list[str]:
    """The source and title of the gap the planner takes next ([] when none)."""
    gaps = {g.key: g for g in report.gaps}
    first = next((gaps[k] for k in order.keys if k in gaps and k not in passed_over), None)
    return [first.source, first.title or first.key] if first else []


_PRIORITIES = ("critical", "high", "normal", "low")


def queue_now(
    live: Mapping[str, Any], present: set[str], dropped: Sequence[InboxItem]
) -> tuple[QueuedTask, ...]:
    """The daemon's last queue as the inbox is now: a task gone from inbox/ is left out, and
    one dropped since takes the place the planner said a task of its priority takes (after a
    broken build and the waiting tasks of its priority or higher), the others after it moved."""
    last = last_queue(live)
    gone = [t.place for t in last if t.name not in present and t.place]
    tasks = [
        t.model_copy(update={"place": t.place - sum(1 for g in gone if g < t.place)})
        if t.place
        else t
        for t in last
        if t.name in present
    ]
    places = {
        k: v - sum(1 for g in gone if g < v)
        for k, v in cast(dict[str, Any], live.get("new_task_place") or {}).items()
        if isinstance(v, int)
    }
    nxt = cast(list[Any], live.get("next_gap") or [])
    ahead = (str(nxt[0]), str(nxt[1])) if len(nxt) == 2 and 1 not in gone else ("", "")
    head = next((t for t in tasks if t.place == 1), None)
    if head is not None:
        ahead = ("inbox", f"inbox/{head.name}")
    added: list[QueuedTask] = []
    level = _PRIORITIES.index
    for item in sorted(dropped, key=lambda i: (level(i.priority.value), i.received_at, i.name)):
        base = places.get(item.priority.value)
        base = base if isinstance(base, int) and base >= 1 else len(tasks) + 1
        place = base + sum(1 for t in added if level(t.priority) <= level(item.priority.value))
        tasks = [
            t.model_copy(update={"place": t.place + 1}) if t.place >= place else t for t in tasks
        ]
        added.append(QueuedTask(name=item.name, place=place, priority=item.priority.value))
        if place == 1:
            ahead = ("inbox", item.title or item.name)
    shown: list[QueuedTask] = []
    for task in sorted((*tasks, *added), key=lambda t: (t.place or QUEUE_MAX * 100, t.name)):
        if task.place > 1:
            task = task.model_copy(update={"ahead_source": ahead[0], "ahead_title": ahead[1]})
        shown.append(task)
    return tuple(shown[:QUEUE_MAX])


def last_queue(live: Mapping[str, Any]) -> tuple[QueuedTask, ...]:
    """The queue the daemon wrote to status.json (bad entries are left out)."""
    out: list[QueuedTask] = []
    for raw in cast(list[Any], live.get("queue") or [])[:QUEUE_MAX]:
        with contextlib.suppress(ValidationError, TypeError):
            out.append(QueuedTask.model_validate(raw))
    return tuple(out)


def open_gaps(report: GapReport) -> dict[str, int]:
    """Open gaps by source."""
    return dict(sorted(Counter(g.source for g in report.gaps).items()))


def live_status(history: Path) -> dict[str, Any]:
    """history/status.json as the daemon last wrote it ({} when absent or unreadable)."""
    return read_live(history)[0]


def read_live(history: Path) -> tuple[dict[str, Any], str]:
    """history/status.json ({} when absent or unreadable) and why it could not be read ('')."""
    path = history / STATUS_NAME
    try:
        if not path.is_file():
            return {}, ""
        with path.open("rb") as handle:
            raw = handle.read(STATUS_FILE_MAX + 1)
    except OSError as exc:
        return {}, f"{path} is unreadable ({exc.strerror or exc})"
    if len(raw) > STATUS_FILE_MAX:
        return {}, f"{path} is over the bound of {STATUS_FILE_MAX} bytes; not read"
    try:
        data: Any = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        return {}, f"{path} is unreadable ({str(exc)[:200]})"
    if not isinstance(data, dict):
        return {}, f"{path} is not a JSON object"
    return cast(dict[str, Any], data), ""


def last_ranking(live: Mapping[str, Any]) -> tuple[RankedGap, ...]:
    """The top gaps the daemon wrote to status.json (bad entries are left out)."""
    out: list[RankedGap] = []
    for raw in cast(list[Any], live.get("top_gaps") or []):
        with contextlib.suppress(ValidationError, TypeError):
            out.append(RankedGap.model_validate(raw))
    return tuple(out)


def history_row(row: ReportRow) -> HistoryRow:
    """An index row as the reporter's model."""
    return HistoryRow.model_validate(
        {
            "iteration_id": row.iteration_id,
            "started_at": row.started,
            "ended_at": row.ended,
            "outcome": row.outcome,
            "failure_category": row.category or None,
            "gap_key": row.gap_key,
            "gap_source": row.gap_source,
            "gap_category": row.gap_category,
            "gap_title": row.gap_title,
            "cost_usd": row.cost,
            "tokens_used": row.tokens,
            "backend": row.backend,
            "durations": row.durations,
            "open_gaps": row.open_gaps,
            "candidates": row.candidates,
            "ran_agent": row.ran_agent,
        }
    )


def digest(ctx: Context, limit: int = 0) -> HistoryDigest:
    """The latest rows (all when limit is 0), totals, halt and gap facts, from the index."""
    store = ctx.store
    live = live_status(ctx.paths.history)
    rows: list[HistoryRow] = []
    for row in store.report_rows(limit):
        with contextlib.suppress(ValidationError):
            rows.append(history_row(row))
    totals = store.totals()
    now = datetime.now(UTC)
    spent = budget.spent_on(store, now.date().isoformat())
    hstate = halt.read_halt(ctx.paths.history)
    limits = ctx.config.budget
    return HistoryDigest(
        generated_at=now,
        root_name=ctx.paths.root.name,
        command=ctx.paths.command(),
        rows=tuple(rows),
        totals=HistoryTotals(
            iterations=totals.iterations,
            by_outcome=totals.by_outcome,
            agent_runs=totals.agent_runs,
            agent_landed=totals.agent_landed,
            cost_usd=totals.cost,
            tokens_used=totals.tokens,
            day=spent.day,
            cost_today_usd=spent.cost_usd,
            iterations_today=spent.iterations,
            max_cost_usd_per_day=limits.max_cost_usd_per_day,
            max_iterations_per_day=limits.max_iterations_per_day,
        ),
        halt=_halt_note(hstate),
        daemon=daemon_note(ctx, live),
        quarantined=tuple(sorted(read_quarantine(ctx))),
        top_gaps=last_ranking(live),
        backend=str(live.get("backend", "")),
        events=tuple(
            EventNote(at=e.at, kind=e.kind, message=e.message)
            for e in reversed(store.events(EVENTS))
        ),
        generations=generation_notes(ctx.paths.history / "generations.jsonl"),
    )


def generation_notes(path: Path) -> tuple[GenerationNote, ...]:
    """The landed generations and their figures by part, oldest first; a line that does not
    read is left out (the dashboard shows what it can)."""
    notes: list[GenerationNote] = []
    with contextlib.suppress(OSError):
        for line in jsonl.lines(path, GENERATION_LINE_MAX):
            row = jsonl.whole_object(line.data or b"")
            if row is None:
                continue
            with contextlib.suppress(ValidationError, TypeError, AttributeError):
                notes.append(
                    GenerationNote(
                        number=row["number"],
                        iteration_id=row.get("iteration_id", ""),
                        commit=row.get("commit", ""),
                        before=Fitness.model_validate(row.get("before", {})).parts,
                        after=Fitness.model_validate(row.get("after", {})).parts,
                    )
                )
    return tuple(sorted(notes, key=lambda n: n.number))


def daemon_note(ctx: Context, live: dict[str, Any]) -> DaemonNote:
    """Whether a daemon runs, from its lock (held by the daemon itself when it writes the index);
    its pid and phase from status.json only while it does."""
    running = DaemonLock(ctx.paths.lock).held_elsewhere()
    pid = live.get("pid") if running else None
    config = ctx.config
    sent = tournament.backends(config.candidates, str(live.get("backend") or config.agent.backend))
    scope = config.daemon.limit_scope
    paused, limited_for = limits.shown(ctx.paths.history, datetime.now(UTC), scope, sent)
    return DaemonNote(
        known=True,
        running=running,
        pid=pid if isinstance(pid, int) and not isinstance(pid, bool) else None,
        phase=str(live.get("phase", ""))[:100] if running else "",
        limited_until=paused.moment() if paused is not None else None,
        limited_for=limited_for,
    )


def _halt_note(state: halt.HaltState) -> HaltNote:
    since: datetime | None = None
    with contextlib.suppress(ValueError):
        since = datetime.fromisoformat(state.at) if state.at else None
    return HaltNote(
        halted=state.halted,
        reason=state.reason,
        category=state.category,
        iteration_id=state.iteration_id,
        since=since,
    )


def write_index(ctx: Context) -> Path:
    """Rewrite history/README.md atomically from the latest iterations (a bare list if rendering fails)."""
    facts = digest(ctx, INDEX_ROWS)
    try:
        ctx.start_host()
        text = ctx.host.render_index(facts)
    except HostError as exc:
        text = _bare_index(facts, str(exc))
    path = ctx.paths.history / INDEX_NAME
    atomic_write_text(path, text)
    return path


def _bare_index(facts: HistoryDigest, problem: str) -> str:
    lines = ["# history", "", f"(the index could not be rendered: {problem})", ""]
    if facts.halt.halted:
        lines += [f"HALTED: {facts.halt.reason} (run `{facts.command} resume`)", ""]
    lines += [
        f"- [{r.iteration_id}]({r.iteration_id}/report.md) {r.outcome.value} {r.gap_key}"
        for r in facts.rows
    ]
    return "\n".join(lines) + "\n"


def write_dashboard(ctx: Context, path: Path | None = None) -> tuple[Path, int, int]:
    """Render history/index.html from every iteration; returns (path, bytes, iterations)."""
    facts = digest(ctx)
    ctx.start_host()
    text = ctx.host.render_dashboard(facts)
    target = path or ctx.paths.history / DASHBOARD_NAME
    data = text.encode("utf-8")
    atomic_write_text(target, text)
    return target, len(data), len(facts.rows)


def history_text(ctx: Context, rows: list[Summary], total: int, filtered: bool) -> str:
    """`history` as the reporter renders it, or a plain kernel-side list when the host fails."""
    listing = HistoryListing(
        rows=tuple(
            HistoryLine(
                iteration_id=r.iteration_id,
                started=r.started,
                outcome=r.outcome,
                category=r.category,
                cost=r.cost,
                gap_source=r.gap_source,
                gap_title=r.gap_title,
                gap_key=r.gap_key,
                ran_agent=r.ran_agent,
            )
            for r in rows
        ),
        total=total,
        filtered=filtered,
    )
    try:
        ctx.start_host()
        return ctx.host.render_listing(listing)
    except SeedError as exc:
        lines = [f"{r.iteration_id} {r.outcome} {r.gap_key}" for r in listing.rows]
        return "\n".join([*lines, f"(the history view could not be rendered: {exc})"])


def candidates_table(record: IterationRecord) -> str:
    """The candidates that tried the gap, with the facts the kernel chose by (markdown)."""
    lines = [
        "## Candidates",
        "",
        record.choice or "No candidate passed everything a change must pass.",
        "",
        "| # | backend | outcome | needs a person | lines outside suspects | uncovered | runs "
        "| +/- | tokens | cost | usage counted by | seconds | host | files |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in record.candidates:
        outcome = c.outcome.value + (f" {c.failure_category.value}" if c.failure_category else "")
        mark = " (landed)" if c.won else ""
        who = c.backend + (f", {c.model}" if c.model else "")
        lines.append(
            f"| {c.number}{mark} | {who} | {outcome} | {'yes' if c.needs_person else 'no'} "
            f"| {c.outside_suspects} | {c.uncovered} | {c.rounds} "
            f"| +{c.diff.insertions}/-{c.diff.deletions} | {c.tokens_used:,} | ${c.cost_usd:.4f} "
            f"| {c.usage_from or '-'} | {c.seconds:.0f} | {c.host or '-'} | history/{c.folder}/"
            + (f" (kept on `{c.branch}`)" if c.branch else "")
            + " |"
        )
    reasons = [f"- candidate {c.number}: {c.reason}" for c in record.candidates if c.reason]
    return "\n".join([*lines, "", *reasons]) + "\n"
