"""Revision by failure category: the next plan differs from the one that failed, as the spec says."""

from __future__ import annotations

import pytest

from domain import (
    CheckName,
    Diagnostic,
    FailureCategory,
    IterationOutcome,
    Risk,
    Tool,
)
from modules.planner.tests.factory import (
    failing_test,
    inbox_gap,
    lint_gap,
    must_plan,
    plan,
    pytest_gap,
    record,
    state,
)


def test_test_regression_narrows_scope_and_attaches_the_failing_tests_output() -> None:
    gap = pytest_gap()
    fresh = must_plan([gap])
    broke = failing_test("tests/test_mul.py::test_mul", detail="E   assert 6 == 7\nmul.py:3: X")
    revised = must_plan([gap], [record(gap, 1, failures=[broke])])
    assert set(revised.allowed_paths) < set(fresh.allowed_paths)
    assert revised.allowed_paths == ("calc.py", "tests/test_calc.py")
    assert revised.budget.max_changed_lines < fresh.budget.max_changed_lines
    (doc,) = revised.documents
    assert doc.label.startswith("output of tests/test_mul.py::test_mul in iter-0001")
    assert "assert 6 == 7" in doc.text
    assert any("TEST_REGRESSION" in n and "narrowed" in n for n in revised.notes)


def test_type_error_attaches_pyright_on_the_touched_files() -> None:
    gap = inbox_gap(allowed=["calc.py", "tests/test_calc.py"])
    findings = [
        Diagnostic(
            tool=Tool.PYRIGHT, file="calc.py", line=4, rule="reportArgumentType", message="bad arg"
        ),
        Diagnostic(tool=Tool.PYRIGHT, file="other.py", line=1, rule="reportX", message="untouched"),
    ]
    attempt = record(
        gap, 1, category=FailureCategory.TYPE_ERROR, failures=findings, touched=["calc.py"]
    )
    revised = must_plan([gap], [attempt])
    (doc,) = revised.documents
    assert doc.label == f"pyright on the files touched in {attempt.iteration_id}"
    assert "calc.py:4: reportArgumentType: bad arg" in doc.text
    assert "other.py" not in doc.text
    assert any(p.startswith("types: run pyright") for p in revised.phases)
    assert revised.route == ""


def test_lint_error_routes_a_fixable_lint_gap_to_ruff_fix_first() -> None:
    gap = lint_gap(fixable=True)
    attempt = record(gap, 1, category=FailureCategory.LINT_ERROR, backend="command")
    assert must_plan([gap]).route == ""
    assert must_plan([gap], [attempt]).route == "ruff-fix"


def test_lint_error_after_ruff_fix_itself_failed_goes_back_to_the_agent_with_findings() -> None:
    gap = lint_gap(fixable=True)
    finding = Diagnostic(tool=Tool.RUFF, file="calc.py", line=2, rule="E711", message="cmp None")
    attempt = record(
        gap, 1, category=FailureCategory.LINT_ERROR, backend="ruff-fix", failures=[finding]
    )
    revised = must_plan([gap], [attempt])
    assert revised.route == ""
    assert "calc.py:2: E711: cmp None" in revised.documents[0].text
    assert any(p.startswith("lint: run `ruff check --fix`") for p in revised.phases)


def test_lint_error_on_a_feature_adds_the_lint_step_and_no_route() -> None:
    gap = inbox_gap(allowed=["calc.py"])
    revised = must_plan([gap], [record(gap, 1, category=FailureCategory.LINT_ERROR)])
    assert revised.route == ""
    assert any(p.startswith("lint:") for p in revised.phases)


def test_import_error_adds_the_dependency_context() -> None:
    gap = pytest_gap()
    broken = Diagnostic(
        tool=Tool.PYTEST,
        file="tests/test_calc.py",
        rule="collection-error",
        node_id="tests/test_calc.py",
        message="ModuleNotFoundError: No module named 'numpy'",
        exc_type="ModuleNotFoundError",
    )
    attempt = record(gap, 1, category=FailureCategory.IMPORT_ERROR, failures=[broken])
    revised = must_plan([gap], [attempt])
    labels = [d.label for d in revised.documents]
    assert labels == [
        f"import failures of {attempt.iteration_id}",
        "dependencies declared in pyproject.toml",
    ]
    assert "No module named 'numpy'" in revised.documents[0].text
    assert "dependency: pydantic>=2" in revised.documents[1].text
    assert any(p.startswith("imports:") for p in revised.phases)


def test_a_sandbox_violation_is_never_retried() -> None:
    category = FailureCategory.SANDBOX_VIOLATION
    gap, other = pytest_gap(), lint_gap()
    history = [record(gap, 1, category=category)]
    assert plan([gap], history) is None
    result = must_plan([gap, other], history)
    assert result.gap == other
    assert any(
        n.startswith(f"skipped {gap.key}: never retried: {category.value}") for n in result.notes
    )
    # not even when every other gap is exhausted
    tired = [record(other, s) for s in (2, 3, 4)]
    exhausted = must_plan([gap, other], history + tired)
    assert exhausted.gap == other
    assert exhausted.actions[0].description.startswith("WARNING")


def test_an_allowlist_miss_widens_the_next_plan_for_the_gap_and_says_so() -> None:
    gap = pytest_gap()
    fresh = must_plan([gap])
    assert "strutils.py" not in fresh.allowed_paths
    miss = record(
        gap,
        1,
        category=FailureCategory.ALLOWLIST_VIOLATION,
        touched=["calc.py", "strutils.py", "kernel/core.py"],
        evidence=[
            f"ALLOWLIST_VIOLATION: strutils.py: outside the plan's allowlist ({fresh.allowed_paths[0]})",
            "ALLOWLIST_VIOLATION: kernel/core.py: outside the plan's allowlist (calc.py)",
            "ALLOWLIST_VIOLATION: secret.py: a path the task forbids was changed",
        ],
    )
    revised = must_plan([gap], [miss])
    assert set(fresh.allowed_paths) < set(revised.allowed_paths)
    assert "strutils.py" in revised.allowed_paths
    assert "kernel/core.py" not in revised.allowed_paths  # protected stays out
    assert "secret.py" not in revised.allowed_paths  # a forbidden path is never added
    assert any(
        "ALLOWLIST_VIOLATION in iter-0001" in n and "strutils.py" in n for n in revised.notes
    )
    # a second miss for the same gap is the last retry: the gap then rests
    again = record(gap, 2, category=FailureCategory.ALLOWLIST_VIOLATION, evidence=miss.evidence)
    assert must_plan([gap, lint_gap()], [miss, again]).gap != gap


def test_a_weakened_test_is_retried_once_then_the_gap_rests() -> None:
    gap = pytest_gap()
    first = record(gap, 1, category=FailureCategory.HYGIENE_VIOLATION)
    assert must_plan([gap], [first]).gap == gap
    second = record(gap, 2, category=FailureCategory.HYGIENE_VIOLATION)
    assert must_plan([gap, lint_gap()], [first, second]).gap != gap


def test_budget_exceeded_stops_planning_until_a_person_resumes() -> None:
    gap, other = pytest_gap(), lint_gap()
    spent = record(gap, 1, IterationOutcome.FAILURE, FailureCategory.BUDGET_EXCEEDED)
    halted = state(halted=True, halt_reason="BUDGET_EXCEEDED in iter-0001")
    assert plan([gap, other], [spent], st=halted) is None
    resumed = must_plan([gap, other], [spent])
    assert resumed.gap == gap
    assert resumed.budget.max_changed_lines == 200  # narrowed, like any other failure
    # halted for another reason after a later iteration: the budget is not what stops it
    later = record(other, 2, IterationOutcome.SUCCESS)
    assert must_plan([gap, other], [spent, later], st=halted).gap == gap


def test_a_flaky_test_is_retried_once_in_isolation() -> None:
    gap = pytest_gap()
    second = pytest_gap("tests/test_calc.py::test_sub")
    flaky = record(gap, 1, category=FailureCategory.FLAKY_TEST)
    revised = must_plan([gap, second], [flaky])
    assert revised.gap == gap
    assert revised.phases[0].startswith(
        "reproduce in isolation: run `python -m pytest tests/test_calc.py::test_add` alone"
    )
    pytest_checks = [c for c in revised.criteria if c.check == CheckName.PYTEST]
    assert [c.args for c in pytest_checks] == [("tests/test_calc.py::test_add",)]
    assert revised.allowed_paths == ("calc.py", "tests/test_calc.py")
    # the one retry is spent: the next gap goes first
    twice = [flaky, record(gap, 2, category=FailureCategory.FLAKY_TEST)]
    after = must_plan([gap, second], twice)
    assert after.gap == second
    assert any("already retried once after FLAKY_TEST" in n for n in after.notes)


@pytest.mark.parametrize(
    "category",
    [
        FailureCategory.AGENT_TIMEOUT,
        FailureCategory.COMPILATION_ERROR,
        FailureCategory.TEST_TIMEOUT,
        FailureCategory.GROWTH_LIMIT,
        FailureCategory.UNKNOWN,
        None,
    ],
)
def test_anything_else_narrows_scope_and_retries_once(category: FailureCategory | None) -> None:
    gap, other = pytest_gap(), lint_gap()
    fresh = must_plan([gap])
    once = [record(gap, 1, category=category)]
    revised = must_plan([gap, other], once)
    assert revised.gap == gap
    assert set(revised.allowed_paths) < set(fresh.allowed_paths)
    assert revised.budget.max_new_files == 5
    assert revised.estimated_risk == Risk.HIGH
    twice = [*once, record(gap, 2, category=category)]
    assert must_plan([gap, other], twice).gap == other


def test_revised_categories_are_retried_until_the_third_failure() -> None:
    gap, other = pytest_gap(), lint_gap()
    two = [record(gap, s, category=FailureCategory.TYPE_ERROR) for s in (1, 2)]
    assert must_plan([gap, other], two).gap == gap
    three = [*two, record(gap, 3, category=FailureCategory.TYPE_ERROR)]
    assert must_plan([gap, other], three).gap == other


def test_the_gaps_tests_still_failing_keeps_the_scope_and_says_what_the_verifier_saw() -> None:
    gap = pytest_gap()
    fresh = must_plan([gap])
    seen = "criterion failed: these tests pass: tests/test_calc.py::test_add failed: assert 1 == 5"
    attempt = record(gap, 1, category=FailureCategory.GAP_NOT_CLOSED, evidence=[seen])
    revised = must_plan([gap], [attempt])
    assert revised.allowed_paths == fresh.allowed_paths
    assert revised.budget == fresh.budget
    (doc,) = revised.documents
    assert "assert 1 == 5" in doc.text
    assert any("GAP_NOT_CLOSED" in n and "scope as before" in n for n in revised.notes)
    two = [attempt, record(gap, 2, category=FailureCategory.GAP_NOT_CLOSED)]
    assert must_plan([gap, lint_gap()], two).gap == gap  # retried until the third failure


def test_a_crash_does_not_narrow_the_scope_and_quotes_how_the_run_ended() -> None:
    gap, other = pytest_gap(), lint_gap()
    fresh = must_plan([gap])
    crashed = "the agent reported failure (exit 1): RuntimeError: the model is overloaded"
    once = [record(gap, 1, IterationOutcome.FAILURE, FailureCategory.AGENT_ERROR, reason=crashed)]
    revised = must_plan([gap, other], once)
    assert revised.gap == gap
    assert revised.allowed_paths == fresh.allowed_paths
    assert revised.budget == fresh.budget
    assert not any("narrowed" in n for n in revised.notes), revised.notes
    (doc,) = revised.documents
    assert "the model is overloaded" in doc.text
    twice = [*once, record(gap, 2, IterationOutcome.FAILURE, FailureCategory.AGENT_ERROR)]
    assert must_plan([gap, other], twice).gap == other  # retried once
