"""Collected tests are compared by what is stable: test ids from a clock are no lost tests."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from domain import (
    ActionType,
    FailureCategory,
    Gap,
    GapCategory,
    IterationPlan,
    Measurement,
    Measurements,
    PlannedAction,
    Risk,
    Severity,
    TaskKind,
    Tool,
)
from kernel.judging.verify import verify
from kernel.measuring.measure import run_pytest
from tests.planted import target_for
from tests.support import make_repo

CALC = "def add(a, b):\n    return a - b\n"


def _clock_tests(cases: int) -> str:
    """A test module whose parametrised ids change on every run (like datetime.now() ids)."""
    values = list(range(1, cases + 1))
    return (
        "import time\n\nimport pytest\n\nfrom calc import add\n\n\n"
        f"@pytest.mark.parametrize('x', {values}, ids=[f'at{{time.time_ns()}}-{{i}}' for i in {values}])\n"
        "def test_clock(x):\n    assert x\n\n\n"
        "def test_add():\n    assert add(2, 3) == 5\n"
    )


def _plan() -> IterationPlan:
    gap = Gap(
        key="pytest:tests/test_calc.py::test_add",
        category=GapCategory.QUALITY,
        source="pytest",
        severity=Severity.CRITICAL,
        title="test_add fails",
    )
    return IterationPlan(
        iteration_id="iter-0001-20250101-000000",
        created_at=datetime(2025, 1, 1, tzinfo=UTC),
        gap=gap,
        task_kind=TaskKind.FIX_TEST,
        goal="fix add",
        actions=(
            PlannedAction(
                action_type=ActionType.MODIFY, target_files=("calc.py",), description="x"
            ),
        ),
        criteria=(),
        estimated_risk=Risk.LOW,
    )


def _measure(tree: Path, tmp_path: Path) -> Measurement:
    target = target_for(tmp_path / "checkout", strict=(), tools=["pytest"])
    m = run_pytest(tree, target, tmp_path / "work", 120)
    assert m.ran, m.error
    return m


def test_ids_that_change_every_run_are_not_lost_but_a_deleted_case_is(tmp_path: Path) -> None:
    base = make_repo(tmp_path / "base", {"calc.py": CALC, "tests/test_calc.py": _clock_tests(2)})
    before = _measure(base, tmp_path)
    fixed_calc = CALC.replace("a - b", "a + b")
    honest = make_repo(
        tmp_path / "honest", {"calc.py": fixed_calc, "tests/test_calc.py": _clock_tests(2)}
    )
    after = _measure(honest, tmp_path)
    clock = [n for n in before.collected if "test_clock" in n]
    assert len(clock) == 2 and not set(clock) & set(after.collected)  # the ids did change
    baseline = Measurements(items=(before,))
    result = verify(_plan(), baseline, Measurements(items=(after,)), ["calc.py"], honest)
    assert (result.passed, result.category) == (True, None), result.evidence
    assert any(
        "change between runs" in e and "tests/test_calc.py::test_clock" in e
        for e in result.evidence
    ), result.evidence
    # deleting one case is still caught, though no id of the baseline can be named
    cut = make_repo(
        tmp_path / "cut", {"calc.py": fixed_calc, "tests/test_calc.py": _clock_tests(1)}
    )
    after_cut = _measure(cut, tmp_path)
    result = verify(_plan(), baseline, Measurements(items=(after_cut,)), ["calc.py"], cut)
    assert (result.passed, result.category) == (False, FailureCategory.HYGIENE_VIOLATION)
    assert result.reason == (
        "1 test(s) collected on the baseline are gone: "
        "tests/test_calc.py::test_clock (2 cases, now 1)"
    )
    failing = {d.node_id for d in before.diagnostics if d.tool == Tool.PYTEST}
    assert failing == {"tests/test_calc.py::test_add"}  # the baseline really had the bug
