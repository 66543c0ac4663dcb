"""A first planner: the most critical gap becomes one plan with checks the kernel can run."""

from __future__ import annotations

from collections.abc import Sequence
from fnmatch import fnmatch

from domain import (
    AcceptanceCriterion,
    ActionType,
    AttemptNote,
    CheckName,
    Gap,
    GapCategory,
    GapReport,
    IterationOutcome,
    IterationPlan,
    IterationRecord,
    PlannedAction,
    ProjectState,
    Risk,
    TaskKind,
)

ALWAYS_PROTECTED: tuple[str, ...] = (
    "seed.py",
    "VISION.md",
    "kernel/**",
    "kernel",
    "history/**",
    ".git/**",
    "seed.toml",
)
_FAILED = (IterationOutcome.FAILURE, IterationOutcome.ROLLBACK, IterationOutcome.NO_CHANGE)


def iteration_id(state: ProjectState) -> str:
    """iter-NNNN-YYYYMMDD-HHMMSS from the kernel's sequence number and time."""
    return f"iter-{state.next_sequence:04d}-{state.now:%Y%m%d-%H%M%S}"


def is_protected(path: str, protected: Sequence[str]) -> bool:
    """Whether a repository-relative path falls under a protected glob."""
    for pattern in (*ALWAYS_PROTECTED, *protected):
        if fnmatch(path, pattern):
            return True
        if pattern.endswith("/**") and (path == pattern[:-3] or path.startswith(pattern[:-2])):
            return True
    return False


def consecutive_failures(key: str, records: Sequence[IterationRecord]) -> int:
    """How many of the latest attempts at this gap failed in a row."""
    count = 0
    for record in reversed(records):
        if record.gap.key != key:
            continue
        if record.outcome in _FAILED:
            count += 1
        else:
            break
    return count


def _task_kind(gap: Gap) -> TaskKind:
    if gap.source == "pytest":
        return TaskKind.FIX_TEST
    if gap.source == "pyright":
        return TaskKind.FIX_TYPES
    if gap.source in ("ruff", "ruff-format"):
        return TaskKind.FIX_LINT
    return TaskKind.FEATURE


def _notes(gap: Gap, records: Sequence[IterationRecord]) -> tuple[AttemptNote, ...]:
    notes: list[AttemptNote] = []
    for record in records:
        if record.gap.key == gap.key and record.outcome in _FAILED:
            notes.append(
                AttemptNote(
                    iteration_id=record.iteration_id,
                    outcome=record.outcome,
                    failure_category=record.failure_category,
                    failing_tests=tuple(d.node_id for d in record.failures if d.node_id),
                    trace_head=next((d.detail[:800] for d in record.failures if d.detail), ""),
                    touched_files=record.touched_files,
                    reason=record.reason,
                    agent_summary=record.agent_summary[:800],
                )
            )
    return tuple(notes[-5:])


def _criteria(gap: Gap, files: Sequence[str]) -> list[AcceptanceCriterion]:
    criteria = [
        AcceptanceCriterion(check=CheckName.RUFF, text="touched files gain no ruff finding"),
        AcceptanceCriterion(check=CheckName.PYRIGHT, text="touched files gain no pyright error"),
        AcceptanceCriterion(check=CheckName.GAP_CLOSED, text=f"the gap is closed: {gap.title}"),
    ]
    if gap.source == "ruff-format":
        criteria.append(
            AcceptanceCriterion(
                check=CheckName.RUFF_FORMAT, args=tuple(files), text="the files are formatted"
            )
        )
    nodes = tuple(d.node_id for d in gap.evidence if d.node_id and d.rule in ("failed", "error"))
    if nodes:
        criteria.append(
            AcceptanceCriterion(check=CheckName.PYTEST, args=nodes, text="the failing tests pass")
        )
    criteria.append(
        AcceptanceCriterion(check=CheckName.PYTEST_ALL, text="no test that passed before fails")
    )
    return criteria


def _risk(gap: Gap, files: Sequence[str], tried_before: bool) -> Risk:
    if tried_before or any(f.startswith("domain/") for f in files):
        return Risk.HIGH
    if gap.category == GapCategory.QUALITY and gap.source in ("ruff", "ruff-format"):
        return Risk.LOW
    if all("test" in f for f in files) and files:
        return Risk.LOW
    return Risk.MEDIUM


class DefaultPlanner:
    """Plans the most critical gap that has not failed three times in a row."""

    contract_version = 1

    def plan(
        self, report: GapReport, records: Sequence[IterationRecord], state: ProjectState
    ) -> IterationPlan | None:
        """One plan, or None when there is nothing to plan."""
        candidates = [g for g in report.gaps if g.key not in state.quarantined]
        if not candidates:
            return None
        fresh = [g for g in candidates if consecutive_failures(g.key, records) < 3]
        gap = fresh[0] if fresh else candidates[0]
        files = tuple(f for f in gap.files if not is_protected(f, state.protected))
        if gap.files and not files:
            return None
        history = _notes(gap, records)
        kind = _task_kind(gap)
        action_type = ActionType.MODIFY if files else ActionType.CREATE
        actions = (
            PlannedAction(
                action_type=action_type,
                target_files=files,
                description=f"Fix {gap.source} failures: {gap.title}"
                if gap.category == GapCategory.QUALITY
                else gap.title,
            ),
        )
        # a failing test may be fixed wherever the test reaches, so its plan allows any file
        allowed: tuple[str, ...] = () if gap.source == "pytest" else files
        if gap.inbox is not None and gap.inbox.allowed:
            allowed = gap.inbox.allowed
        return IterationPlan(
            iteration_id=iteration_id(state),
            created_at=state.now,
            gap=gap,
            task_kind=kind,
            goal=gap.title,
            actions=actions,
            criteria=tuple(_criteria(gap, files)),
            estimated_risk=_risk(gap, files, bool(history)),
            allowed_paths=allowed,
            forbidden_paths=gap.inbox.forbidden if gap.inbox is not None else (),
            history=history,
            notes=(gap.rank_reason,) if gap.rank_reason else (),
        )


PLANNER = DefaultPlanner()
