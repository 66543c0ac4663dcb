"""What was tried before: a gap's streak of failed attempts, and the notes that carry it forward."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from domain import (
    AttemptNote,
    FailureCategory,
    IterationOutcome,
    IterationRecord,
    Tool,
)

FAILED = (IterationOutcome.FAILURE, IterationOutcome.ROLLBACK, IterationOutcome.NO_CHANGE)
"""Outcomes that count as a failed attempt at a gap."""
TRANSPARENT = (IterationOutcome.WAITING, IterationOutcome.ABORTED, IterationOutcome.LIMITED)
"""Outcomes that neither fail nor clear a gap: nothing was judged (no agent, a person stopped
it, or the model's usage limit ended the run)."""
LOOKBACK = 5
"""Attempts at one gap the planner looks at (the latest ones)."""
MAX_NOTES = 5
TRACE_CHARS = 1200
SUMMARY_CHARS = 800
_SEQ = re.compile(r"^iter-(\d+)-")


def _order(record: IterationRecord) -> tuple[int, str]:
    # the kernel's sequence number orders records; the id breaks ties (ids carry the time)
    match = _SEQ.match(record.iteration_id)
    return (int(match.group(1)) if match else 0, record.iteration_id)


def chronological(records: Sequence[IterationRecord]) -> list[IterationRecord]:
    """Records oldest first, by sequence number (whatever order they came in), without repeats."""
    unique = {r.iteration_id: r for r in records}
    return sorted(unique.values(), key=_order)


@dataclass(frozen=True)
class Track:
    """A gap's failed attempts since it last landed or was blocked, oldest first."""

    streak: tuple[IterationRecord, ...] = ()

    @property
    def latest(self) -> IterationRecord | None:
        """The most recent failed attempt."""
        return self.streak[-1] if self.streak else None

    @property
    def category(self) -> FailureCategory | None:
        """The failure category of the most recent failed attempt."""
        latest = self.latest
        return latest.failure_category if latest is not None else None

    def count(self, category: FailureCategory | None) -> int:
        """Attempts in the streak that failed with this category."""
        return sum(1 for r in self.streak if r.failure_category == category)


def tracks(records: Sequence[IterationRecord]) -> dict[str, Track]:
    """Each gap key's streak, from its latest LOOKBACK attempts that were judged (records
    oldest first, as chronological() returns them)."""
    by_key: dict[str, list[IterationRecord]] = {}
    for record in records:
        if record.outcome not in TRANSPARENT:
            by_key.setdefault(record.gap.key, []).append(record)
    out: dict[str, Track] = {}
    for key, history in by_key.items():
        streak: list[IterationRecord] = []
        for record in reversed(history[-LOOKBACK:]):
            if record.outcome not in FAILED:
                break
            streak.append(record)
        out[key] = Track(tuple(reversed(streak)))
    return out


def latest_judged(records: Sequence[IterationRecord]) -> IterationRecord | None:
    """The most recent record of any gap that was judged (records oldest first)."""
    return next((r for r in reversed(records) if r.outcome not in TRANSPARENT), None)


def failing_tests(record: IterationRecord) -> tuple[str, ...]:
    """Node ids of the tests the attempt broke."""
    return tuple(
        dict.fromkeys(d.node_id for d in record.failures if d.tool == Tool.PYTEST and d.node_id)
    )[:10]


def note(record: IterationRecord) -> AttemptNote:
    """The evidence of one failed attempt, capped to what a prompt can carry."""
    trace = next((d.detail for d in record.failures if d.detail), "")
    return AttemptNote(
        iteration_id=record.iteration_id,
        outcome=record.outcome,
        failure_category=record.failure_category,
        failing_tests=failing_tests(record),
        trace_head=trace[:TRACE_CHARS],
        touched_files=record.touched_files[:50],
        reason=record.reason[:500],
        agent_summary=record.agent_summary[:SUMMARY_CHARS],
        evidence=tuple(e[:300] for e in record.evidence[:5]),
        backend=record.backend,
    )


def notes(track: Track) -> tuple[AttemptNote, ...]:
    """Notes for the latest failed attempts of a gap, oldest first."""
    return tuple(note(r) for r in track.streak[-MAX_NOTES:])
