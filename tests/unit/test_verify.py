"""The verifier's early word: the gap's own tests, run before the whole suite."""

from __future__ import annotations

from datetime import UTC, datetime

from domain import (
    AcceptanceCriterion,
    ActionType,
    CheckName,
    Diagnostic,
    FailureCategory,
    Gap,
    GapCategory,
    IterationPlan,
    Measurement,
    PlannedAction,
    Risk,
    Severity,
    TaskKind,
    Tool,
)
from kernel.verify import gap_tests_first


def _plan_for_test(node: str) -> IterationPlan:
    gap = Gap(
        key=f"pytest:{node}",
        category=GapCategory.QUALITY,
        source="pytest",
        severity=Severity.CRITICAL,
        title=node,
    )
    return IterationPlan(
        iteration_id="iter-0001-20250101-000000",
        created_at=datetime(2025, 1, 1, tzinfo=UTC),
        gap=gap,
        task_kind=TaskKind.FIX_TEST,
        goal="fix",
        actions=(
            PlannedAction(
                action_type=ActionType.MODIFY, target_files=("calc.py",), description="x"
            ),
        ),
        criteria=(
            AcceptanceCriterion(check=CheckName.PYTEST, args=(node,), text="these tests pass"),
            AcceptanceCriterion(check=CheckName.PYTEST_ALL, text="the suite passes"),
        ),
        estimated_risk=Risk.LOW,
    )


def test_the_gap_tests_first_refuse_a_candidate_that_leaves_them_failing() -> None:
    node = "tests/test_calc.py::test_add"
    plan = _plan_for_test(node)
    still = Measurement(
        tool=Tool.PYTEST,
        ran=True,
        collected=(node,),
        diagnostics=(
            Diagnostic(tool=Tool.PYTEST, node_id=node, rule="failed", message="assert -1 == 5"),
        ),
    )
    refused = gap_tests_first(plan, still)
    assert refused is not None and not refused.passed
    assert refused.category == FailureCategory.TEST_REGRESSION
    assert "assert -1 == 5" in refused.reason and refused.failures[0].node_id == node
    assert "the whole suite did not run" in refused.evidence[-1]
    fixed = still.model_copy(update={"diagnostics": ()})
    assert gap_tests_first(plan, fixed) is None  # they pass: the full verification decides
    gone = fixed.model_copy(update={"collected": ()})
    assert gap_tests_first(plan, gone) is None  # a test gone is the full verification's


def test_a_new_failure_that_also_fails_on_the_baseline_is_pre_existing_never_flaky() -> None:
    from pathlib import Path

    from domain import Measurements
    from kernel.verify import verify

    node, gap_node = "tests/test_b.py::test_b", "tests/test_calc.py::test_add"
    plan = _plan_for_test(gap_node)
    collected = (node, gap_node)
    failed = Diagnostic(tool=Tool.PYTEST, node_id=node, rule="failed", message="boom")
    gap_failed = Diagnostic(tool=Tool.PYTEST, node_id=gap_node, rule="failed", message="x")
    before = Measurements(
        items=(
            Measurement(tool=Tool.PYTEST, ran=True, collected=collected, diagnostics=(gap_failed,)),
        )
    )
    after = Measurements(
        items=(Measurement(tool=Tool.PYTEST, ran=True, collected=collected, diagnostics=(failed,)),)
    )

    def judged(before_fails: set[str], after_fails: set[str]):  # type: ignore[no-untyped-def]
        return verify(
            plan,
            before,
            after,
            ["calc.py"],
            Path("."),
            rerun=lambda _n: (before_fails, after_fails),
        )

    pre = judged({node}, {node})
    assert pre.passed and any(e.startswith("pre-existing: " + node) for e in pre.evidence)
    flaky = judged(set(), set())
    assert not flaky.passed and flaky.category == FailureCategory.FLAKY_TEST
    broken = judged(set(), {node})
    assert not broken.passed and broken.category == FailureCategory.TEST_REGRESSION
