"""The iteration under way, and the judgements about gaps that need its history."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from domain import (
    AgentReport,
    DiffStat,
    FailureCategory,
    GapReport,
    IterationOutcome,
    IterationPlan,
    IterationRecord,
)
from kernel.context import Backend
from kernel.signature import gap_signature as gap_signature  # re-exported for callers
from kernel.signature import record_signature

FAILED_OUTCOMES = (IterationOutcome.FAILURE, IterationOutcome.ROLLBACK, IterationOutcome.NO_CHANGE)
VIOLATIONS = (
    FailureCategory.SANDBOX_VIOLATION,
    FailureCategory.HYGIENE_VIOLATION,
    FailureCategory.ALLOWLIST_VIOLATION,
)

Phase = Callable[[str, str], None]
"""Called with (phase, detail) as the iteration moves on (status shows it live)."""


def noop_phase(phase: str, detail: str) -> None:
    """A Phase that reports nowhere."""
    return None


def mono() -> float:
    """Monotonic seconds."""
    return time.monotonic()


@dataclass
class Attempt:
    """State of the iteration under way, so it can be recorded however it ends."""

    plan: IterationPlan
    base: str
    started: datetime
    backend: Backend
    worktree: Path
    durations: dict[str, float] = field(default_factory=dict[str, float])
    agent: AgentReport | None = None
    agent_version: str = ""
    agent_note: str = ""
    cost_basis: str = ""
    """reported, prices or none: where the run's cost comes from."""
    exit_code: int | None = None
    touched: list[str] = field(default_factory=list[str])
    diff: DiffStat = field(default_factory=DiffStat)
    branch: str = ""
    claimed_inbox: str = ""


def timed(attempt: Attempt | None, name: str, started: float) -> None:
    """Add the time since started to one phase of the attempt."""
    if attempt is not None:
        attempt.durations[name] = round(attempt.durations.get(name, 0.0) + (mono() - started), 3)


def quarantined(report: GapReport, records: Sequence[IterationRecord]) -> tuple[str, ...]:
    """Gaps that failed 3 times in a row, or twice alike, and have not changed since."""
    by_key: dict[str, list[IterationRecord]] = {}
    for record in records:
        by_key.setdefault(record.gap.key, []).append(record)
    current = {g.key: gap_signature(g) for g in report.gaps}
    out: list[str] = []
    for key, history in by_key.items():
        if key not in current:
            continue
        streak: list[IterationRecord] = []
        for record in reversed(history):
            if record.outcome in FAILED_OUTCOMES:
                streak.append(record)
            elif record.outcome != IterationOutcome.WAITING:
                break
        same = [r for r in streak if record_signature(r) == current[key]]
        if len(same) >= 3:
            out.append(key)
            continue
        if (
            len(same) >= 2
            and same[0].failure_category == same[1].failure_category
            and same[0].evidence == same[1].evidence
        ):
            out.append(key)
    return tuple(sorted(out))


def waiting(report: GapReport, records: Sequence[IterationRecord], backend: str) -> set[str]:
    """Gaps already planned and waiting for an agent, unchanged since."""
    latest: dict[str, IterationRecord] = {}
    for record in records:
        latest[record.gap.key] = record
    out: set[str] = set()
    for gap in report.gaps:
        record = latest.get(gap.key)
        if (
            record is not None
            and record.outcome == IterationOutcome.WAITING
            and record_signature(record) == gap_signature(gap)
            and record.backend == backend
        ):
            out.add(gap.key)
    return out


# -- the iteration ------------------------------------------------------------
