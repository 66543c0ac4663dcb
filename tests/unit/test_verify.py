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
    skipped = still.model_copy(update={"diagnostics": ()})
    refused = gap_tests_first(plan, skipped)  # not failing is not passing (skipped, xfailed)
    assert refused is not None and "did not pass" in refused.reason
    fixed = still.model_copy(update={"diagnostics": (), "passed": (node,)})
    assert gap_tests_first(plan, fixed) is None  # they pass: the full verification decides
    gone = fixed.model_copy(update={"collected": ()})
    assert gap_tests_first(plan, gone) is None  # a test gone is the full verification's


def test_a_rerun_decides_flaky_only_and_never_clears_a_failure() -> None:
    # issue 23: a test that fails alone on the baseline too may lean on another test's
    # leftovers; in the suite it passed there, so failing now is the change's
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
        items=(
            Measurement(
                tool=Tool.PYTEST,
                ran=True,
                collected=collected,
                diagnostics=(failed,),
                passed=(gap_node,),
            ),
        )
    )

    def judged(again: set[str]):  # type: ignore[no-untyped-def]
        return verify(plan, before, after, ["calc.py"], Path("."), rerun=lambda _n: again)

    broken = judged({node})  # fails again (on the baseline alone too, maybe): never cleared
    assert not broken.passed and broken.category == FailureCategory.TEST_REGRESSION
    assert not any(e.startswith("pre-existing") for e in broken.evidence)
    flaky = judged(set())
    assert not flaky.passed and flaky.category == FailureCategory.FLAKY_TEST
