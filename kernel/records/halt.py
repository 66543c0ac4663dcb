"""The persisted halt state and the halt conditions.

A halt is written to history/halt.json and survives restarts; only `seed.py resume` clears
it. While halted the daemon keeps watching and reporting but starts no agent.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from domain import FailureCategory, IterationOutcome, IterationRecord
from kernel.bounds import HALT_FILE_MAX, HALT_REASON_MAX
from kernel.fsutil import atomic_write_text
from kernel.records.store import RecordStore

HALT_FILE = "halt.json"

FAILED_OUTCOMES = (IterationOutcome.FAILURE, IterationOutcome.ROLLBACK, IterationOutcome.NO_CHANGE)
"""Outcomes that count as a failed attempt (for quarantine and the failure streak)."""
UNJUDGED = (IterationOutcome.WAITING, IterationOutcome.ABORTED, IterationOutcome.LIMITED)
"""Outcomes that count neither way: nothing was judged (no agent ran, a person stopped it, or
the model's usage limit ended the run)."""
AT_ONCE = (FailureCategory.SANDBOX_VIOLATION, FailureCategory.BUDGET_EXCEEDED)
"""Categories that halt the daemon the moment one iteration ends with them (a full disk too)."""
REPEATING = (
    FailureCategory.HYGIENE_VIOLATION,
    FailureCategory.ALLOWLIST_VIOLATION,
    FailureCategory.GROWTH_LIMIT,
    FailureCategory.RUN_LIMIT,
)
"""Categories that halt when one of them ends REPEATS iterations of one UTC day."""
REPEATS = 3
STREAK = 3
"""Distinct gaps failing in a row since the last resume, or flaky iterations in a row, that halt."""
HALT_WINDOW = 200
"""Records read to judge a halt: enough for a day's repeats and the streak."""


@dataclass(frozen=True)
class HaltState:
    """Whether the daemon may run agents, and why not."""

    halted: bool = False
    reason: str = ""
    category: str = ""
    at: str = ""
    iteration_id: str = ""
    resumed_at: str = ""
    """When a person last resumed: failure streaks count only iterations after it."""


def read_halt(history: Path) -> HaltState:
    """The halt state; an unreadable halt file counts as halted (it is kept for a person to see)."""
    path = history / HALT_FILE
    if not path.exists():
        return HaltState()
    try:
        if not path.is_file():
            raise ValueError("not a regular file")
        with path.open("rb") as handle:
            raw = handle.read(HALT_FILE_MAX + 1)
        if len(raw) > HALT_FILE_MAX:
            raise ValueError(f"over the bound of {HALT_FILE_MAX} bytes")
        data = cast(dict[str, Any], json.loads(raw.decode("utf-8")))
        return HaltState(
            halted=bool(data.get("halted", False)),
            reason=str(data.get("reason", "")),
            category=str(data.get("category", "")),
            at=str(data.get("at", "")),
            iteration_id=str(data.get("iteration_id", "")),
            resumed_at=str(data.get("resumed_at", "")),
        )
    except (OSError, ValueError, AttributeError, RecursionError) as exc:
        return HaltState(
            halted=True, reason=f"{path} is unreadable ({exc}); run `seed.py resume` to clear it"
        )


def halt(store: RecordStore, reason: str, category: str = "", iteration_id: str = "") -> HaltState:
    """Persist a halt and record the event (a halt already in place keeps its first reason)."""
    before = read_halt(store.history)
    if len(reason) > HALT_REASON_MAX:
        reason = reason[:HALT_REASON_MAX] + f" ... ({len(reason) - HALT_REASON_MAX} characters cut)"
    if before.halted:
        store.event("halt", f"also: {reason}", category=category, iteration_id=iteration_id)
        return before
    state = HaltState(
        True,
        reason,
        category,
        datetime.now(UTC).isoformat(),
        iteration_id,
        before.resumed_at,
    )
    atomic_write_text(store.history / HALT_FILE, json.dumps(asdict(state), indent=2) + "\n")
    store.event("halt", reason, category=category, iteration_id=iteration_id)
    return state


def resume(store: RecordStore) -> HaltState:
    """Clear a halt and record the event; returns the state that was cleared (a resume of
    a daemon that was not halted changes nothing and is no event)."""
    before = read_halt(store.history)
    if not before.halted:
        return before
    cleared = HaltState(resumed_at=datetime.now(UTC).isoformat())
    atomic_write_text(store.history / HALT_FILE, json.dumps(asdict(cleared), indent=2) + "\n")
    store.event(
        "resume", f"resumed (was: {before.reason or 'not halted'})", was_halted=before.halted
    )
    return before


def halt_reason(
    record: IterationRecord, recent: Sequence[IterationRecord], resumed_at: str = ""
) -> str:
    """Why the daemon must halt after this record ('' when it may go on).

    `recent` are the latest records, oldest first, this one included; iterations that
    ended before the last resume do not count towards a streak or a repeat.
    """
    category = record.failure_category
    if category in AT_ONCE:
        assert category is not None
        return f"{category.value} in {record.iteration_id}: {record.reason}"
    since = _parse_time(resumed_at)
    ran = [r for r in recent if r.outcome not in UNJUDGED and (since is None or r.ended_at > since)]
    if category in REPEATING:
        day = record.ended_at.astimezone(UTC).date()
        same = [
            r
            for r in ran
            if r.failure_category == category and r.ended_at.astimezone(UTC).date() == day
        ]
        if len(same) >= REPEATS and same[-1].iteration_id == record.iteration_id:
            assert category is not None
            return (
                f"{category.value} {len(same)} times on {day.isoformat()} (UTC), the latest in "
                f"{record.iteration_id}: {record.reason}"
            )
    if not ran or ran[-1].iteration_id != record.iteration_id:
        return ""
    streak = _failing(ran)
    latest: dict[str, IterationRecord] = {}
    for r in reversed(streak):
        latest.setdefault(r.gap.key, r)
    if len(latest) >= STREAK:
        # distinct gaps: one gap failing again is quarantine's business, not a halt's
        shown = sorted(latest.values(), key=lambda r: (r.ended_at, r.iteration_id))
        return (
            f"{len(streak)} consecutive failures across {len(latest)} different gaps "
            f"({', '.join(f'{r.iteration_id} {r.gap.key}' for r in shown)})"
        )
    last = ran[-STREAK:]
    if len(last) < STREAK:
        return ""
    if all(r.failure_category == FailureCategory.FLAKY_TEST for r in last):
        return f"a flaky streak of {STREAK} iterations ({', '.join(r.iteration_id for r in last)})"
    return ""


def _failing(ran: Sequence[IterationRecord]) -> list[IterationRecord]:
    """The failed iterations in a row that end the list (oldest first)."""
    streak: list[IterationRecord] = []
    for r in reversed(ran):
        if r.outcome not in FAILED_OUTCOMES:
            break
        streak.append(r)
    return streak[::-1]


def _parse_time(value: str) -> datetime | None:
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
