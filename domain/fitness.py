"""How well a generation of the planning modules plans: cases whose answer is known, each
case's score, and the figures over a corpus (computed by the kernel, never by a module)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from domain.base import Fact
from domain.gaps import GapReport
from domain.inputs import AnalysisInput


class FitnessCase(Fact):
    """One planning problem whose answer is known: what the planner saw, and what landed."""

    id: str
    part: str = "history"
    """Where the case comes from: "history" (this project's records), "shipped" (the corpus
    in the kernel), "held-back" (the kernel's state folder; no sandbox shows it)."""
    base: str = ""
    """The commit whose files the planner reads."""
    analysis: AnalysisInput | None = None
    """The analysers' input as the iteration gave it (the ranking is replayed); None: `report`."""
    report: GapReport = Field(default_factory=GapReport)
    """The ranked gaps the planner got (replayed as they are when `analysis` is None)."""
    gap: str
    """The key of the gap the iteration worked on."""
    fixed: tuple[str, ...] = ()
    """The files the landed change touched (empty: it did not land)."""
    sequence: int = 1
    now: datetime
    earlier: int = 0
    """How many of the project's records came before it (the planner sees those)."""
    files: dict[str, str] = Field(default_factory=dict[str, str])
    """A corpus case's files: path -> the corpus's key of its text (no base commit)."""
    kind: Literal["fix", "feature"] = "fix"
    """What the case's landed change was: a fix of failing tests, or a feature asked for in a
    person's words (a corpus scores its features as a part of their own: "shipped-features")."""


class CaseScore(Fact):
    """What one generation's plan for a case was worth."""

    id: str
    part: str = "history"
    valid: bool = False
    """A plan came back and passed the kernel's checks."""
    error: str = ""
    """Why not, when it did not."""
    chosen: bool = False
    """The plan worked on the case's gap."""
    recall: bool | None = None
    """Every file the landed fix touched is allowed (None: nothing landed for the case)."""
    rank: int | None = None
    """1-based place of the first fixed source file among the suspects (0: not among them;
    None: no fixed source file)."""
    allowed: int = 0
    """Files of the case's tree the plan allows."""
    precision: float | None = None
    """Fixed files / files allowed when every fixed file was allowed, else 0 (None: nothing
    landed)."""
    prompt_chars: int = 0


class FitnessFigures(Fact):
    """A corpus's figures: each a fraction or a mean over the cases it applies to."""

    cases: int = 0
    landed: int = 0
    """Cases with a landed fix (recall and precision are over these)."""
    ranked: int = 0
    """Landed cases whose fix changed a source file (top-1 and top-3 are over these)."""
    valid: float = 0.0
    chosen: float = 0.0
    recall: float = 0.0
    top1: float = 0.0
    top3: float = 0.0
    precision: float = 0.0
    prompt_chars: float = 0.0


class Fitness(Fact):
    """One generation's fitness: the figures over every case, by part, and each case's score."""

    modules: str = ""
    """What was replayed (a tree id, or "working" for the modules seed runs)."""
    figures: FitnessFigures = Field(default_factory=FitnessFigures)
    parts: dict[str, FitnessFigures] = Field(default_factory=dict[str, FitnessFigures])
    scores: tuple[CaseScore, ...] = ()


class Generation(Fact):
    """A change to the planning modules, scored on its own modules and on its base's."""

    number: int = 0
    """The generation's number once it landed (refs/seed/generation/N); 0 until then."""
    before: Fitness = Field(default_factory=Fitness)
    """The base's modules over the corpus (figures only: no case scores kept)."""
    after: Fitness = Field(default_factory=Fitness)
    """The candidate's modules over the same corpus."""
    fell: tuple[str, ...] = ()
    """Each figure that fell beyond the margin, named (the change is refused for these)."""
