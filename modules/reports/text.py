"""Plain-text views for `status` and `history`: aligned labels, no colour, one fact per line.

They read well in a terminal and in a log file alike; `--json` gives machines the models.
The kernel sends the facts (DaemonStatus, HistoryListing) and prints the text it gets back.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Protocol

from domain import DaemonStatus, QueuedTask
from modules.reports.common import percent, rate_of


class Line(Protocol):
    """What `history` shows of one iteration (a domain.HistoryLine, or any row with its fields)."""

    @property
    def iteration_id(self) -> str: ...
    @property
    def started(self) -> str: ...
    @property
    def outcome(self) -> str: ...
    @property
    def category(self) -> str: ...
    @property
    def cost(self) -> float: ...
    @property
    def gap_source(self) -> str: ...
    @property
    def gap_title(self) -> str: ...
    @property
    def gap_key(self) -> str: ...
    @property
    def ran_agent(self) -> bool: ...


def span(seconds: float) -> str:
    """A duration: 42s, 3m12s, 2h05m, 3d04h."""
    whole = max(int(seconds), 0)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    if whole < 86400:
        return f"{whole // 3600}h{(whole % 3600) // 60:02d}m"
    return f"{whole // 86400}d{(whole % 86400) // 3600:02d}h"


def _ago(moment: datetime | None, now: datetime) -> str:
    return span((now - moment).total_seconds()) + " ago" if moment else "-"


_GROUP = {
    "pytest": "build",
    "pyright": "types",
    "mypy": "types",
    "ruff": "lint",
    "ruff-format": "format",
}


def ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th, 11th, 21st."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _queue_lines(queue: Sequence[QueuedTask]) -> list[str]:
    """Where each waiting inbox task stands: "inbox/foo.md: 2nd, after build: TITLE"."""
    out: list[str] = []
    for task in queue:
        if task.passed_over:
            where = f"passed over ({task.passed_over})"
        elif task.place <= 1:
            where = "1st: next"
        elif not task.ahead_title:
            where = f"{ordinal(task.place)} in the queue"
        else:
            group = _GROUP.get(task.ahead_source, task.ahead_source)
            more = f" and {task.place - 2} more" if task.place > 2 else ""
            where = f"{ordinal(task.place)}, after {group}: {task.ahead_title}{more}"
        label = "queue:       " if not out else "             "
        out.append(f"{label}inbox/{task.name}: {where}")
    return out


def status_lines(status: DaemonStatus, now: datetime | None = None) -> list[str]:
    """`status` as text."""
    now = now or datetime.now(UTC)
    out = [f"repository:  {status.root}"]
    if status.dirty:
        more = f" and {len(status.dirty) - 10} more" if len(status.dirty) > 10 else ""
        out.append(f"uncommitted: {', '.join(status.dirty[:10])}{more}")
    if status.running:
        state = f"running (pid {status.pid}): {status.phase}"
        if status.phase_since:
            state += f" for {span((now - status.phase_since).total_seconds())}"
    else:
        state = "not running"
    out.append(f"daemon:      {state}")
    if status.phase_detail:
        out.append(f"             {status.phase_detail}")
    if status.log_tail:
        out.append("agent log:   (last lines)")
        out += [f"           | {line}" for line in status.log_tail]
    out.append(
        "halted:      "
        + (f"YES: {status.halt_reason}; run `{status.command} resume`" if status.halted else "no")
    )
    if status.limited_until is not None and status.limited_for:
        out.append(
            f"limited:     until {status.limited_until:%Y-%m-%d %H:%M:%S}Z for "
            f"{status.limited_for}: the portfolio's other agents run meanwhile, and "
            f"{status.limited_for} resumes by itself ({status.limit_reason})"
        )
    elif status.limited_until is not None:
        met = f" ({status.limit_backend}'s limit)" if status.limit_backend else ""
        out.append(
            f"limited:     until {status.limited_until:%Y-%m-%d %H:%M:%S}Z{met}: no agent runs "
            f"until then, and the daemon resumes by itself ({status.limit_reason})"
        )
    if status.config_problem:
        then = (
            "the daemon keeps the config it read before"
            if status.running
            else "the daemon does not start until it is fixed"
        )
        out.append(f"config:      cannot be used ({then}): {status.config_problem}")
    if status.land_blocker:
        out.append(f"landing:     blocked ({status.land_blocker}); the daemon only plans")
    backend = status.backend or "(decided when the daemon starts)"
    out.append(
        f"backend:     {backend}" + (f" ({status.backend_reason})" if status.backend_reason else "")
    )
    if status.sandbox:
        out.append(f"sandbox:     {status.sandbox}")
    if status.network:
        out.append(f"network:     {status.network}")
    out += [f"             {note}" for note in status.network_notes]
    if status.test_network == "full":
        out.append('tests:       the test runs have the network ([quality] test_network = "full")')
    if status.python:
        out.append(f"python:      {status.python} ({status.python_reason})")
    out += [f"forge:       {line}" for line in (status.forge, status.forge_problem) if line]
    for i, line in enumerate(status.tools):
        out.append(("tools:       " if i == 0 else "             ") + line)
    if status.type_checker:
        out.append(f"pyright:     {status.type_checker}")
    out += [f"setup:       {line.removeprefix('setup: ')}" for line in status.setup]
    out += [f"differs:     {line}" for line in status.differences]
    last = f"{status.last_iteration_id} {status.last_outcome}" if status.last_iteration_id else "-"
    out.append(
        f"iterations:  {status.iterations:,} in all, {status.iterations_today} today; last: {last}"
    )
    if status.last_uncovered:
        shown = ", ".join(status.last_uncovered[:10])
        more = (
            f" and {len(status.last_uncovered) - 10} more"
            if len(status.last_uncovered) > 10
            else ""
        )
        out.append(f"             no test ran these lines: {shown}{more}")
    cost_limit = f" of ${status.max_cost_usd_per_day:.2f}" if status.max_cost_usd_per_day else ""
    runs_limit = f" of {status.max_iterations_per_day}" if status.max_iterations_per_day else ""
    held = ""
    if status.held_usd:
        who = "the run under way" if status.running else "a killed run"
        later = "" if status.running else ", settled when the daemon next starts"
        held = f" (and ${status.held_usd:.2f} held by {who}, {status.held_by}{later})"
    out.append(
        f"budget:      today ${status.cost_today_usd:.2f} spent{held}{cost_limit}, "
        f"${status.budget_left_today_usd:.2f} left; {status.iterations_today}{runs_limit} runs, "
        f"{status.budget_left_today_iterations} left"
    )
    if status.top_gaps or status.open_gaps:
        counts = ", ".join(f"{s} {n}" for s, n in sorted(status.open_gaps.items()))
        total = sum(status.open_gaps.values())
        out.append(
            f"gaps:        {total} open ({counts or 'none'}) as of {_ago(status.gaps_as_of, now)}"
        )
        if status.gaps_stale:
            out.append(f"stale:       {status.gaps_stale}")
        for gap in status.top_gaps:
            note = f"  [{gap.skipped}]" if gap.skipped else ""
            out.append(
                f"  {gap.rank:>2}. {gap.severity.value:8} {gap.source:11} {gap.title or gap.key}{note}"
            )
    else:
        out.append("gaps:        not analysed yet (the daemon writes them after each analysis)")
    out += _queue_lines(status.queue)
    if status.quarantined:
        out.append(f"quarantined: {len(status.quarantined)}")
        out += [f"  - {key}" for key in status.quarantined]
    if status.metrics_url:
        out.append(f"metrics:     {status.metrics_url}")
    return out


def history_lines(rows: Sequence[Line], total: int, filtered: bool) -> list[str]:
    """`history` as text: newest first, one line per iteration, then a summary line."""
    if not rows:
        return ["no iterations match" if filtered else "no iterations yet"]
    out = [
        f"{'iteration':27} {'started (UTC)':16}  {'outcome':13} {'category':20} "
        f"{'cost':>9}  {'source':11} gap"
    ]
    for row in rows:
        started = row.started[:16].replace("T", " ")
        out.append(
            f"{row.iteration_id:27} {started:16}  {row.outcome:13} {row.category or '-':20} "
            f"{'$' + format(row.cost, '.4f'):>9}  {row.gap_source:11} {row.gap_title or row.gap_key}"[
                :220
            ]
        )
    landed, wins, tried = rate_of(rows)
    rate = (
        f"{percent(landed)} landed ({wins} of {tried} agent {'run' if tried == 1 else 'runs'})"
        if tried
        else ""
    )
    cost = sum(r.cost for r in rows)
    shown = f"{len(rows):,} shown" + (f" of {total:,}" if total > len(rows) else "")
    out.append(", ".join(p for p in (shown, rate, f"${cost:.2f} spent") if p))
    return out
