"""Gap selection: which gaps may be planned, in which order, judged against their history."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from domain import FailureCategory, Gap, IterationRecord, ProjectState
from modules.planner.criteria import parse_acceptance
from modules.planner.feedback import Track
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


def memory_order(fresh: Sequence[Assessment]) -> list[Assessment]:
    """Fresh gaps in report order, each run of equal severity ordered by memory's success rate."""
    out: list[Assessment] = []
    group: list[Assessment] = []
    for a in fresh:
        if group and a.gap.severity != group[0].gap.severity:
            out += _by_memory(group)
            group = []
        group.append(a)
    return out + _by_memory(group)


def budget_stopped(last: IterationRecord | None, state: ProjectState) -> str:
    """Why planning stops: the latest iteration ran out of budget and the halt it caused still
    stands ("" when not; once a person resumes, planning goes on)."""
    if last is None or last.failure_category != FailureCategory.BUDGET_EXCEEDED:
        return ""
    if not state.halted:
        return ""
    return f"BUDGET_EXCEEDED in {last.iteration_id}: nothing is planned until the halt is resumed"
