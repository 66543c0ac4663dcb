"""Small formatting rules shared by report.md, the index and the dashboard."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Protocol

from domain import GapCategory, IterationOutcome

_TAG = re.compile(r"<(?=[A-Za-z/!?])")

PHASES: tuple[str, ...] = ("analyse", "plan", "execute", "inspect", "verify", "land")
"""Phases in the order an iteration goes through them."""

OUTCOMES: tuple[IterationOutcome, ...] = (
    IterationOutcome.SUCCESS,
    IterationOutcome.ROLLBACK,
    IterationOutcome.FAILURE,
    IterationOutcome.NO_CHANGE,
    IterationOutcome.MERGE_BLOCKED,
    IterationOutcome.KEPT,
    IterationOutcome.PROPOSED,
    IterationOutcome.LIMITED,
    IterationOutcome.WAITING,
    IterationOutcome.ABORTED,
)

OUTCOME_COLORS: dict[str, str] = {
    "SUCCESS": "#2e9d4f",
    "ROLLBACK": "#d9822b",
    "FAILURE": "#d64541",
    "NO_CHANGE": "#8c8c8c",
    "MERGE_BLOCKED": "#8e5bc2",
    "KEPT": "#b07cc6",
    "PROPOSED": "#3aa5a0",
    "LIMITED": "#c9a227",
    "WAITING": "#4a90d9",
    "ABORTED": "#5c5c5c",
}

PHASE_COLORS: dict[str, str] = {
    "analyse": "#4a90d9",
    "plan": "#8e5bc2",
    "execute": "#d9822b",
    "inspect": "#8c8c8c",
    "verify": "#2e9d4f",
    "land": "#1f6f8b",
}

NON_QUALITY_SOURCES = frozenset(c.value for c in GapCategory if c != GapCategory.QUALITY)
"""Inbox and roadmap gaps carry their category as their source; every other source is a tool."""


class Ran(Protocol):
    """An iteration as a count reads it: whether an agent ran in it, and how it ended."""

    @property
    def ran_agent(self) -> bool: ...
    @property
    def outcome(self) -> str: ...


def success_rate(landed: int, runs: int) -> tuple[float | None, int, int]:
    """(rate or None, landed, runs) over the iterations that ran an agent (the record's
    ran_agent, counted by the kernel's index): the one success rate every view shows."""
    return (landed / runs if runs else None), landed, runs


def rate_of(rows: Iterable[Ran]) -> tuple[float | None, int, int]:
    """success_rate over some rows (a page of history, one gap source)."""
    ran = [r for r in rows if r.ran_agent]
    return success_rate(sum(1 for r in ran if r.outcome == IterationOutcome.SUCCESS), len(ran))


def percent(rate: float | None) -> str:
    """A rate as a whole percentage ("-" when there is none)."""
    return "-" if rate is None else f"{rate * 100:.0f}%"


def money(usd: float) -> str:
    """Dollars: four decimals under a dollar (agent runs are often cents), two otherwise."""
    return f"${usd:,.4f}" if 0 < abs(usd) < 1 else f"${usd:,.2f}"


def money_tick(usd: float) -> str:
    """Dollars on a chart axis: as few digits as tell the ticks apart ($0, $0.05, $25)."""
    if usd == 0:
        return "$0"
    if abs(usd) >= 10:
        return f"${usd:,.0f}"
    return f"${usd:.2f}".rstrip("0").rstrip(".") if abs(usd) >= 0.01 else f"${usd:.4f}"


def seconds(value: float) -> str:
    """A duration people read at a glance: 0.4s, 12.3s, 3m12s, 1h04m."""
    if value < 60:
        return f"{value:.1f}s"
    whole = round(value)
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{(whole % 3600) // 60:02d}m"


def count(value: int) -> str:
    """An integer with thousands separators."""
    return f"{value:,}"


def noun(value: int, one: str, many: str = "") -> str:
    """The noun that agrees with a count: gap for 1, gaps otherwise (many: an irregular plural)."""
    return one if value == 1 else (many or one + "s")


def plural(value: int, one: str, many: str = "") -> str:
    """A count and its noun: 1 open gap, 2 open gaps, 0 open gaps."""
    return f"{value:,} {noun(value, one, many)}"


def category_note(outcome: str, category: str) -> str:
    """A row's failure category, unless it only repeats the outcome (MERGE_BLOCKED)."""
    return "" if category == outcome else category


def tokens(value: int) -> str:
    """Token counts, shortened above ten thousand (12.3k, 4.5M)."""
    if value >= 1_000_000:
        return f"{value / 1_000_000:.1f}M"
    if value >= 10_000:
        return f"{value / 1000:.1f}k"
    return f"{value:,}"


def utc(moment: datetime, with_seconds: bool = False) -> str:
    """A moment in UTC: 2026-11-22 12:30Z."""
    at = moment.astimezone(UTC) if moment.tzinfo else moment
    return at.strftime("%Y-%m-%d %H:%M:%SZ" if with_seconds else "%Y-%m-%d %H:%MZ")


def total_seconds(durations: Mapping[str, float]) -> float:
    """Seconds spent over every phase."""
    return sum(durations.values())


def ordered_phases(names: Iterable[str]) -> list[str]:
    """Known phases in their order, then any others alphabetically."""
    seen = set(names)
    return [p for p in PHASES if p in seen] + sorted(seen - set(PHASES))


def md(text: str) -> str:
    """Text safe inside a Markdown table cell or list item (one line, no stray markup)."""
    flat = " ".join(text.split()).replace("\\", "\\\\").replace("|", "\\|")
    # only what could open an html tag; "a > b" stays readable in a terminal
    return _TAG.sub("&lt;", flat)


def code(text: str) -> str:
    """Inline code that survives backticks inside the text."""
    flat = " ".join(text.split())
    fence = "``" if "`" in flat else "`"
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    return f"{fence}{pad}{flat}{pad}{fence}"


def shorten(text: str, limit: int) -> str:
    """One line, cut at limit characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def cell_code(text: str) -> str:
    """Inline code inside a table cell (GitHub needs pipes escaped even in code there)."""
    return code(text).replace("|", "\\|")
