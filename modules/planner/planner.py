"""The planner: GapReport + history + state -> one IterationPlan (see SPEC.md)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from domain import (
    AgentPrompt,
    CheckName,
    Gap,
    GapCategory,
    GapReport,
    IterationPlan,
    IterationRecord,
    PlanBudget,
    PlannedAction,
    PlanningOrder,
    Priority,
    ProjectState,
    Risk,
    TaskKind,
)
from kernel.contracts import protected_patterns
from modules.planner import memory, portfolio
from modules.planner.actions import draft_actions, targets, task_kind
from modules.planner.allowlist import (
    clean_path,
    derive,
    docs_globs,
    is_doc_path,
    is_protected,
    is_test_path,
    unique,
    verification_files,
)
from modules.planner.criteria import base_criteria, criterion, merge, parse_acceptance
from modules.planner.documents import module_docs, vision_summary
from modules.planner.feedback import chronological, notes
from modules.planner.fsport import FileSystemPort, worktree_fs
from modules.planner.goal import goal_of
from modules.planner.localise import Located, locate
from modules.planner.phases import failing_test_phases, isolation_phases, rank_suspects
from modules.planner.prompt import agent_prompt
from modules.planner.revision import Revision, revise
from modules.planner.risk import assess as assess_risk
from modules.planner.selection import Assessment, Queue, memory_group, planning_queue

MAX_SKIP_NOTES = 10
WITH_DOCS = (TaskKind.FEATURE, TaskKind.FIX_TEST, TaskKind.REFACTOR)
"""Kinds whose plans allow the documentation that goes with their code (issue 40)."""
SELFCHECK_ROOTS = ("modules", "domain")


def iteration_id(state: ProjectState) -> str:
    """iter-NNNN-YYYYMMDD-HHMMSS from the kernel's sequence number and time."""
    return f"iter-{state.next_sequence:04d}-{state.now:%Y%m%d-%H%M%S}"


@dataclass(frozen=True)
class Refusal:
    """Why a gap cannot be planned."""

    reason: str


def _allowlist(
    a: Assessment,
    kind: TaskKind,
    actions: Sequence[PlannedAction],
    ranked: Sequence[str],
    revision: Revision,
    fs: FileSystemPort,
    protected: Sequence[str],
    named: Sequence[str] = (),
) -> tuple[str, ...] | Refusal:
    gap = a.gap
    if gap.inbox is not None and gap.inbox.allowed:
        cleaned = unique(c for p in gap.inbox.allowed if (c := clean_path(p)) is not None)
        kept = tuple(p for p in cleaned if not is_protected(p, protected))
        if not kept:
            return Refusal(
                "every path in its `allowed` list is protected or outside the repository"
            )
        return kept
    core = tuple(ranked) if ranked else unique((*targets(actions), *named))
    if not core or (ranked and all(is_test_path(f) for f in ranked)):
        return ()  # nothing says where the fault is: any non-protected file
    if kind == TaskKind.FEATURE and not ranked and all(is_doc_path(f, fs) for f in core):
        return ()  # the words name only docs (a changelog): nothing says where the code is
    widen = unique(
        c for p in revision.widen if (c := clean_path(p)) and not is_protected(c, protected)
    )
    if revision.narrow or revision.isolate:
        return unique((*derive(core, fs, protected, wide=False), *widen))
    allowed = derive(core, fs, protected, wide=kind != TaskKind.FIX_LINT)
    folders = [t for t in core if t.endswith("/") and not t.startswith("modules/")]
    if kind in (TaskKind.FEATURE, TaskKind.REFACTOR) and (folders or named):
        # the work may add its test where the project keeps its tests
        kept = [f"{t}/**" for t in ("tests", "test", "testing") if fs.is_dir(t)]
        allowed = unique((*allowed, *(kept[:1] if folders and not named else kept)))
    if kind == TaskKind.FEATURE and allowed:  # a feature's new test goes where tests live
        allowed = unique((*allowed, *(f"{t}/**" for t in ("tests", "test") if fs.is_dir(t))))
    if kind in WITH_DOCS and allowed:
        allowed = unique((*allowed, *docs_globs(fs, protected)))  # real changes update docs
    return unique((*allowed, *widen))


def _located(
    gap: Gap,
    ranked: Sequence[str],
    actions: Sequence[PlannedAction],
    fs: FileSystemPort,
    protected: Sequence[str],
) -> Located | None:
    """For a person's task in plain words (no `allowed` list, nothing else saying where the
    work is): the tree's files its words name."""
    if gap.category == GapCategory.QUALITY or ranked or (gap.inbox and gap.inbox.allowed):
        return None
    if any(a.target_files for a in actions) and gap.inbox is None:
        return None  # a roadmap line the planner already placed (a module, "passes TOOL")
    return locate(gap, fs, protected)


def _failing(a: Assessment, isolate: bool) -> tuple[str, ...]:
    nodes = tuple(
        d.node_id
        for d in a.gap.evidence
        if d.node_id and "::" in d.node_id and d.rule in ("failed", "error")
    )
    return nodes[:1] if isolate else nodes


def _needs_selfcheck(state: ProjectState, allowed: Sequence[str], planned: Sequence[str]) -> bool:
    if not state.selfhost:
        return False
    if not allowed:
        return True
    return any(
        p.split("/")[0] in SELFCHECK_ROOTS or p.startswith("**") for p in (*allowed, *planned)
    )


def _warn(actions: tuple[PlannedAction, ...], a: Assessment) -> tuple[PlannedAction, ...]:
    warning = (
        f"WARNING: this gap is exhausted ({a.reason}) and so is every other gap; "
        "it is planned anyway at high risk. Take a different approach from the earlier attempts. "
    )
    first = actions[0].model_copy(update={"description": warning + actions[0].description})
    return (first, *actions[1:])


def draft(
    a: Assessment,
    report: GapReport,
    state: ProjectState,
    fs: FileSystemPort,
    *,
    exhausted: bool,
) -> IterationPlan | Refusal:
    """The plan for one gap, or why it cannot be planned."""
    gap = a.gap
    protected = protected_patterns(state.protected)
    kind = task_kind(gap)
    revision = revise(gap, a.track, fs)
    suspected = rank_suspects(gap, fs, protected, state.worktree)
    ranked = suspected.files
    drafted = draft_actions(gap, report, ranked, fs, protected)
    if drafted.all_protected or not drafted.actions:
        return Refusal("every file it names is protected")
    acceptance = gap.inbox.acceptance if gap.inbox is not None else ()
    extra = [c for p in map(parse_acceptance, acceptance) if (c := p.criterion) is not None]
    located = _located(gap, ranked, drafted.actions, fs, protected)
    named = located.files if located is not None else ()
    allowed = _allowlist(a, kind, drafted.actions, ranked, revision, fs, protected, named)
    if isinstance(allowed, Refusal):
        return allowed
    planned = targets(drafted.actions)
    criteria = [
        *base_criteria(gap, kind, _failing(a, revision.isolate), state.pyright_strict),
        *extra,
    ]
    if _needs_selfcheck(state, allowed, planned):
        criteria.append(criterion(CheckName.SELFCHECK))
    rate = memory.rate(state.tallies, kind, state.fingerprint, state.now)
    risk = assess_risk(drafted.actions, allowed, bool(a.track.streak), memory.risk_floor(rate))
    actions = drafted.actions
    if exhausted:
        risk = Risk.HIGH
        actions = _warn(actions, a)
    phases = isolation_phases(gap, ranked) if revision.isolate else failing_test_phases(gap, ranked)
    budget = PlanBudget(max_new_files=5, max_changed_lines=200) if revision.narrow else PlanBudget()
    forbidden = (
        unique(c for p in gap.inbox.forbidden if (c := clean_path(p)) is not None)
        if gap.inbox is not None
        else ()
    )
    if not (gap.inbox is not None and gap.inbox.allowed):
        # a derived allowlist never lets the work change what decides its verification
        words = f"{gap.title}\n{gap.description}"
        own = (*named, *ranked, *planned, *allowed)  # a gap in such a file may change it
        forbidden = unique((*forbidden, *verification_files(own, words)))
    remarks = [gap.rank_reason, memory.describe(kind, rate), revision.note]
    if located is not None:
        remarks.append(located.note())
    if exhausted:
        remarks.append(f"exhausted: {a.reason}; planned because no other gap can be")
    return IterationPlan(
        iteration_id=iteration_id(state),
        created_at=state.now,
        gap=gap,
        task_kind=kind,
        goal=goal_of(gap),
        actions=actions,
        criteria=merge(criteria),
        estimated_risk=risk,
        allowed_paths=allowed,
        forbidden_paths=forbidden,
        protected_paths=protected,
        history=notes(a.track),
        phases=(*phases, *revision.phases),
        suspect_files=tuple(ranked) or tuple(named),
        suspect_lines=suspected.lines,
        why=vision_summary(fs),
        documents=(*module_docs((*planned, *allowed), fs), *revision.documents),
        notes=tuple(r for r in remarks if r),
        route=revision.route,
        budget=budget,
    )


def _first_plan(
    queue: Queue, report: GapReport, state: ProjectState, fs: FileSystemPort
) -> tuple[Assessment, IterationPlan] | None:
    """The first gap of the queue that can be planned, and its plan; the ones it passes over
    for a refused draft go into the queue's passed_over."""
    for candidates, exhausted in ((queue.fresh, False), (queue.tired, True)):
        for a in candidates:
            plan = draft(a, report, state, fs, exhausted=exhausted)
            if not isinstance(plan, Refusal):
                return a, plan
            queue.passed_over[a.gap.key] = plan.reason
    return None


def _passed_notes(queue: Queue, report: GapReport, chosen: Assessment) -> tuple[str, ...]:
    """Why each gap ranked above the chosen one waits, then the other gaps passed over."""
    why = dict(queue.passed_over) | {a.gap.key: a.reason for a in queue.tired}
    above: list[str] = []
    for gap in report.gaps:
        if gap.key == chosen.gap.key:
            break
        reason = why.get(gap.key) or _memory_reason(queue, chosen, gap.key)
        above.append(f"skipped {gap.key}: {reason}")
    shown = {chosen.gap.key, *(g.key for g in report.gaps[: len(above)])}
    rest = [f"skipped {k}: {r}" for k, r in why.items() if k not in shown]
    return tuple([*above, *rest][:MAX_SKIP_NOTES])


def _memory_reason(queue: Queue, chosen: Assessment, key: str) -> str:
    other = next((a for a in queue.fresh if a.gap.key == key), None)
    if other is None:
        return "quarantined"
    return (
        f"memory takes {chosen.gap.key} first within their group: "
        f"{task_kind(chosen.gap).value} succeeded {chosen.success_rate:.0%} here, "
        f"{task_kind(other.gap).value} {other.success_rate:.0%}"
    )


_PRIORITY_RANK = {Priority.CRITICAL: 0, Priority.HIGH: 1, Priority.NORMAL: 2, Priority.LOW: 3}


def _new_task_places(fresh: Sequence[Assessment]) -> dict[str, int]:
    """The place a person's task dropped now would take, by its priority: after a broken
    build and the waiting tasks of its priority or higher (older), before everything else."""
    places: dict[str, int] = {}
    for priority, level in _PRIORITY_RANK.items():
        place = 1
        for a in fresh:
            inbox = a.gap.inbox
            ahead = memory_group(a.gap) == "build" or (
                inbox is not None and _PRIORITY_RANK[inbox.priority] <= level
            )
            if not ahead:
                break
            place += 1
        places[priority.value] = place
    return places


def planning_order(
    report: GapReport,
    records: Sequence[IterationRecord],
    state: ProjectState,
    fs: FileSystemPort,
) -> PlanningOrder:
    """The order the planner takes the gaps in (the first is what make_plan plans), and why
    it passes over the others; the queue `status` shows."""
    queue = planning_queue(report, chronological(records), state)
    first = _first_plan(queue, report, state, fs)
    if first is None:
        return PlanningOrder(passed_over=queue.passed_over)
    fresh = [a for a in queue.fresh if a.gap.key not in queue.passed_over]
    keys = [a.gap.key for a in (*fresh, *queue.tired) if a.gap.key not in queue.passed_over]
    return PlanningOrder(
        keys=tuple(keys),
        passed_over=queue.passed_over,
        new_task_place=_new_task_places(fresh),
    )


def make_plan(
    report: GapReport,
    records: Sequence[IterationRecord],
    state: ProjectState,
    fs: FileSystemPort,
) -> IterationPlan | None:
    """The plan for the first gap of the planning queue that can be planned, or None."""
    ordered = chronological(records)
    queue = planning_queue(report, ordered, state)
    first = _first_plan(queue, report, state, fs)
    if first is None:
        return None
    chosen, plan = first
    update = {
        "notes": (*plan.notes, *_passed_notes(queue, report, chosen)),
        **_agents(plan, ordered, state),
    }
    return plan.model_copy(update=update)


def _agents(
    plan: IterationPlan, records: Sequence[IterationRecord], state: ProjectState
) -> dict[str, object]:
    """The portfolio in the order to send it, and why (nothing with fewer than two agents,
    or when the plan is routed to a backend of its own)."""
    if plan.route:
        return {}
    chosen = portfolio.choose(
        state.portfolio,
        records,
        plan.task_kind,
        state.now,
        state.random_seed,
        state.agent_tallies,
    )
    return {} if chosen is None else {"agents": chosen.order, "agents_why": chosen.why}


class DefaultPlanner:
    """Plans the most critical gap that its history and the spec allow."""

    contract_version = 1

    def __init__(self, fs_for: Callable[[str], FileSystemPort] = worktree_fs) -> None:
        self.fs_for = fs_for

    def plan(
        self, report: GapReport, records: Sequence[IterationRecord], state: ProjectState
    ) -> IterationPlan | None:
        """One plan, or None when there is nothing to plan."""
        return make_plan(report, records, state, self.fs_for(state.worktree))

    def order(
        self, report: GapReport, records: Sequence[IterationRecord], state: ProjectState
    ) -> PlanningOrder:
        """The order the gaps are planned in (the module server's `order`; `status` shows it)."""
        return planning_order(report, records, state, self.fs_for(state.worktree))

    def prompt(self, plan: IterationPlan) -> AgentPrompt:
        """The agent's prompt for the plan as the kernel runs it (after its clamp)."""
        return agent_prompt(plan)


PLANNER = DefaultPlanner()
