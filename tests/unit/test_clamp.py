"""The kernel clamps plans: protected paths out, checks only for tools the target runs, the self-check added."""

from __future__ import annotations

from datetime import UTC, datetime

from domain import (
    AcceptanceCriterion,
    ActionType,
    CheckName,
    Gap,
    GapCategory,
    IterationPlan,
    PlanBudget,
    PlannedAction,
    Risk,
    Severity,
    TaskKind,
)
from kernel.config import Config
from kernel.contracts import protected_patterns
from kernel.judging.guard import clamp_plan


def _plan(
    allowed: tuple[str, ...], targets: tuple[str, ...], budget: PlanBudget | None = None
) -> IterationPlan:
    gap = Gap(
        key="inbox:x.md",
        category=GapCategory.INBOX,
        source="inbox",
        severity=Severity.NORMAL,
        title="x",
    )
    return IterationPlan(
        iteration_id="iter-0001-20260101-000000",
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
        gap=gap,
        task_kind=TaskKind.FEATURE,
        goal="x",
        actions=(
            PlannedAction(action_type=ActionType.MODIFY, target_files=targets, description="x"),
        ),
        criteria=tuple(
            AcceptanceCriterion(check=c, text=c.value)
            for c in (
                CheckName.RUFF,
                CheckName.PYRIGHT,
                CheckName.RUFF_FORMAT,
                CheckName.PYTEST_ALL,
                CheckName.GAP_CLOSED,
            )
        ),
        estimated_risk=Risk.LOW,
        allowed_paths=allowed,
        budget=budget or PlanBudget(),
    )


def test_protected_paths_leave_the_allowlist_and_the_targets() -> None:
    plan = clamp_plan(
        _plan(("kernel/**", "src/a.py", "seed.py"), ("kernel/loop/loop.py", "src/a.py")),
        Config(),
        protected_patterns([]),
        False,
    )
    assert plan.allowed_paths == ("src/a.py",)
    assert plan.actions[0].target_files == ("src/a.py",)


def test_an_allowlist_of_only_protected_paths_allows_nothing() -> None:
    plan = clamp_plan(_plan(("kernel/**",), ()), Config(), protected_patterns([]), False)
    assert plan.allowed_paths == ("__nothing__",)


def test_checks_of_tools_the_target_does_not_run_are_dropped() -> None:
    taking_part = ("ruff", "pytest")
    checks = [
        c.check
        for c in clamp_plan(
            _plan((), ()), Config(), protected_patterns([]), False, taking_part
        ).criteria
    ]
    assert checks == [CheckName.RUFF, CheckName.PYTEST_ALL, CheckName.GAP_CLOSED]
    every = [
        c.check for c in clamp_plan(_plan((), ()), Config(), protected_patterns([]), False).criteria
    ]
    assert CheckName.PYRIGHT in every and CheckName.RUFF_FORMAT in every


def test_self_hosted_plans_that_touch_modules_must_pass_the_self_check() -> None:
    touching = clamp_plan(
        _plan(("modules/planner/**",), ()), Config(), protected_patterns([]), True
    )
    assert any(c.check == CheckName.SELFCHECK for c in touching.criteria)
    anywhere = clamp_plan(_plan((), ()), Config(), protected_patterns([]), True)
    assert any(c.check == CheckName.SELFCHECK for c in anywhere.criteria)
    elsewhere = clamp_plan(
        _plan(("docs/**",), ("docs/a.md",)), Config(), protected_patterns([]), True
    )
    assert not any(c.check == CheckName.SELFCHECK for c in elsewhere.criteria)
    other_repo = clamp_plan(_plan(("modules/x.py",), ()), Config(), protected_patterns([]), False)
    assert not any(c.check == CheckName.SELFCHECK for c in other_repo.criteria)


def test_budget_is_clamped_to_the_config() -> None:
    config = Config.model_validate(
        {"agent": {"timeout_s": 60}, "budget": {"max_cost_usd_per_iteration": 0.5}}
    )
    plan = clamp_plan(
        _plan((), (), PlanBudget(timeout_s=9999, max_cost_usd=50.0)),
        config,
        protected_patterns([]),
        False,
    )
    assert plan.budget.timeout_s == 60 and plan.budget.max_cost_usd == 0.5


def test_words_and_paths_outside_the_repository_leave_the_allowlist() -> None:
    from kernel.judging.guard import is_clean_path

    assert is_clean_path("src/a.py") and is_clean_path("src/**") and is_clean_path("docs/")
    for bad in ("", "/etc/passwd", "../x.py", "a/./b.py", "a//b.py", "a\nb.py", "a\x00b"):
        assert not is_clean_path(bad), bad
    plan = clamp_plan(
        _plan(("src/a.py", "../outside.py", "x\nsrc/**"), ("src/a.py", "/abs.py")),
        Config(),
        protected_patterns(()),
        selfhost=False,
    )
    assert plan.allowed_paths == ("src/a.py",)
    assert [f for a in plan.actions for f in a.target_files] == ["src/a.py"]
