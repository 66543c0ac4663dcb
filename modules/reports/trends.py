"""Aggregations behind the dashboard's charts: time buckets, rates, costs, gaps, phases."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from domain import HistoryRow
from modules.reports.common import (
    NON_QUALITY_SOURCES,
    OUTCOME_COLORS,
    OUTCOMES,
    PHASE_COLORS,
    ordered_phases,
    rate_of,
)
from modules.reports.svg import Series

MAX_BUCKETS = 90
"""Charts over time show at most this many bars: days, else weeks, else months."""
PALETTE = ("#4a90d9", "#d64541", "#2e9d4f", "#d9822b", "#8e5bc2", "#1f6f8b", "#b5a000", "#8c8c8c")


def _day(moment: datetime) -> date:
    return (moment.astimezone(UTC) if moment.tzinfo else moment).date()


@dataclass(frozen=True)
class Buckets:
    """Consecutive time buckets covering the rows, and where each day falls."""

    unit: str
    """day, week or month."""
    starts: tuple[date, ...]

    @property
    def labels(self) -> list[str]:
        """One label per bucket (ISO date, or YYYY-MM for months)."""
        if self.unit == "month":
            return [d.strftime("%Y-%m") for d in self.starts]
        return [d.isoformat() for d in self.starts]

    def start_of(self, day: date) -> date:
        """The first day of the bucket holding day."""
        if self.unit == "week":
            return day - timedelta(days=day.weekday())
        if self.unit == "month":
            return day.replace(day=1)
        return day


def bucketing(rows: Sequence[HistoryRow]) -> Buckets:
    """Days when the rows span at most MAX_BUCKETS days, else weeks, else months."""
    if not rows:
        return Buckets("day", ())
    first = min(_day(r.started_at) for r in rows)
    last = max(_day(r.started_at) for r in rows)
    span = (last - first).days
    unit = "day" if span < MAX_BUCKETS else "week" if span < 7 * (MAX_BUCKETS - 1) else "month"
    probe = Buckets(unit, ())
    starts: list[date] = []
    current, end = probe.start_of(first), probe.start_of(last)
    while current <= end:
        starts.append(current)
        current = _next(current, unit)
    return Buckets(unit, tuple(starts))


def _next(day: date, unit: str) -> date:
    if unit == "day":
        return day + timedelta(days=1)
    if unit == "week":
        return day + timedelta(days=7)
    return (day.replace(day=28) + timedelta(days=4)).replace(day=1)


class Binned:
    """Rows placed into buckets once; the charts read from here."""

    def __init__(self, rows: Sequence[HistoryRow]) -> None:
        # rows come newest first; ties in time keep the order the iterations ran in
        self.rows = sorted(reversed(rows), key=lambda r: r.started_at)
        self.buckets = bucketing(self.rows)
        positions = {d: i for i, d in enumerate(self.buckets.starts)}
        self.slots: list[list[HistoryRow]] = [[] for _ in self.buckets.starts]
        for row in self.rows:
            self.slots[positions[self.buckets.start_of(_day(row.started_at))]].append(row)

    def outcomes(self) -> list[Series]:
        """Iterations per bucket, one series per outcome that occurs."""
        counts = [Counter(r.outcome.value for r in slot) for slot in self.slots]
        present = {o for c in counts for o in c}
        return [
            Series(o.value, OUTCOME_COLORS[o.value], [float(c.get(o.value, 0)) for c in counts])
            for o in OUTCOMES
            if o.value in present
        ]

    def cost(self) -> Series:
        """Dollars spent per bucket."""
        return Series("cost", "#d9822b", [sum(r.cost_usd for r in slot) for slot in self.slots])

    def open_quality_gaps(self) -> list[Series]:
        """Open quality gaps per tool source at the last analysis of each bucket (carried forward)."""
        sources = sorted(
            {s for r in self.rows for s in r.open_gaps if s not in NON_QUALITY_SOURCES}
        )
        values: dict[str, list[float | None]] = {s: [] for s in sources}
        latest: dict[str, int] | None = None
        for slot in self.slots:
            known = [r.open_gaps for r in slot if r.open_gaps]
            if known:
                latest = known[-1]
            for source in sources:
                values[source].append(None if latest is None else float(latest.get(source, 0)))
        return [
            Series(source, PALETTE[i % len(PALETTE)], values[source])
            for i, source in enumerate(sources)
        ]

    def phase_means(self) -> list[Series]:
        """Mean seconds per phase per bucket, over the iterations that timed it."""
        phases = ordered_phases({p for r in self.rows for p in r.durations})
        out: list[Series] = []
        for i, phase in enumerate(phases):
            means: list[float | None] = []
            for slot in self.slots:
                timed = [r.durations[phase] for r in slot if phase in r.durations]
                means.append(sum(timed) / len(timed) if timed else None)
            out.append(Series(phase, PHASE_COLORS.get(phase, PALETTE[i % len(PALETTE)]), means))
        return out


def success_by_source(rows: Sequence[HistoryRow]) -> list[tuple[str, float, int, int]]:
    """(source, rate, successes, attempts) for each gap source an agent tried, most tried first."""
    by_source: defaultdict[str, list[HistoryRow]] = defaultdict(list)
    for row in rows:
        if row.ran_agent:
            by_source[row.gap_source].append(row)
    rates = [(s, rate_of(ran)) for s, ran in by_source.items()]
    return [
        (s, rate or 0.0, wins, n)
        for s, (rate, wins, n) in sorted(rates, key=lambda x: (-x[1][2], x[0]))
    ]


def phase_stats(rows: Sequence[HistoryRow]) -> list[tuple[str, float, float, float, int]]:
    """(phase, median, 90th percentile, total seconds, iterations) per phase."""
    samples: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        for phase, value in row.durations.items():
            samples[phase].append(value)
    out: list[tuple[str, float, float, float, int]] = []
    for phase in ordered_phases(samples):
        values = sorted(samples[phase])
        out.append(
            (phase, _quantile(values, 0.5), _quantile(values, 0.9), sum(values), len(values))
        )
    return out


def _quantile(sorted_values: Sequence[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    index = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[index]
