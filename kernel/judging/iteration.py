"""The iteration under way, and the Ending each phase returns when the iteration ends there."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from domain import (
    AgentReport,
    AgentRound,
    Candidate,
    DiffStat,
    FailureCategory,
    IterationOutcome,
    IterationPlan,
    ModelTurn,
)
from domain.fitness import Generation
from kernel import faults
from kernel.host.answers import Backend
from kernel.isolation import procs, watch
from kernel.isolation.watch import Watch
from kernel.judging.verify import Verification
from kernel.records.journal import Journal

Phase = Callable[[str, str], None]
"""Called with (phase, detail) as the iteration moves on (status shows it live)."""


def noop_phase(phase: str, detail: str) -> None:
    """A Phase that reports nowhere."""
    return None


def mono() -> float:
    """Monotonic seconds."""
    return time.monotonic()


@dataclass(frozen=True)
class Ending:
    """How an iteration ended, with its evidence: what its record is made from."""

    outcome: IterationOutcome
    category: FailureCategory | None
    reason: str
    evidence: Sequence[str] = ()
    verification: Verification | None = None
    commit: str | None = None
    kept: str | None = None
    waited_on: str = ""
    """WAITING: what the plan waits on (`loop.waited_on`)."""
    blocked: tuple[str, ...] = ()
    """What in the person's checkout kept the work from landing (`blockers.py`)."""
    pull_request: str | None = None
    """PROPOSED in "pr" mode: the pull request's html_url."""


@dataclass
class Iteration:
    """State of the iteration under way, so it can be recorded however it ends."""

    plan: IterationPlan
    base: str
    started: datetime
    backend: Backend
    worktree: Path
    durations: dict[str, float] = field(default_factory=dict[str, float])
    agent: AgentReport | None = None
    agent_version: str = ""
    agent_note: str = ""
    cost_basis: str = ""
    """reported, prices or none: where the run's cost comes from."""
    exit_code: int | None = None
    touched: list[str] = field(default_factory=list[str])
    agent_tree: str = ""
    """The tree the agent's latest round left, as the kernel read it, before its repairs."""
    rounds: list[AgentRound] = field(default_factory=list[AgentRound])
    """Judged turns of the agent before the last one (repair rounds)."""
    untested_why: str = ""
    """Why work with lines no test ran went to a person after the agent was asked for a test."""
    session: str = ""
    """The agent tool's session id from its latest run (a repair round continues it)."""
    resumed: bool = False
    """The latest run continued the tool's earlier session."""
    round_start: tuple[int, float] = (0, 0.0)
    """Tokens and cost spent before the latest round began."""
    repairs: list[str] = field(default_factory=list[str])
    """What the kernel's fixers changed in the candidate before judging it."""
    repaired: dict[str, bytes] = field(default_factory=dict[str, bytes])
    """The repaired files' bytes (written back into the worktree before a repair round)."""
    diff: DiffStat = field(default_factory=DiffStat)
    branch: str = ""
    claimed_inbox: str = ""
    checkout_changes: list[str] = field(default_factory=list[str])
    """Changes a person (or the agent) made in the user's checkout while the agent ran."""
    integrity_evidence: list[str] = field(default_factory=list[str])
    """What the checkout's integrity check refused (protected files, HEAD, refs, config, hooks)."""
    recorded: bool = False
    """The record is written (so an error after it does not write a second one)."""
    journal: Journal | None = None
    """running.json, so a restarted daemon knows how far this iteration got."""
    sandboxed: bool = False
    """The agent and the test runs ran in the sandbox (False only with sandbox = "off")."""
    network: str = ""
    """The agent's network as said: model-only, or full and why."""
    wire_tokens: int = 0
    wire_cost_usd: float = 0.0
    wire_requests: int = 0
    """What the model gateway read from the upstream's answers, all rounds (model-only)."""
    model_cut: str = ""
    """Why the gateway refused a request or cut an answer (a cap): the run ends BUDGET_EXCEEDED."""
    model_limit: str = ""
    """The bound of the daemon's the run passed through the gateway: it ends RUN_LIMIT."""
    model_turns: list[ModelTurn] = field(default_factory=list[ModelTurn])
    """The gateway's requests, all rounds (the first MODEL_TURNS_KEPT)."""
    watch: Watch | None = None
    """Git settings and interpreter start-up files as they were when the iteration began."""
    candidate: int = 0
    """This run's number among its iteration's candidates (0: the iteration's one run)."""
    host: str = ""
    """Where the agent ran when not here (a Ray worker's host and node)."""
    candidates: list[Candidate] = field(default_factory=list[Candidate])
    """The candidates that tried the gap side by side ([candidates] n > 1), as judged."""
    choice: str = ""
    """Why the winner among them won (judging/choice.py)."""
    generation: Generation | None = None
    """A change to seed's planning modules: its fitness and its base's (`loop/generations.py`)."""
    agent_key: str = ""
    """The portfolio entry sent on a single run (its key; '' without a portfolio)."""

    def violation(self) -> FailureCategory | None:
        """SANDBOX_VIOLATION when the checkout's integrity check refused something."""
        return FailureCategory.SANDBOX_VIOLATION if self.integrity_evidence else None

    def aborted(self, reason: str) -> Ending:
        """The Ending of an iteration cut short (interrupted, or stopped on an error)."""
        return Ending(
            IterationOutcome.ABORTED, self.violation(), reason, evidence=self.integrity_evidence
        )

    def used(self) -> str:
        """What the agent's runs have used so far, for the progress line ('' before any)."""
        if self.agent is None or not (self.agent.tokens_used or self.agent.cost_usd):
            return ""
        return f"agent used {self.agent.tokens_used:,} tokens, ${self.agent.cost_usd:.4f}"

    def note(self, **values: object) -> None:
        """Journal facts about the iteration (stage, pgid, commit...)."""
        if self.journal is not None:
            self.journal.update(**values)

    def agent_started(self, pgid: int) -> None:
        """Journal the agent's process group as it starts (a restarted daemon ends it)."""
        self.note(stage="agent", pgid=pgid, start_time=procs.process_start_time(pgid))
        faults.fault("agent-run")

    def watched(self, root: Path, python: str) -> list[str]:
        """SANDBOX_VIOLATION evidence from the watch since the iteration began; an interpreter
        change the sandbox rules out for the agent is listed as the person's instead."""
        if self.watch is None:
            return []
        settings, files = watch.compare(self.watch, root, python)
        if self.sandboxed:
            self.checkout_changes += [
                f"interpreter: {f} (by a person: the sandbox keeps it read-only)" for f in files
            ]
            return settings
        return [*settings, *(f"interpreter start-up file {f}" for f in files)]

    def timed(self, name: str, started: float) -> None:
        """Add the time since started to one phase's duration."""
        self.durations[name] = round(self.durations.get(name, 0.0) + (mono() - started), 3)
