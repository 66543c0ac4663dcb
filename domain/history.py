"""History as people read it: ranked gaps at planning time, index rows, totals and digests."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from domain.base import Fact
from domain.enums import FailureCategory, GapCategory, IterationOutcome, Severity
from domain.fitness import FitnessFigures
from domain.gaps import GapRef


class RankedGap(GapRef):
    """A gap's place in a ranking: where it stood, why, and why it was passed over (if it was)."""

    rank: int = 0
    """1-based position in the baseline's ranking."""
    severity: Severity = Severity.NORMAL
    rank_reason: str = ""
    skipped: str = ""
    """Why no plan was made for it then ("" when it could be planned): quarantined, waiting."""


class HistoryRow(Fact):
    """One iteration as lists, indexes and charts show it (read from the record index)."""

    iteration_id: str
    started_at: datetime
    ended_at: datetime
    outcome: IterationOutcome
    failure_category: FailureCategory | None = None
    gap_key: str = ""
    gap_source: str = ""
    gap_category: GapCategory = GapCategory.QUALITY
    gap_title: str = ""
    cost_usd: float = 0.0
    tokens_used: int = 0
    backend: str = ""
    events: tuple[EventNote, ...] = ()
    """The latest events, newest first."""
    durations: dict[str, float] = Field(default_factory=dict[str, float])
    """Seconds per phase."""
    open_gaps: dict[str, int] = Field(default_factory=dict[str, int])
    """Open gaps by source at the iteration's baseline (empty when not known)."""
    candidates: tuple[IterationOutcome, ...] = ()
    """Each candidate's outcome when several tried the gap (empty: one run)."""
    ran_agent: bool = False
    """An agent ran in it (IterationRecord.ran_agent): what success rates count."""


class HistoryTotals(Fact):
    """Counts and sums over every recorded iteration."""

    iterations: int = 0
    by_outcome: dict[str, int] = Field(default_factory=dict[str, int])
    agent_runs: int = 0
    """Iterations that ran an agent (IterationRecord.ran_agent)."""
    agent_landed: int = 0
    """Of those, the ones that landed (SUCCESS): the success rate is agent_landed / agent_runs."""
    cost_usd: float = 0.0
    tokens_used: int = 0
    day: str = ""
    """The UTC day (YYYY-MM-DD) "today" refers to."""
    cost_today_usd: float = 0.0
    iterations_today: int = 0
    """Iterations recorded today that count against max_iterations_per_day (WAITING aside)."""
    max_cost_usd_per_day: float = 0.0
    max_iterations_per_day: int = 0


class HaltNote(Fact):
    """The halt state as the index shows it."""

    halted: bool = False
    reason: str = ""
    category: str = ""
    iteration_id: str = ""
    since: datetime | None = None


class DaemonNote(Fact):
    """Whether a daemon runs on the repository, as its lock says (never a default)."""

    known: bool = False
    """False in a digest made without looking (then nothing is claimed about the daemon)."""
    running: bool = False
    pid: int | None = None
    phase: str = ""
    """Its live phase from status.json, while it runs."""
    limited_until: datetime | None = None
    """A usage limit holds until then (history/limit.json): no agent runs until its reset."""
    limited_for: str = ""
    """The backends the limit pauses while the portfolio's others run ('' : every agent)."""


class EventNote(Fact):
    """Something that happened besides iterations (a halt, a resume, a recovery, an error)."""

    at: datetime
    kind: str
    message: str


class GenerationNote(Fact):
    """A landed generation of the planning modules and its fitness (history/generations.jsonl)."""

    number: int
    iteration_id: str = ""
    commit: str = ""
    before: dict[str, FitnessFigures] = Field(default_factory=dict[str, FitnessFigures])
    """Its base's figures, by part of the corpus."""
    after: dict[str, FitnessFigures] = Field(default_factory=dict[str, FitnessFigures])
    """Its own figures, by part of the corpus."""


class HistoryDigest(Fact):
    """What the history index and the dashboard render: rows (newest first) and the facts around them."""

    generated_at: datetime
    root_name: str = ""
    command: str = "python seed.py"
    """How a person runs seed on this repository, whole (`--root` when it is not seed's own)."""
    rows: tuple[HistoryRow, ...] = ()
    """Newest first; the index gets the latest ones, the dashboard all of them."""
    totals: HistoryTotals = Field(default_factory=HistoryTotals)
    halt: HaltNote = Field(default_factory=HaltNote)
    daemon: DaemonNote = Field(default_factory=DaemonNote)
    quarantined: tuple[str, ...] = ()
    """Gap keys skipped until something relevant changes (as of the latest analysis)."""
    top_gaps: tuple[RankedGap, ...] = ()
    """The head of the latest ranking."""
    backend: str = ""
    events: tuple[EventNote, ...] = ()
    """The latest events, newest first."""
    generations: tuple[GenerationNote, ...] = ()
    """Landed generations of seed's planning modules, oldest first (seed's own repository)."""
