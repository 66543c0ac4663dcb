"""Small builders of domain objects for unit tests (real models, no mocks)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from domain import (
    AcceptanceCriterion,
    CheckName,
    Diagnostic,
    FailureCategory,
    Gap,
    GapCategory,
    InboxItem,
    IterationOutcome,
    IterationPlan,
    IterationRecord,
    Risk,
    Severity,
    TaskKind,
    Tool,
    gap_ref,
)

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def gap(key: str = "ruff:calc.py:F401", files: tuple[str, ...] = ("calc.py",), **more: Any) -> Gap:
    """A quality gap with one finding."""
    values: dict[str, Any] = {
        "key": key,
        "category": GapCategory.QUALITY,
        "source": "ruff",
        "severity": Severity.NORMAL,
        "title": f"fix {key}",
        "files": files,
        "evidence": (Diagnostic(tool=Tool.RUFF, file="calc.py", rule="F401", message="unused"),),
    }
    values.update(more)
    return Gap(**values)


def inbox_gap(name: str, title: str, body: str = "", at: datetime = T0) -> Gap:
    """An inbox gap."""
    item = InboxItem(name=name, title=title, body=body, received_at=at, sha256="0" * 64)
    return Gap(
        key=f"inbox:{name}",
        category=GapCategory.INBOX,
        source="inbox",
        severity=Severity.HIGH,
        title=title,
        inbox=item,
    )


def plan(g: Gap, seq: int = 1, risk: Risk = Risk.MEDIUM, **more: Any) -> IterationPlan:
    """A plan for a gap."""
    values: dict[str, Any] = {
        "iteration_id": f"iter-{seq:04d}-20260101-120000",
        "created_at": T0,
        "gap": g,
        "task_kind": TaskKind.FIX_LINT,
        "goal": g.title,
        "actions": (),
        "criteria": (AcceptanceCriterion(check=CheckName.GAP_CLOSED),),
        "estimated_risk": risk,
    }
    values.update(more)
    return IterationPlan(**values)


def record(
    g: Gap,
    seq: int,
    outcome: IterationOutcome = IterationOutcome.FAILURE,
    category: FailureCategory | None = FailureCategory.AGENT_ERROR,
    evidence: tuple[str, ...] = (),
    base: str = "",
    ended: datetime | None = None,
) -> IterationRecord:
    """A record of an attempt at a gap."""
    started = T0 + timedelta(minutes=seq)
    return IterationRecord(
        iteration_id=f"iter-{seq:04d}-20260101-120000",
        started_at=started,
        ended_at=ended or started + timedelta(seconds=30),
        gap=gap_ref(g),
        outcome=outcome,
        failure_category=category,
        reason="test",
        evidence=evidence,
        base=base,
        plan=plan(g, seq),
    )
