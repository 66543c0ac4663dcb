"""The verifier's early word: the gap's own tests, run before the whole suite."""

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
    PlannedAction,
    Risk,
    Severity,
    TaskKind,
    Tool,
)
from kernel.judging.verify import gap_tests_first


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
    base = still  # the gap's test failed at the base: still failing is no new problem
    refused = gap_tests_first(plan, still, base)
    assert refused is not None and not refused.passed
    assert refused.category == FailureCategory.GAP_NOT_CLOSED
    assert refused.reason.startswith("the gap's tests still fail: ")
    assert "assert -1 == 5" in refused.reason and refused.failures == []
    assert "the whole suite did not run" in refused.evidence[-1]
    skipped = still.model_copy(update={"diagnostics": ()})
    refused = gap_tests_first(plan, skipped, base)  # not failing is not passing (skipped...)
    assert refused is not None and "did not pass" in refused.reason
    fixed = still.model_copy(update={"diagnostics": (), "passed": (node,)})
    assert gap_tests_first(plan, fixed, base) is None  # they pass: the full verification decides
    gone = fixed.model_copy(update={"collected": ()})
    assert gap_tests_first(plan, gone, base) is None  # a test gone is the full verification's
    # a criterion's test that passed at the base and fails now is a regression, and a new problem
    broke = gap_tests_first(plan, still, fixed)
    assert broke is not None and broke.category == FailureCategory.TEST_REGRESSION
    assert [d.node_id for d in broke.failures] == [node]


def test_a_rerun_judges_like_for_like() -> None:
    # issue 24, item 4: the same run order decides; a test that fails alone on the baseline
    # too may lean on another test's leftovers, and a run alone clears nothing
    from pathlib import Path

    from domain import Measurements
    from kernel.judging.verify import verify

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

    def judged(again: set[str], on_base: set[str] = set()):  # type: ignore[no-untyped-def]  # noqa: B006
        return verify(
            plan, before, after, ["calc.py"], Path("."), rerun=lambda _n: (again, on_base)
        )

    broken = judged({node})  # fails again in the suite, passes in the base's: the change's
    assert not broken.passed and broken.category == FailureCategory.TEST_REGRESSION
    assert not any(e.startswith("pre-existing") for e in broken.evidence)
    flaky = judged(set())  # passes when the same suite runs again on the same tree
    assert not flaky.passed and flaky.category == FailureCategory.FLAKY_TEST
    earlier = judged({node}, {node})  # the base's whole suite fails it too, run the same way
    assert earlier.passed, earlier.reason
    assert any(e.startswith("pre-existing") for e in earlier.evidence)


# -- issue 24, item 7: every refusal the verifier gives says what happened -------------------

_NODE = "tests/test_calc.py::test_add"
_SEEN = "tests/test_calc.py::test_seen"


def _pytest(*diagnostics: Diagnostic, ran: bool = True, **more: object) -> Measurement:
    collected = tuple(dict.fromkeys((_NODE, _SEEN, *(d.node_id for d in diagnostics if d.node_id))))
    values: dict[str, object] = {"tool": Tool.PYTEST, "ran": ran, "collected": collected}
    values["passed"] = tuple(n for n in collected if n not in {d.node_id for d in diagnostics})
    values["diagnostics"] = diagnostics
    values.update(more)
    return Measurement.model_validate(values)


def _failed(node: str = _NODE) -> Diagnostic:
    return Diagnostic(tool=Tool.PYTEST, file=node.split("::")[0], node_id=node, rule="failed")


def _refusals() -> dict[str, tuple[FailureCategory, object]]:
    """Every refusal the verifier can give, as (the category it must have, the case)."""
    from domain import Measurements, Tampering
    from tests.unit.factories import gap, inbox_gap, plan

    ok = Measurements(items=(_pytest(),))
    lint = gap()
    feature = plan(inbox_gap("t.md", "a feature"), task_kind=TaskKind.FEATURE)
    quality_test = _plan_for_test(_NODE).model_copy(
        update={
            "gap": _plan_for_test(_NODE).gap.model_copy(update={"evidence": (_failed(),)}),
            "criteria": (AcceptanceCriterion(check=CheckName.GAP_CLOSED),),
        }
    )

    def finding(tool: Tool, rule: str) -> Measurements:
        found = Diagnostic(tool=tool, file="calc.py", rule=rule, line=1)
        if tool == Tool.PYTEST:
            return Measurements(items=(_pytest(found.model_copy(update={"node_id": _NODE})),))
        return Measurements(
            items=(_pytest(), Measurement(tool=tool, ran=True, diagnostics=(found,)))
        )

    def stopped(
        tool: Tool, error: str = "", timed_out: bool = False
    ) -> tuple[Measurements, Measurements]:
        before = Measurements(items=(_pytest(), Measurement(tool=tool, ran=True)))
        gone = Measurement(tool=tool, ran=False, error=error, timed_out=timed_out)
        if tool == Tool.PYTEST:
            return Measurements(items=(_pytest(),)), Measurements(items=(gone,))
        return before, Measurements(items=(_pytest(), gone))

    cases: dict[str, tuple[FailureCategory, object]] = {}
    for tool, rule, category in (
        (Tool.RUFF, "F401", FailureCategory.LINT_ERROR),
        (Tool.RUFF, "invalid-syntax", FailureCategory.COMPILATION_ERROR),
        (Tool.RUFF_FORMAT, "unformatted", FailureCategory.LINT_ERROR),
        (Tool.RUFF_FORMAT, "invalid-syntax", FailureCategory.COMPILATION_ERROR),
        (Tool.PYRIGHT, "reportGeneralTypeIssues", FailureCategory.TYPE_ERROR),
        (Tool.MYPY, "return-value", FailureCategory.TYPE_ERROR),
        (Tool.PYTEST, "failed", FailureCategory.TEST_REGRESSION),
        (Tool.PYTEST, "error", FailureCategory.TEST_REGRESSION),
        (Tool.PYTEST, "collection-error", FailureCategory.IMPORT_ERROR),
    ):
        cases[f"new {tool.value} {rule}"] = (
            category,
            (plan(lint), ok, finding(tool, rule), ["calc.py"]),
        )
    for tool, error, timed_out, category in (
        (Tool.RUFF, "crash", False, FailureCategory.LINT_ERROR),
        (Tool.RUFF_FORMAT, "crash", False, FailureCategory.LINT_ERROR),
        (Tool.PYRIGHT, "crash", False, FailureCategory.TYPE_ERROR),
        (Tool.MYPY, "crash", False, FailureCategory.TYPE_ERROR),
        (Tool.PYTEST, "ModuleNotFoundError: x", False, FailureCategory.IMPORT_ERROR),
        (Tool.PYTEST, "SyntaxError: x", False, FailureCategory.COMPILATION_ERROR),
        (Tool.PYTEST, "exit 3", False, FailureCategory.TEST_REGRESSION),
        (Tool.PYTEST, "", True, FailureCategory.TEST_TIMEOUT),
    ):
        before, after = stopped(tool, error, timed_out)
        cases[f"{tool.value} stops running ({error or 'timeout'})"] = (
            category,
            (plan(lint), before, after, ["calc.py"]),
        )
    tampered = Measurements(items=(_pytest(tampering=(Tampering(what="x was replaced"),)),))
    cases["tampering"] = (
        FailureCategory.SANDBOX_VIOLATION,
        (plan(lint), ok, tampered, ["calc.py"]),
    )
    lost = Measurements(
        items=(_pytest().model_copy(update={"collected": (_NODE,), "passed": (_NODE,)}),)
    )
    cases["a test is lost"] = (
        FailureCategory.HYGIENE_VIOLATION,
        (plan(lint), ok, lost, ["calc.py"]),
    )
    # the gap-closed criterion, reason by reason
    still = Measurements(
        items=(_pytest(), Measurement(tool=Tool.RUFF, ran=True, diagnostics=lint.evidence))
    )
    cases["lint gap still open"] = (
        FailureCategory.LINT_ERROR,
        (plan(lint), still, still, ["calc.py"]),
    )
    failing = Measurements(items=(_pytest(_failed()),))
    cases["failing test gap still open"] = (
        FailureCategory.GAP_NOT_CLOSED,
        (quality_test, failing, failing, ["calc.py"]),
    )
    gone = Measurements(
        items=(_pytest().model_copy(update={"collected": (_SEEN,), "passed": (_SEEN,)}),)
    )
    cases["the gap's test did not run"] = (
        FailureCategory.HYGIENE_VIOLATION,  # the gap is not closed, and the test is gone
        (
            quality_test,
            failing.model_copy(update={"items": (_pytest(_failed()),)}),
            gone,
            ["calc.py"],
        ),
    )
    run_gap = quality_test.model_copy(
        update={"gap": quality_test.gap.model_copy(update={"key": "pytest:run", "evidence": ()})}
    )
    broken = Measurements(items=(_pytest(ran=False, error="exit 4"),))
    cases["the suite still does not run"] = (
        FailureCategory.TEST_REGRESSION,
        (run_gap, broken, broken, ["calc.py"]),
    )
    cases["nothing was changed"] = (FailureCategory.AGENT_ERROR, (feature, ok, ok, []))
    cases["a feature without a test"] = (
        FailureCategory.HYGIENE_VIOLATION,
        (feature, ok, ok, ["calc.py"]),
    )
    cases["a feature whose touched test fails (failing at the base too)"] = (
        FailureCategory.TEST_REGRESSION,
        (feature, failing, failing, ["calc.py", "tests/test_calc.py"]),
    )
    skipped = Measurements(items=(_pytest().model_copy(update={"passed": ()}),))
    cases["a feature whose tests are all skipped"] = (
        FailureCategory.HYGIENE_VIOLATION,
        (feature, skipped, skipped, ["calc.py", "tests/test_calc.py"]),
    )
    for check, category in (
        (CheckName.PYTEST, FailureCategory.TEST_REGRESSION),
        (CheckName.PYTEST_ALL, FailureCategory.TEST_REGRESSION),
        (CheckName.PY_COMPILE, FailureCategory.COMPILATION_ERROR),
        (CheckName.SELFCHECK, FailureCategory.IMPORT_ERROR),
        (CheckName.RUFF, FailureCategory.LINT_ERROR),
        (CheckName.RUFF_FORMAT, FailureCategory.LINT_ERROR),
        (CheckName.PYRIGHT, FailureCategory.TYPE_ERROR),
        (CheckName.MYPY, FailureCategory.TYPE_ERROR),
    ):
        asked = plan(
            lint,
            criteria=(
                AcceptanceCriterion(
                    check=check, args=(_NODE,) if check == CheckName.PYTEST else ()
                ),
            ),
        )
        after = Measurements(items=())  # nothing measured: every criterion of a tool fails
        touched = ["bad.py"]  # the test writes it: it does not compile
        cases[f"criterion {check.value}"] = (category, (asked, after, after, touched))
    return cases


def test_every_refusal_of_the_verifier_has_the_category_of_its_cause(tmp_path: object) -> None:
    from pathlib import Path

    from kernel.judging.verify import verify

    assert {c for c in CheckName} <= {
        CheckName(name.split(" ", 1)[1]) for name in _refusals() if name.startswith("criterion ")
    } | {CheckName.GAP_CLOSED}
    where = Path(str(tmp_path))
    (where / "bad.py").write_text("def broken(:\n")
    for name, (category, case) in _refusals().items():
        asked, before, after, touched = case  # type: ignore[misc]
        result = verify(asked, before, after, touched, where)  # type: ignore[arg-type]
        assert not result.passed, name
        assert result.category == category, (name, result.category, result.reason)
        assert result.category != FailureCategory.UNKNOWN, name


def test_a_features_verdict_counts_the_new_tests_apart_from_the_others_of_their_file() -> None:
    from pathlib import Path

    from domain import Measurements
    from kernel.judging.verify import check_criterion
    from tests.unit.factories import inbox_gap, plan

    feature = plan(inbox_gap("t.md", "a feature"), task_kind=TaskKind.FEATURE)
    old = tuple(f"tests/test_calc.py::test_{n}" for n in range(230))
    new = ("tests/test_calc.py::test_sub",)
    base = _pytest().model_copy(update={"collected": old, "passed": old})
    after = _pytest().model_copy(update={"collected": old + new, "passed": old + new})
    closed = AcceptanceCriterion(check=CheckName.GAP_CLOSED)
    verdict = check_criterion(
        closed,
        feature,
        Measurements(items=(base,)),
        Measurements(items=(after,)),
        ["calc.py", "tests/test_calc.py"],
        Path("."),
        None,
    )
    assert verdict.passed
    assert verdict.evidence == "1 new test(s) pass, and 230 more in the touched test files"


def test_a_linter_that_could_not_run_at_the_base_either_is_no_verdict_on_the_change(
    tmp_path: Path,
) -> None:
    """A pinned ruff that cannot read the project's own configuration (validators: ruff
    0.0.282 and `lint.select`) says so; it is not a LINT_ERROR against the agent."""
    from domain import Measurements
    from kernel.judging.verify import check_criterion
    from tests.unit.factories import gap, plan

    broken = Measurement(tool=Tool.RUFF, ran=False, error="unknown field `lint`")
    criterion = AcceptanceCriterion(check=CheckName.RUFF, text="no new ruff finding")
    args = (criterion, plan(gap()))
    verdict = check_criterion(
        *args,
        Measurements(items=(broken,)),
        Measurements(items=(broken,)),
        ["a.py"],
        tmp_path,
        None,
    )
    assert verdict.passed and "could not run at the base either" in verdict.evidence
    ran = Measurement(tool=Tool.RUFF, ran=True)
    verdict = check_criterion(
        *args, Measurements(items=(ran,)), Measurements(items=(broken,)), ["a.py"], tmp_path, None
    )
    assert not verdict.passed and "could not run" in verdict.evidence
