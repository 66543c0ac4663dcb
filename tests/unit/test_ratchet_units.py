"""The ratchet's arithmetic: findings compared as multisets, not by line."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from domain import (
    ActionType,
    Diagnostic,
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
from kernel.verify import new_findings, verify

NOW = datetime(2025, 1, 1, tzinfo=UTC)


def _ruff(file: str, line: int, rule: str, message: str) -> Diagnostic:
    return Diagnostic(tool=Tool.RUFF, file=file, line=line, rule=rule, message=message)


def test_moved_findings_are_not_new_but_one_more_of_the_same_kind_is() -> None:
    before = Measurement(
        tool=Tool.RUFF,
        ran=True,
        diagnostics=(_ruff("a.py", 3, "E711", "Comparison to `None` should be `cond is None`"),),
    )
    moved = _ruff("a.py", 9, "E711", "Comparison to `None` should be `cond is None`")
    again = _ruff("a.py", 12, "E711", "Comparison to `None` should be `cond is None`")
    after = Measurement(tool=Tool.RUFF, ran=True, diagnostics=(moved, again))
    assert new_findings(before, after) == [again]
    # numbers in messages (line references, counts) do not make a finding new
    numbered_before = Measurement(
        tool=Tool.PYRIGHT,
        ran=True,
        diagnostics=(Diagnostic(tool=Tool.PYRIGHT, file="b.py", rule="r", message="see line 4"),),
    )
    numbered_after = Measurement(
        tool=Tool.PYRIGHT,
        ran=True,
        diagnostics=(Diagnostic(tool=Tool.PYRIGHT, file="b.py", rule="r", message="see line 40"),),
    )
    assert new_findings(numbered_before, numbered_after) == []


def _plan() -> IterationPlan:
    gap = Gap(
        key="ruff:a.py:F401",
        category=GapCategory.QUALITY,
        source="ruff",
        severity=Severity.NORMAL,
        title="F401",
        evidence=(_ruff("a.py", 1, "F401", "`os` imported but unused"),),
    )
    return IterationPlan(
        iteration_id="iter-0001-20250101-000000",
        created_at=NOW,
        gap=gap,
        task_kind=TaskKind.FIX_LINT,
        goal="fix",
        actions=(
            PlannedAction(action_type=ActionType.MODIFY, target_files=("a.py",), description="fix"),
        ),
        criteria=(),
        estimated_risk=Risk.LOW,
    )


def test_a_test_suite_that_stops_running_is_named_by_its_cause(tmp_path: Path) -> None:
    ran = Measurement(tool=Tool.PYTEST, ran=True, exit_code=0)
    baseline = Measurements(items=(ran,))
    cases = {
        "ImportError while loading conftest '/w/conftest.py'.": FailureCategory.IMPORT_ERROR,
        "E   SyntaxError: invalid syntax": FailureCategory.COMPILATION_ERROR,
        "INTERNALERROR> KeyError": FailureCategory.TEST_REGRESSION,
    }
    for error, category in cases.items():
        broken = Measurement(tool=Tool.PYTEST, ran=False, exit_code=4, error=error)
        result = verify(_plan(), baseline, Measurements(items=(broken,)), ["a.py"], tmp_path)
        assert (result.passed, result.category) == (False, category), error
    hung = Measurement(tool=Tool.PYTEST, ran=False, timed_out=True, error="did not finish")
    result = verify(_plan(), baseline, Measurements(items=(hung,)), ["a.py"], tmp_path)
    assert result.category == FailureCategory.TEST_TIMEOUT
