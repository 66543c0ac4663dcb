"""Gap selection: which gaps may be planned, in which order, judged against their history."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from domain import (
    FailureCategory,
    Gap,
    GapReport,
    IterationRecord,
    ProjectState,
    TaskKind,
    Tool,
)
from modules.planner import memory
from modules.planner.actions import task_kind
from modules.planner.criteria import parse_acceptance
from modules.planner.feedback import Track, latest_judged, tracks
from modules.planner.revision import NEVER_RETRIED, retries_left

TIRED_AFTER = 3
"""Consecutive failures after which a gap is skipped while any other gap can be planned."""


class Standing(Enum):
    """How a gap stands with the planner."""

    FRESH = "fresh"
    TIRED = "tired"
    """Failed 3+ times in a row, or spent its one retry: planned only when nothing fresh is left."""
    REFUSED = "refused"
    """Never planned (a violation)."""


@dataclass(frozen=True)
class Assessment:
    """A gap, its history, and how it stands."""

    gap: Gap
    track: Track
    standing: Standing
    reason: str = ""
    success_rate: float = 0.5


def assess(gap: Gap, track: Track, success: float) -> Assessment:
    """Judge one gap by its own checks and its streak of failed attempts (success: memory's
    rate for its kind)."""
    rejected = rejected_acceptance(gap)
    if rejected:
        return Assessment(gap, track, Standing.REFUSED, rejected, success)
    latest = track.latest
    if latest is None:
        return Assessment(gap, track, Standing.FRESH, success_rate=success)
    category = latest.failure_category
    if category in NEVER_RETRIED:
        return Assessment(
            gap,
            track,
            Standing.REFUSED,
            f"never retried: {category.value if category else ''} in {latest.iteration_id}",
            success,
        )
    if len(track.streak) >= TIRED_AFTER:
        return Assessment(
            gap,
            track,
            Standing.TIRED,
            f"failed {len(track.streak)} times in a row (latest {latest.iteration_id})",
            success,
        )
    if not retries_left(track):
        name = category.value if category else latest.outcome.value
        return Assessment(
            gap,
            track,
            Standing.TIRED,
            f"already retried once after {name} (latest {latest.iteration_id})",
            success,
        )
    return Assessment(gap, track, Standing.FRESH, success_rate=success)


def rejected_acceptance(gap: Gap) -> str:
    """Why an inbox item's own acceptance lines cannot be checked ("" when they all can)."""
    if gap.inbox is None:
        return ""
    reasons = [p.reason for p in map(parse_acceptance, gap.inbox.acceptance) if p.criterion is None]
    if not reasons:
        return ""
    return "its acceptance is not in the check catalogue: " + "; ".join(reasons)


def _by_memory(group: list[Assessment]) -> list[Assessment]:
    # stable: equal rates keep the report's order
    return sorted(group, key=lambda a: -round(a.success_rate, 6))


_SYNTAX_RULES = ("invalid-syntax", "syntax")


def memory_group(gap: Gap) -> str:
    """The ranking group inside which memory may move a gap ('' for a person's task: it keeps
    the place its priority and age gave it)."""
    if gap.inbox is not None:
        return ""
    if gap.roadmap is not None or gap.source == "roadmap":
        return "roadmap"
    syntax = bool(gap.evidence) and all(
        d.rule in _SYNTAX_RULES and d.tool != Tool.PYTEST for d in gap.evidence
    )
    return "build" if syntax or gap.source == "pytest" else gap.source


def _one_run(first: Gap, gap: Gap) -> bool:
    group = memory_group(first)
    return bool(group) and group == memory_group(gap) and first.severity == gap.severity


def memory_order(fresh: Sequence[Assessment]) -> list[Assessment]:
    """Fresh gaps in report order, each run of one ranking group and severity ordered by
    memory's success rate: memory never moves a gap past another group, nor a person's task."""
    out: list[Assessment] = []
    group: list[Assessment] = []
    for a in fresh:
        if group and not _one_run(group[0].gap, a.gap):
            out += _by_memory(group)
            group = []
        group.append(a)
    return out + _by_memory(group)


@dataclass
class Queue:
    """The gaps in the order the planner takes them, and those it passes over."""

    fresh: list[Assessment]
    tired: list[Assessment]
    """Planned only when no fresh gap can be, in report order."""
    passed_over: dict[str, str]
    """Gap key -> why it is never planned now (refused, or planning stopped)."""


def planning_queue(
    report: GapReport, records: Sequence[IterationRecord], state: ProjectState
) -> Queue:
    """The one order every plan is drafted in (records in sequence order): fresh gaps by the
    ranking and, within a group, memory; then the tired ones."""
    stopped = budget_stopped(latest_judged(records), state)
    if stopped:
        return Queue([], [], {g.key: stopped for g in report.gaps})
    history = tracks(records)
    rates = {
        kind: memory.rate(state.tallies, kind, state.fingerprint, state.now).value
        for kind in TaskKind
    }
    assessed = [
        assess(g, history.get(g.key, Track()), rates[task_kind(g)])
        for g in report.gaps
        if g.key not in state.quarantined
    ]
    return Queue(
        memory_order([a for a in assessed if a.standing == Standing.FRESH]),
        [a for a in assessed if a.standing == Standing.TIRED],
        {a.gap.key: a.reason for a in assessed if a.standing == Standing.REFUSED},
    )


def budget_stopped(last: IterationRecord | None, state: ProjectState) -> str:
    """Why planning stops: the latest iteration ran out of budget and the halt it caused still
    stands ("" when not; once a person resumes, planning goes on)."""
    if last is None or last.failure_category != FailureCategory.BUDGET_EXCEEDED:
        return ""
    if not state.halted:
        return ""
    return f"BUDGET_EXCEEDED in {last.iteration_id}: nothing is planned until the halt is resumed"
