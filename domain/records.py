"""Records: what an iteration planned, did and proved."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import Field

from domain.base import Fact
from domain.diagnostics import Diagnostic
from domain.enums import CheckName, FailureCategory, IterationOutcome
from domain.fitness import Generation
from domain.gaps import GapRef
from domain.history import RankedGap
from domain.plans import IterationPlan

CHECKOUT_PATTERN = r"^(wt-[0-9]+-[0-9]+(-c[0-9]+)?)?$"
"""An agent checkout's name as the loop makes it (one folder name: never a path; -cK for a
candidate's)."""


class CriterionVerdict(Fact):
    """The kernel's verdict on one acceptance criterion."""

    check: CheckName
    args: tuple[str, ...] = ()
    text: str = ""
    passed: bool
    evidence: str = ""


class DiffStat(Fact):
    """Size of a change."""

    files: int = 0
    insertions: int = 0
    deletions: int = 0
    new_files: int = 0


class AgentRound(Fact):
    """One turn of the agent within an iteration, and how the kernel judged it."""

    number: int
    outcome: IterationOutcome
    failure_category: FailureCategory | None = None
    reason: str = ""
    resumed: bool = False
    """The tool continued its own session (it kept its context) rather than starting afresh."""
    tokens_used: int = 0
    cost_usd: float = 0.0
    tree: str = ""
    """The tree the agent left, before the kernel's repairs: what a replay of it must give."""


class ModelTurn(Fact):
    """One request the model gateway served (model-only), as the report's per-turn table shows it."""

    round: int = 1
    seq: int
    """The run's request number, from 1."""
    status: str
    """answered, refused (the cap was reached), cut (its answer passed the cap) or failed (the
    upstream answered an error or broke off)."""
    input: int = 0
    """Input tokens (cached ones included)."""
    output: int = 0
    cached: int = 0
    cost_usd: float = 0.0
    seconds: float = 0.0


class Candidate(Fact):
    """One of several agent runs that tried the same gap, and the facts the kernel chose by."""

    number: int
    """1..n, in the order the runs were dealt (the last tie-break)."""
    backend: str
    model: str = ""
    outcome: IterationOutcome
    """SUCCESS when it passed everything a change must pass (eligible), else how it ended."""
    failure_category: FailureCategory | None = None
    reason: str = ""
    eligible: bool = False
    won: bool = False
    needs_person: bool = False
    """It edits base tests or has lines no passing test ran: it would wait for a person."""
    outside_suspects: int = 0
    """Changed lines in files the plan did not name as suspects (a binary file by its bytes)."""
    binary_bytes: int = Field(default=0, exclude_if=lambda v: not v)
    """Bytes of the binary files it changed, old and new: git counts them no lines, so the
    size the choice ranks by adds them (`kernel/judging/choice.py`)."""
    uncovered: int = 0
    """Changed places no passing test ran."""
    rounds: int = 1
    """Agent runs it took (1 + its repair rounds)."""
    diff: DiffStat = Field(default_factory=DiffStat)
    tokens_used: int = 0
    cost_usd: float = 0.0
    seconds: float = 0.0
    host: str = ""
    """Where its agent ran (this machine's name for a local run)."""
    usage_from: str = ""
    """Who counted its usage: the gateway, the tool's own report, or the worker (remote)."""
    folder: str = ""
    """Its files (agent log, prompt, model exchanges): history/<folder>/."""
    branch: str = ""
    """The branch its work was kept on ([candidates] keep = true), else ''."""
    agent_key: str = Field(default="", exclude_if=lambda v: not v)
    """The portfolio entry it was dealt (`ProjectState.portfolio` key; '' without one)."""


class IterationRecord(Fact):
    """The outcome of one iteration, as the kernel saw it."""

    iteration_id: str
    started_at: datetime
    ended_at: datetime
    gap: GapRef
    outcome: IterationOutcome
    failure_category: FailureCategory | None = None
    reason: str = ""
    """One line saying why the iteration ended this way."""
    evidence: tuple[str, ...] = ()
    """Short facts behind the outcome: node ids, new diagnostics, guard findings."""
    failures: tuple[Diagnostic, ...] = ()
    """New diagnostics the change introduced."""
    verdicts: tuple[CriterionVerdict, ...] = ()
    touched_files: tuple[str, ...] = ()
    repairs: tuple[str, ...] = ()
    """What the kernel's own fixers (ruff's safe fixes, ruff format) changed before judging."""
    rounds: tuple[AgentRound, ...] = ()
    """The agent's turns when a refused change got repair rounds (the outcome is the last's)."""
    diff: DiffStat = Field(default_factory=DiffStat)
    base: str = ""
    """The commit the iteration started from."""
    commit: str | None = None
    kept_branch: str | None = None
    pull_request: str | None = None
    """PROPOSED in `[landing] mode = "pr"`: the pull request's web address (its html_url)."""
    blocked_by: tuple[str, ...] = ()
    """What in the person's checkout kept the work from landing, as the kernel read it from
    git: the checkout's state (HEAD detached, a merge in progress) or the paths with uncommitted
    or untracked changes. The gap waits, with no agent run, while the same facts hold."""
    changed_tests: tuple[str, ...] = ()
    """KEPT: the base's tests the change edits that no longer pass against the base's own test
    files (what a person approves)."""
    uncovered: tuple[str, ...] = ()
    """Changed places of a verified change that no passing test ran (`path:line`)."""
    backend: str = ""
    waited_on: str = ""
    """WAITING: what the gap waited on (the backend, the sandbox, the api_base, as seed.toml and
    the machine gave them); when that changes, the gap is judged again."""
    sandboxed: bool | None = None
    """Whether the agent and the test runs ran in the sandbox (None: no agent ran)."""
    network: str = ""
    """The agent's network: model-only (the kernel's gateway only), or full and why."""
    wire_tokens: int = 0
    wire_cost_usd: float = 0.0
    wire_requests: int = 0
    """Usage the model gateway read from the upstream's answers (model-only), beside what the
    agent reported (tokens_used, cost_usd)."""
    model_turns: tuple[ModelTurn, ...] = ()
    """The gateway's requests, in order (the first MODEL_TURNS_KEPT of the iteration)."""
    agent_version: str = ""
    agent_summary: str = ""
    agent_exit_code: int | None = None
    tokens_used: int = 0
    cost_usd: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_basis: str = ""
    """Where cost_usd comes from: reported (by the tool), prices (seed.toml's table), none."""
    agent_model: str = ""
    agent_turns: int = 0
    agent_tree: str = ""
    """The tree the agent's last round left, before the kernel's repairs (`seed.py replay`)."""
    checkout: str = Field(default="", pattern=CHECKOUT_PATTERN)
    """The name of the agent's checkout (wt-PID-TIME): a replay runs in one of the same path,
    as the agent's requests may carry it ('' in a record from before it was kept)."""
    agent_note: str = ""
    """What the record should know about the backend (e.g. aider exits 0 on API errors)."""
    durations: dict[str, float] = Field(default_factory=dict[str, float])
    """Seconds per phase: analyse, plan, execute, inspect, verify, land."""
    checkout_changes: tuple[str, ...] = ()
    """Files the person changed in their checkout while the agent ran."""
    differences: tuple[str, ...] = ()
    """What seed's runs of the base measured otherwise than the project's own would (the
    analysis's GapReport.differences): tests that skip, a selection, a plain run's outcomes."""
    task_kind: str = ""
    gap_signature: str = ""
    """The kernel's signature of the planned gap's state (findings, inbox bytes, roadmap text), so
    history can be judged without the plan."""
    plan: IterationPlan | None = None
    ranking: tuple[RankedGap, ...] = ()
    """The head of the baseline's ranking when the gap was chosen (the alternatives, and the
    chosen gap wherever it stood)."""
    open_gaps: dict[str, int] = Field(default_factory=dict[str, int])
    """Open gaps at the baseline, by source (ruff, pytest, inbox, roadmap, ...)."""
    candidates: tuple[Candidate, ...] = ()
    generation: Generation | None = None
    """A change to seed's planning modules: its fitness, its base's, the figures that fell,
    and its number once it landed."""
    """The agent runs that tried this gap side by side ([candidates] n > 1), the winner marked."""
    choice: str = ""
    """Why the winner won, by the kernel's order of facts (judging/choice.py)."""
    agent_key: str = Field(default="", exclude_if=lambda v: not v)
    """The portfolio entry the kernel sent on a single run (its key; '' without a portfolio
    of two or more, or when a tournament's candidates say theirs)."""

    @property
    def ran_agent(self) -> bool:
        """Whether an agent ran in this iteration (its process ended, it was timed, or candidates
        ran): the one definition every count of agent runs uses (a landing of kept work, a
        plan that waited, a run the daemon was killed in are none)."""
        return (
            self.agent_exit_code is not None or "execute" in self.durations or bool(self.candidates)
        )


class Event(Fact):
    """Something that is not an iteration: a halt, a resume, a module fallback, a repair."""

    at: datetime
    kind: str
    message: str
    data: dict[str, Any] = Field(default_factory=dict[str, Any])
