"""Validation of the module host's answers: domain models, the agent list, the backend choice,
inbox tasks read (against the kernel's bounds).

Its own file so kernel/host/host.py holds the host's life (start, call, boot, fallback, reload)
and this one what an answer must be before the kernel uses it; a wrong answer is a HostError.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from pydantic import BaseModel, ValidationError

from domain import (
    AgentReport,
    Diagnostic,
    Gap,
    GapCategory,
    GapReport,
    InboxItem,
    InboxText,
    IterationPlan,
    PlanningOrder,
    ProjectState,
)
from kernel.bounds import REPORTED_MAX, clean
from kernel.errors import HostError

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class AgentInfo:
    """What the host says about one agent backend."""

    name: str
    executable: str
    sources: tuple[str, ...]


@dataclass
class Backend:
    """The agent backend in use and why."""

    name: str
    reason: str
    sources: tuple[str, ...] = ("*",)
    fallback: str = ""
    """A backend that takes what this one cannot (auto: ruff-fix's gaps when no agent exists)."""


def valid(model: type[M], value: Any, what: str) -> M:
    """value as a model, or a HostError naming the first thing wrong with it."""
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise HostError(f"module host returned an invalid {what}: {where}: {first['msg']}") from exc


def shown(value: Any) -> Any:
    """A module's answer with every text in it cleaned (`bounds.clean`), keys included: what
    the kernel records, writes or shows of a module is inert on a person's terminal."""
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, list):
        return [shown(v) for v in cast(list[Any], value)]
    if isinstance(value, dict):
        return {shown(k): shown(v) for k, v in cast(dict[Any, Any], value).items()}
    return value


_REFUSALS = 5
_REFUSAL_CHARS = 500


def refusals(report: AgentReport, log: str) -> AgentReport:
    """The adapter's report with only the refusals it quoted from the log the kernel captured
    (an adapter cannot make up evidence), the first few, each bounded."""
    log = clean(log)  # as the report's own text is
    kept = [r[:_REFUSAL_CHARS] for r in report.refusals if r.strip() and r in log]
    return report.model_copy(update={"refusals": tuple(kept[:_REFUSALS])})


_FIGURES = ("tokens_used", "input_tokens", "output_tokens", "cached_tokens", "cost_usd", "turns")


def unfit_figures(report: AgentReport) -> str:
    """What of a run's report is no figure ('' when every one is): each count and dollar
    amount must be finite, from 0 to REPORTED_MAX (10^12)."""
    for name in _FIGURES:
        value: float = getattr(report, name)
        if not (math.isfinite(value) and 0 <= value <= REPORTED_MAX):
            return f"its {name} is {value!r}; a reported figure must be finite, from 0 to 10^12"
    return ""


def agent_list(value: Any) -> tuple[dict[str, AgentInfo], tuple[str, ...]]:
    """The host's "agents" answer: every backend it knows, and the auto-detection order."""
    answer = cast(dict[str, Any], value)
    info: dict[str, AgentInfo] = {}
    for name, raw in cast(dict[str, dict[str, Any]], answer.get("agents", {})).items():
        info[str(name)] = AgentInfo(
            name=str(name),
            executable=str(raw.get("executable", "")),
            sources=tuple(str(s) for s in cast(list[Any], raw.get("sources", []))),
        )
    order = tuple(str(n) for n in cast(list[Any], answer.get("auto_order", [])))
    return info, order


def backend_choice(value: Any, wanted: str, listed: dict[str, AgentInfo]) -> Backend:
    """The host's "choose_backend" answer: a backend it listed (the configured one, unless auto)."""
    answer = cast(dict[str, Any], value) if isinstance(value, dict) else {}
    name, reason, fallback = (answer.get(k) for k in ("name", "reason", "fallback"))
    sources = answer.get("sources")
    if not (
        isinstance(name, str)
        and isinstance(reason, str)
        and isinstance(fallback, str)
        and isinstance(sources, list)
        and all(isinstance(s, str) for s in cast(list[Any], sources))
    ):
        raise HostError(
            "module host returned a backend choice that is not {name, reason, sources, fallback}"
        )
    if (
        name not in listed
        or (wanted != "auto" and name != wanted)
        or (fallback and fallback not in listed)
    ):
        raise HostError(
            f"module host chose backend {name!r} (fallback {fallback!r}) for {wanted!r}; "
            f"it listed {', '.join(sorted(listed))}"
        )
    return Backend(name, reason, tuple(cast(list[str], sources)), fallback)


def kernel_gap(plan: IterationPlan, report: GapReport) -> IterationPlan:
    """The plan with the kernel's own copy of the gap it names: the planner picks a gap by its
    key and cannot change what is frozen, which tests must pass, or the steady runs. A key the
    kernel did not send makes the plan invalid."""
    for gap in report.gaps:
        if gap.key == plan.gap.key:
            return plan if plan.gap == gap else plan.model_copy(update={"gap": gap})
    raise HostError(f"planner planned gap {plan.gap.key!r}, which is not in the report it was sent")


def planning_order(value: Any, report: GapReport) -> PlanningOrder:
    """The planner's order, checked: each key once and in the report, a place at least 1."""
    order = valid(PlanningOrder, value, "PlanningOrder")
    known = {g.key for g in report.gaps}
    keys = tuple(dict.fromkeys(k for k in order.keys if k in known))
    if len(keys) != len(order.keys):
        raise HostError("planner's order names a gap twice, or one not in the report it was sent")
    if any(place < 1 for place in order.new_task_place.values()):
        raise HostError("planner's order gives a place below 1")
    passed = {k: v[:500] for k, v in order.passed_over.items() if k in known and k not in keys}
    return order.model_copy(update={"passed_over": passed})


def agent_order(plan: IterationPlan, state: ProjectState) -> IterationPlan:
    """The plan with its order of agents checked against the configured portfolio (each key
    configured, none twice, none left out; empty: the configured order) and the kernel's own
    random seed in it. Any other order makes the plan invalid."""
    keys = [a.key for a in state.portfolio]
    order = list(plan.agents)
    unknown = [k for k in order if k not in keys]
    twice = sorted({k for k in order if order.count(k) > 1})
    missing = [k for k in keys if k not in order] if order else []
    wrong = (
        f"{unknown[0]!r} is not a configured agent"
        if unknown
        else f"{twice[0]!r} is ordered twice"
        if twice
        else f"{missing[0]!r} is left out"
        if missing
        else ""
    )
    if wrong:
        configured = ", ".join(keys) or "none: fewer than two are configured"
        raise HostError(
            f"module host returned an invalid IterationPlan: agents: {wrong} "
            f"(the portfolio: {configured})"
        )
    if plan.random_seed == state.random_seed:
        return plan
    return plan.model_copy(update={"random_seed": state.random_seed})


def real_files(report: GapReport, paths: Collection[str]) -> GapReport:
    """The analysers' report with every file a quality gap names limited to paths of the
    measured tree: its files, its evidence's crash frames and executed files. A gap's files
    become the planner's allowlist and suspects, so a tool's words (a message where a path
    belongs) never stand in for them; inbox and roadmap gaps carry the person's own globs."""
    known = frozenset(paths)
    return report.model_copy(update={"gaps": tuple(_real_files(g, known) for g in report.gaps)})


def _real_files(gap: Gap, known: frozenset[str]) -> Gap:
    if gap.category != GapCategory.QUALITY:
        return gap
    evidence = tuple(_real_evidence(d, known) for d in gap.evidence)
    files = tuple(f for f in gap.files if f in known)
    if files == gap.files and evidence == gap.evidence:
        return gap
    return gap.model_copy(update={"files": files, "evidence": evidence})


def _real_evidence(d: Diagnostic, known: frozenset[str]) -> Diagnostic:
    frame = d.frame_file if d.frame_file in known else ""
    executed = tuple(e for e in d.executed if e.file in known)
    if frame == d.frame_file and executed == d.executed:
        return d
    return d.model_copy(
        update={
            "frame_file": frame,
            "frame_line": d.frame_line if frame else 0,
            "executed": executed,
        }
    )


_READER = "the module that reads inbox tasks"


def inbox_readings(value: Any, tasks: list[InboxText]) -> list[InboxItem | str]:
    """The host's "read_inbox" answer: per task an item within the bounds, or why the file is
    set aside (the reader's own reason, or the kernel's when the answer is not a fit item)."""
    if not isinstance(value, list) or len(cast(list[Any], value)) != len(tasks):
        raise HostError(f"module host did not answer for each of {len(tasks)} inbox tasks")
    return [_reading(raw, task) for raw, task in zip(cast(list[Any], value), tasks, strict=True)]


def _reading(raw: Any, task: InboxText) -> InboxItem | str:
    answer = cast(dict[str, Any], raw) if isinstance(raw, dict) else {}
    if isinstance(answer.get("rejected"), str):
        # one line: the reason goes into daemon.log and events as the module wrote it
        return (
            " ".join(cast(str, answer["rejected"]).split())
            or f"{_READER} refused it without a reason"
        )
    try:
        item = valid(InboxItem, answer.get("item"), "InboxItem")
    except HostError as exc:
        return f"{_READER} gave no fit reading of it: {exc}"
    problem = _past_bounds(item, task)
    return f"{_READER} returned it past the kernel's bounds: {problem}" if problem else item


def _past_bounds(item: InboxItem, task: InboxText) -> str:
    """What of the item is past the bounds the reader was given ('' when nothing is)."""
    if item.name != task.name:
        return f"it is named {item.name!r}"
    if not item.title.strip():  # nothing of it is left to show once cleaned
        return "its title is empty"
    if len(item.title) > task.title_max:
        return f"its title is {len(item.title)} characters; the limit is {task.title_max}"
    if len(item.body) > len(task.text):
        return "its body is longer than the file"
    for key in ("acceptance", "allowed", "forbidden"):
        values: tuple[str, ...] = getattr(item, key)
        if len(values) > task.list_max:
            return f"'{key}' has {len(values)} entries; the limit is {task.list_max}"
        if any(len(v) > task.string_max for v in values):
            return f"'{key}' has an entry over {task.string_max} characters"
    return ""
