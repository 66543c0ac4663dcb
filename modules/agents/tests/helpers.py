"""Plans, contexts and run results for the adapter tests."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from domain import (
    AcceptanceCriterion,
    ActionType,
    AgentContext,
    CheckName,
    Gap,
    GapCategory,
    IterationPlan,
    PlanBudget,
    PlannedAction,
    Risk,
    RunResult,
    Severity,
    TaskKind,
)
from modules.planner import PLANNER


def make_plan(max_cost_usd: float = 2.0, files: tuple[str, ...] = ("calc.py",)) -> IterationPlan:
    """A plan to fix a failing test in calc.py."""
    gap = Gap(
        key="pytest:tests/test_calc.py::test_add",
        category=GapCategory.QUALITY,
        source="pytest",
        severity=Severity.CRITICAL,
        title="tests/test_calc.py::test_add failed",
        files=("tests/test_calc.py",),
    )
    plan = IterationPlan(
        iteration_id="iter-0001-20260101-000000",
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
        gap=gap,
        task_kind=TaskKind.FIX_TEST,
        goal="make test_add pass",
        actions=(
            PlannedAction(action_type=ActionType.MODIFY, target_files=files, description="fix add"),
        ),
        criteria=(AcceptanceCriterion(check=CheckName.PYTEST, args=(gap.key[7:],)),),
        estimated_risk=Risk.LOW,
        budget=PlanBudget(max_cost_usd=max_cost_usd),
    )
    # the module server fills in the planner's prompt before an adapter sees a plan
    return plan.model_copy(update={"prompt": PLANNER.prompt(plan)})


def make_context(model: str = "", **options: Any) -> AgentContext:
    """What the kernel hands an adapter, with these [agent] options."""
    defaults: dict[str, Any] = {
        "max_turns": 30,
        "allowed_tools": ["Read", "Edit", "Bash(pytest:*)"],
        "api_base": "",
        "extra_args": [],
    }
    defaults.update(options)
    return AgentContext(
        worktree="/wt",
        seed_home="/seed",
        python="/usr/bin/python3",
        ruff="ruff",
        model=model,
        options=defaults,
    )


def ran(output: str, exit_code: int | None = 0, **extra: Any) -> RunResult:
    """A finished run with this combined output."""
    return RunResult(
        exit_code=exit_code,
        output=output,
        output_tail=output[-16384:],
        output_bytes=len(output.encode()),
        **extra,
    )
