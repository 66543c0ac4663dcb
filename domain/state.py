"""The project state handed to the planner, and the planner's memory input."""

from __future__ import annotations

from datetime import datetime

from domain.base import Fact


class OutcomeTally(Fact):
    """Iterations of one task kind that ended on one day, by success."""

    task_kind: str
    fingerprint: str
    day: str
    """ISO date (YYYY-MM-DD)."""
    successes: int = 0
    failures: int = 0


class AgentTally(Fact):
    """A portfolio agent's verified outcomes on one kind of task on one day (the kernel's
    summary of every record, so the planner learns from more than the records it is sent)."""

    key: str
    task_kind: str
    day: str
    """ISO date (YYYY-MM-DD) the runs ended."""
    tried: int = 0
    landed: int = 0
    cost_usd: float = 0.0
    """The runs' cost, summed."""
    seconds: float = 0.0
    """The runs' time, summed."""


class PortfolioAgent(Fact):
    """One entry of the configured portfolio ([[candidates.agent]]) the planner may order."""

    key: str
    """Its stable name: backend:model (backend alone without a model), #N on a clash."""
    backend: str
    model: str = ""


class ProjectState(Fact):
    """What the planner may know about the project besides its gaps."""

    now: datetime
    next_sequence: int
    """Sequence number the kernel allocated for the next iteration id."""
    root_name: str = ""
    worktree: str = ""
    """Absolute path of the baseline worktree the planner may read (read only)."""
    branch: str | None = None
    head: str | None = None
    can_land: bool = True
    land_blocker: str = ""
    backend: str = "none"
    backend_reason: str = ""
    backend_sources: tuple[str, ...] = ()
    """Gap sources the backend can take; ("*",) for any."""
    halted: bool = False
    halt_reason: str = ""
    quarantined: tuple[str, ...] = ()
    """Gap keys that are skipped until something relevant changes."""
    fingerprint: str = ""
    """Repository fingerprint for memory."""
    tallies: tuple[OutcomeTally, ...] = ()
    protected: tuple[str, ...] = ()
    """Protected globs the plan must never touch."""
    pyright_strict: tuple[str, ...] = ()
    selfhost: bool = False
    """The target is seed's own repository (plans touching modules/ need the self-check)."""
    portfolio: tuple[PortfolioAgent, ...] = ()
    """The agents that may be sent, when two or more are configured (else empty): the planner
    orders them (`IterationPlan.agents`); the kernel sends only these."""
    agent_tallies: tuple[AgentTally, ...] = ()
    """Every verified outcome of the portfolio's agents, by agent, kind and day (with a
    portfolio; else empty)."""
    random_seed: int = 0
    """A random number the kernel drew for this plan (with a portfolio; else 0): the planner's
    only randomness, kept in the plan, so the plan is a function of its inputs."""
