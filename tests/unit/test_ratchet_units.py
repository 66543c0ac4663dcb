"""The ratchet's arithmetic: findings counted per (tool, file, rule), collected tests per function."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

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
    Measurements,
    PlannedAction,
    Risk,
    Severity,
    TaskKind,
    Tool,
)
from kernel.judging.verify import LostTests, lost_tests, new_findings, verify

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


def _pyright(line: int, message: str, file: str = "src/sets.py") -> Diagnostic:
    rule = "reportOptionalMemberAccess"
    return Diagnostic(tool=Tool.PYRIGHT, file=file, line=line, rule=rule, message=message)


def _measured(tool: Tool, *found: Diagnostic) -> Measurements:
    return Measurements(items=(Measurement(tool=tool, ran=True, diagnostics=found),))


def test_a_message_quoting_a_renamed_identifier_is_the_same_finding() -> None:
    before = _measured(
        Tool.PYRIGHT, _pyright(10, '"issupserset" is not a known attribute of "None"')
    )
    renamed = _pyright(10, '"issuperset" is not a known attribute of "None"')
    after = _measured(Tool.PYRIGHT, renamed)
    assert new_findings(before.get(Tool.PYRIGHT), after.get(Tool.PYRIGHT)) == []
    plan = _plan(CheckName.PYRIGHT)
    result = verify(plan, before, after, ["src/sets.py"], Path("/nonexistent"))
    assert (result.passed, result.category) == (True, None), result.evidence


def test_a_second_finding_of_the_same_rule_in_the_same_file_is_new_and_named() -> None:
    old = _pyright(10, '"issupserset" is not a known attribute of "None"')
    before = _measured(Tool.PYRIGHT, old)
    # the old one moved down and changed its words; the one that looks new is named
    second = _pyright(4, '"union" is not a known attribute of "None"')
    moved = _pyright(11, '"issuperset" is not a known attribute of "None"')
    after = _measured(Tool.PYRIGHT, second, moved)
    assert new_findings(before.get(Tool.PYRIGHT), after.get(Tool.PYRIGHT)) == [second]
    result = verify(_plan(CheckName.PYRIGHT), before, after, ["src/sets.py"], Path("/x"))
    assert (result.passed, result.category) == (False, FailureCategory.TYPE_ERROR)
    assert any("src/sets.py:4" in e for e in result.evidence), result.evidence
    # the same rule in another file is another count
    elsewhere = _measured(Tool.PYRIGHT, _pyright(10, old.message, file="src/other.py"))
    fresh = new_findings(before.get(Tool.PYRIGHT), elsewhere.get(Tool.PYRIGHT))
    assert [d.file for d in fresh] == ["src/other.py"]


def test_a_newly_failing_test_is_new_and_a_new_message_of_an_old_failure_is_not() -> None:
    def failed(node: str, message: str) -> Diagnostic:
        return Diagnostic(
            tool=Tool.PYTEST, file="t.py", rule="failed", node_id=node, message=message
        )

    before = Measurement(tool=Tool.PYTEST, ran=True, diagnostics=(failed("t.py::a", "1 != 2"),))
    again = failed("t.py::a", "3 != 4")
    other = failed("t.py::b", "1 != 2")
    after = Measurement(tool=Tool.PYTEST, ran=True, diagnostics=(again, other))
    assert new_findings(before, after) == [other]


def test_findings_listed_twice_are_counted_twice() -> None:
    same = _ruff("a.py", 3, "E711", "Comparison to `None`")
    before = Measurement(tool=Tool.RUFF, ran=True, diagnostics=(same,))
    after = Measurement(tool=Tool.RUFF, ran=True, diagnostics=(same, same, same))
    assert new_findings(before, after) == [same, same]
    assert new_findings(after, before) == []


def test_collected_tests_are_compared_by_cases_per_test_function() -> None:
    base = ["t.py::test_a", "t.py::test_p[1]", "t.py::test_p[2]", "t.py::K::test_m[x::y[z]]"]
    assert lost_tests(base, base) == LostTests()
    # ids from a clock: every run names the cases differently, and that is all
    clock = ["t.py::test_a", "t.py::test_p[17]", "t.py::test_p[18]", "t.py::K::test_m[x::y[w]]"]
    assert lost_tests(base, clock) == LostTests(unstable=("t.py::K::test_m", "t.py::test_p"))
    # one case deleted: named when the ids are stable, counted when they are not
    assert lost_tests(base, [n for n in base if n != "t.py::test_p[2]"]) == LostTests(
        1, ("t.py::test_p[2]",)
    )
    assert lost_tests(base, ["t.py::test_a", "t.py::test_p[9]", "t.py::K::test_m[q]"]) == (
        LostTests(1, ("t.py::test_p (2 cases, now 1)",), ("t.py::K::test_m",))
    )
    # a renamed test is a lost one; a new one or a new case is never lost
    renamed = ["t.py::test_b", *base[1:], "t.py::test_p[3]"]
    assert lost_tests(base, renamed) == LostTests(1, ("t.py::test_a",))


def _plan(*checks: CheckName) -> IterationPlan:
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
        criteria=tuple(
            AcceptanceCriterion(check=c, args=("src/sets.py",), text=c.value) for c in checks
        ),
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
