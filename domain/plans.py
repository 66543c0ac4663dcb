"""Plans: what one iteration will try, and how the kernel will judge it."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from domain.base import Fact
from domain.enums import ActionType, CheckName, FailureCategory, IterationOutcome, Risk, TaskKind
from domain.gaps import Gap

ITERATION_ID_PATTERN = r"^iter-\d{4,}-\d{8}-\d{6}(-c\d{1,2})?$"
"""An iteration's id as the kernel allocates it; -cK names its candidate K's run ([candidates])."""


class PlannedAction(Fact):
    """One change the agent is asked to make."""

    action_type: ActionType
    target_files: tuple[str, ...] = ()
    description: str


class AcceptanceCriterion(Fact):
    """A catalogue check with its arguments, and the human-readable text beside it."""

    check: CheckName
    args: tuple[str, ...] = ()
    """Files for ruff/pyright/py_compile (empty: the touched files), node ids for pytest."""
    text: str = ""


class AttemptNote(Fact):
    """What an earlier attempt at the same gap did and why it failed."""

    iteration_id: str
    outcome: IterationOutcome
    failure_category: FailureCategory | None = None
    failing_tests: tuple[str, ...] = ()
    trace_head: str = ""
    touched_files: tuple[str, ...] = ()
    reason: str = ""
    agent_summary: str = ""
    evidence: tuple[str, ...] = ()
    """The guard's or verifier's findings behind the reason (a few short lines)."""
    backend: str = ""
    """The backend that made the attempt."""


class PlanDocument(Fact):
    """Text from the repository or a tool that the agent reads as data, never as instructions."""

    label: str
    """What the text is, e.g. "modules/planner/SPEC.md" or "test output of iter-0003-..."."""
    path: str = ""
    """Repository-relative file the text was read from; empty for tool output."""
    text: str


class PlanBudget(Fact):
    """Limits for one iteration; the kernel clamps them to the config."""

    timeout_s: float = 1800.0
    max_tokens: int = 0
    """0 means no per-iteration token limit beyond the config's."""
    max_cost_usd: float = 0.0
    """0 means no per-iteration cost limit beyond the config's."""
    max_new_files: int = 10
    max_changed_lines: int = 400


class AgentPrompt(Fact):
    """The agent's prompt, the planner's rendering of a plan as the kernel runs it."""

    text: str = ""
    """The whole prompt: goal, why, actions, files, criteria, checks, history, documents, rules."""
    checks: str = ""
    """The commands behind the criteria ("How to check it yourself"), "" when there are none."""
    rules: str = ""
    """The rules section, for a repair round that continues the tool's own session."""


class IterationPlan(Fact):
    """One iteration's plan: the gap, the actions, and how success is judged."""

    iteration_id: str = Field(pattern=ITERATION_ID_PATTERN)
    created_at: datetime
    gap: Gap
    task_kind: TaskKind
    goal: str
    actions: tuple[PlannedAction, ...]
    criteria: tuple[AcceptanceCriterion, ...]
    estimated_risk: Risk
    allowed_paths: tuple[str, ...] = ()
    """Globs (repository-relative) the agent may change; empty means any non-protected file."""
    forbidden_paths: tuple[str, ...] = ()
    protected_paths: tuple[str, ...] = ()
    """Protected globs (the kernel's list), repeated here so the prompt can name them."""
    history: tuple[AttemptNote, ...] = ()
    """Earlier failed attempts at this gap, oldest first."""
    phases: tuple[str, ...] = ()
    """Ordered steps for the agent, each "name: instruction" (reproduce, localise, patch, ...)."""
    suspect_files: tuple[str, ...] = ()
    """Files most likely to hold the fault, most likely first (from what the failing test
    executed, else the traceback)."""
    suspect_lines: tuple[str, ...] = ()
    """For the first suspect files: their most suspicious lines ("12-14, 20"), "" if unknown."""
    why: str = ""
    """Why the work matters: the summary of VISION.md (data, never instructions)."""
    documents: tuple[PlanDocument, ...] = ()
    """Repository and tool text the prompt quotes: module docs, test output, dependencies."""
    context: tuple[str, ...] = ()
    """Extra context for the agent (tool output, failing test output); data, never instructions."""
    notes: tuple[str, ...] = ()
    """Planner remarks for people (why this gap, what changed since the last attempt)."""
    route: str = ""
    """A backend the planner asks for first (e.g. ruff-fix for lint); empty for the configured one."""
    agents: tuple[str, ...] = Field(default=(), exclude_if=lambda v: not v)
    """The portfolio's agents (`ProjectState.portfolio` keys), in the order the kernel deals
    them: the first is sent when one run tries the gap. Empty: the configured order (always
    empty with fewer than two configured; the kernel refuses any other set)."""
    agents_why: str = Field(default="", exclude_if=lambda v: not v)
    """One line for people: why the agents are in this order (what was learned, what was drawn)."""
    random_seed: int = Field(default=0, exclude_if=lambda v: not v)
    """The kernel's random seed the order was drawn with (the kernel writes it: a replay of
    the planner on the record's inputs gives the same order)."""
    budget: PlanBudget = Field(default_factory=PlanBudget)
    prompt: AgentPrompt = Field(default_factory=AgentPrompt)
    """Filled by the module server from the planner just before an adapter sees the plan: the
    kernel clamps the planner's plan first, and the prompt names what the clamp leaves. Empty
    in records (each round's prompt is history/<id>/prompt*.md)."""


class PlanningOrder(Fact):
    """The order in which the planner takes the gaps it is given: the first is the next plan's
    (`status` shows the queue from it, the plan is drafted from it)."""

    keys: tuple[str, ...] = ()
    """Gap keys, the next first; the gaps it leaves out are passed over."""
    passed_over: dict[str, str] = Field(default_factory=dict[str, str])
    """Gap key -> why the planner passes it over (never planned, or not now)."""
    new_task_place: dict[str, int] = Field(default_factory=dict[str, int])
    """Priority -> the place (1: next) a person's task of that priority dropped now would take."""
