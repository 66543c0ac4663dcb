"""Memory: success rates per task kind and repository, each outcome weighted by 0.95 ** days."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime

from domain import OutcomeTally, Risk, TaskKind

DECAY = 0.95
"""Weight of an outcome one day old; an outcome d days old weighs DECAY ** d."""
MIN_EVIDENCE = 3.0
"""Weighted outcomes needed before memory may raise a plan's risk."""
HIGH_BELOW = 0.35
"""A success rate below this makes a plan high risk."""
MEDIUM_BELOW = 0.65
"""A success rate below this makes a plan at least medium risk."""


@dataclass(frozen=True)
class Rate:
    """A decayed success rate: (weighted successes + 1) / (weighted outcomes + 2)."""

    successes: float
    total: float

    @property
    def value(self) -> float:
        """The smoothed rate; 0.5 when nothing is known."""
        return (self.successes + 1.0) / (self.total + 2.0)


def _days(now: datetime, day: str) -> int:
    try:
        then = date.fromisoformat(day)
    except ValueError:
        return 365  # an unreadable day weighs almost nothing
    return max((now.date() - then).days, 0)


def decayed(now: datetime, day: str) -> float:
    """What an outcome of this day (YYYY-MM-DD) weighs now: DECAY ** its age in days."""
    return DECAY ** _days(now, day)


def rate(tallies: Sequence[OutcomeTally], kind: TaskKind, fingerprint: str, now: datetime) -> Rate:
    """The success rate of a task kind in this repository (all repositories when it has none)."""

    def total(pick: Sequence[OutcomeTally]) -> Rate:
        wins = weight = 0.0
        for tally in pick:
            w = decayed(now, tally.day)
            wins += w * tally.successes
            weight += w * (tally.successes + tally.failures)
        return Rate(wins, weight)

    mine = total([t for t in tallies if t.task_kind == kind.value and t.fingerprint == fingerprint])
    if mine.total >= 1.0:
        return mine
    return total([t for t in tallies if t.task_kind == kind.value])


def risk_floor(r: Rate) -> Risk:
    """The least risk memory allows: a kind that often failed here is riskier."""
    if r.total < MIN_EVIDENCE:
        return Risk.LOW
    if r.value < HIGH_BELOW:
        return Risk.HIGH
    if r.value < MEDIUM_BELOW:
        return Risk.MEDIUM
    return Risk.LOW


def describe(kind: TaskKind, r: Rate) -> str:
    """One line for people."""
    if r.total == 0:
        return f"memory: no earlier {kind.value} outcomes"
    return f"memory: {kind.value} succeeded {r.value:.0%} of the time (weighted outcomes: {r.total:.1f})"
