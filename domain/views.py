"""What the text views and the metrics exporter render: `history`'s list, the metrics snapshot."""

from __future__ import annotations

from pydantic import Field

from domain.base import Fact


class HistoryLine(Fact):
    """One iteration as `history` lists it (a row of the record index)."""

    iteration_id: str
    started: str
    """ISO time, as the record has it."""
    outcome: str
    category: str = ""
    cost: float = 0.0
    gap_source: str = ""
    gap_title: str = ""
    gap_key: str = ""
    ran_agent: bool = False
    """An agent ran in it (IterationRecord.ran_agent)."""


class HistoryListing(Fact):
    """What `history` prints: the rows shown, newest first, and how many matched."""

    rows: tuple[HistoryLine, ...] = ()
    total: int = 0
    """Iterations that matched the filter (more than the rows when --limit cut them)."""
    filtered: bool = False
    """An outcome or source filter was given."""


class PhaseTotal(Fact):
    """Seconds spent in one phase over every iteration, and how many iterations ran it."""

    seconds: float = 0.0
    count: int = 0


class MetricsSnapshot(Fact):
    """Everything the Prometheus metrics report, read by the daemon's main thread."""

    by_outcome: dict[str, int] = Field(default_factory=dict[str, int])
    cost_usd: float = 0.0
    tokens: int = 0
    cost_today_usd: float = 0.0
    budget_left_today_usd: float = 0.0
    open_gaps: dict[str, int] = Field(default_factory=dict[str, int])
    phases: dict[str, PhaseTotal] = Field(default_factory=dict[str, PhaseTotal])
    halted: bool = False
    phase: str = ""
    """The phase the daemon is in."""
    candidates_by_outcome: dict[str, int] = Field(default_factory=dict[str, int])
    """Candidates ([candidates] n > 1) by how each ended (SUCCESS: it passed; one per iteration landed)."""
    stuck: int = 0
    """Iterations whose run was ended as STUCK (their outcome is FAILURE: counted apart here)."""
    limited_until: float = 0.0
    """When the usage limit in force resets, in epoch seconds (0: none holds)."""
