"""What the kernel hands the analysers and the agent adapters."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import Field

from domain.base import Fact
from domain.diagnostics import Measurements
from domain.gaps import InboxItem


class AnalysisInput(Fact):
    """Everything the analysers judge: the kernel's measurements and the people's tasks."""

    measurements: Measurements
    inbox: tuple[InboxItem, ...] = ()
    roadmap: str = ""
    """ROADMAP.md of the baseline tree ("" when there is none)."""
    now: datetime
    quarantined: tuple[str, ...] = ()
    """Gap keys to leave out of the ranking (listed in GapReport.skipped)."""
    order: tuple[str, ...] = ()
    """Ranking order of gap sources, most urgent first; empty for the analysers' default."""


class AgentContext(Fact):
    """What an adapter may know when it turns a plan into a run spec."""

    worktree: str
    seed_home: str
    """Directory holding seed.py (programs that ship with the modules live under it)."""
    python: str
    """The daemon's interpreter."""
    ruff: str
    """The ruff executable the kernel measures with (the project's pinned version when seed's
    tool cache has it)."""
    ruff_format: bool = False
    """Whether the project adopted ruff format (a project formatted with black is not)."""
    command: tuple[str, ...] = ()
    """argv of backend = "command"."""
    model: str = ""
    options: dict[str, Any] = Field(default_factory=dict[str, Any])
    """Backend-specific settings from seed.toml."""
    round: int = 1
    """1 for the first run; 2 and on for repair rounds after the kernel refused the change."""
    resume: str = ""
    """A repair round: the session id the tool reported in the previous round ("" if none)."""
    feedback: str = ""
    """A repair round: why the kernel refused the last change (its evidence), for the prompt."""
    home: str = ""
    """The HOME the tool runs with when seed's sandbox is off (the person's, resolved)."""
