"""Gaps: what is missing or broken in the project, ranked."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from domain.base import Fact
from domain.diagnostics import Diagnostic
from domain.enums import GapCategory, Priority, Severity


class InboxItem(Fact):
    """A task a person dropped into inbox/."""

    name: str
    """File name inside inbox/ (the item's identity)."""
    title: str
    body: str = ""
    priority: Priority = Priority.NORMAL
    acceptance: tuple[str, ...] = ()
    """Checks as written by the person, e.g. "pytest tests/test_a.py::test_b"."""
    allowed: tuple[str, ...] = ()
    """Paths (globs) the work may change; empty means the planner decides."""
    forbidden: tuple[str, ...] = ()
    """Paths (globs) the work must not change."""
    kind: Literal["", "docs", "feature"] = ""
    """What the person says the task is (front matter `kind`); "" lets its words decide."""
    received_at: datetime
    sha256: str = ""
    attempts: int = 0
    """Failed iterations so far."""


class InboxText(Fact):
    """One inbox file's text for the module that reads tasks, and the bounds it reads within."""

    name: str
    text: str
    """The file, decoded (the kernel has checked its size, name, kind and encoding)."""
    received_at: datetime
    front_matter_max_bytes: int
    list_max: int
    """Entries of acceptance, allowed or forbidden."""
    string_max: int
    """Characters of one such entry."""
    title_max: int
    """Characters of the title (a longer one is cut)."""


class RoadmapItem(Fact):
    """An unchecked `- [ ]` line of ROADMAP.md."""

    text: str
    line: int
    """1-based line number in ROADMAP.md."""
    headings: tuple[str, ...] = ()
    """Section headings above the item, outermost first."""


class Gap(Fact):
    """One thing the daemon could work on."""

    key: str
    """Stable identity used to match history across runs."""
    category: GapCategory
    source: str
    """ruff, ruff-format, pyright, mypy, pytest, inbox or roadmap."""
    severity: Severity
    title: str
    description: str = ""
    files: tuple[str, ...] = ()
    evidence: tuple[Diagnostic, ...] = ()
    inbox: InboxItem | None = None
    roadmap: RoadmapItem | None = None
    rank_reason: str = ""
    """Why the gap sits where it does in the ranking."""


class GapRef(Fact):
    """The identity of a gap, as records carry it."""

    key: str
    category: GapCategory
    source: str
    title: str = ""


class GapReport(Fact):
    """Every gap found in one tree, most critical first."""

    gaps: tuple[Gap, ...] = ()
    tree: str = ""
    errors: tuple[str, ...] = ()
    """Problems the analysis itself met (a tool that could not run)."""
    differences: tuple[str, ...] = ()
    """How seed's test runs differ from the person's own (tests that skip, files shown or
    not): evidence for people, never errors and never gaps."""
    skipped: tuple[str, ...] = Field(default=())
    """Keys of gaps left out of the ranking (quarantined)."""

    @property
    def most_critical(self) -> Gap | None:
        """The first gap of the ranking, if any."""
        return self.gaps[0] if self.gaps else None


def gap_ref(gap: Gap) -> GapRef:
    """The identity part of a gap."""
    return GapRef(key=gap.key, category=gap.category, source=gap.source, title=gap.title)
