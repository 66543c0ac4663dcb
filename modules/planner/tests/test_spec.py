"""The eight test requirements of the planner specification, and its edge cases."""

from __future__ import annotations

import re

from domain import (
    ITERATION_ID_PATTERN,
    ActionType,
    CheckName,
    GapReport,
    IterationOutcome,
    Risk,
    TaskKind,
)
from modules.planner import PLANNER
from modules.planner.tests.factory import (
    inbox_gap,
    lint_gap,
    must_plan,
    plan,
    pytest_gap,
    record,
    roadmap_gap,
    state,
)


def test_no_gaps_gives_no_plan() -> None:
    assert plan([]) is None
    assert PLANNER.plan(GapReport(), [], state()) is None


def test_one_roadmap_gap_gives_a_valid_plan() -> None:
    gap = roadmap_gap("Implement the planner module's memory")
    result = must_plan([gap])
    assert result.gap == gap
    assert result.actions
    assert result.actions[0].target_files == ("modules/planner/",)
    assert result.actions[0].action_type == ActionType.MODIFY
    assert "modules/planner/**" in result.allowed_paths
    # the plan survives the trip through JSON the module host makes
    assert type(result).model_validate_json(result.model_dump_json()) == result


def test_quality_gap_targets_the_files_in_its_evidence() -> None:
    gap = lint_gap("calc.py", "F401")
    result = must_plan([gap])
    assert result.actions[0].action_type == ActionType.MODIFY
    assert result.actions[0].target_files == ("calc.py",)
    assert result.actions[0].description == "Fix the ruff failures quoted below"


def test_actions_on_protected_files_are_removed() -> None:
    gap = inbox_gap(allowed=["seed.py", "calc.py", "kernel/judging/guard.py"])
    result = must_plan([gap])
    planned = [f for a in result.actions for f in a.target_files]
    assert planned == ["calc.py"]
    assert "seed.py" not in result.allowed_paths
    assert "kernel/judging/guard.py" not in result.allowed_paths


def test_a_gap_whose_every_file_is_protected_is_not_planned() -> None:
    only = lint_gap("seed.py", "F401")
    assert plan([only]) is None
    configured = lint_gap("vendor/lib.py", "F401")
    assert plan([configured], st=state(protected=("vendor/**",))) is None
    # with another gap behind it, that one is planned and the skip is explained
    result = must_plan([only, lint_gap("calc.py", "E501")])
    assert result.gap.key == "ruff:calc.py:E501"
    assert "skipped ruff:seed.py:F401: every file it names is protected" in result.notes


def test_a_gap_that_failed_three_times_in_a_row_is_skipped_for_the_next() -> None:
    first, second = pytest_gap(), lint_gap()
    history = [record(first, seq) for seq in (1, 2, 3)]
    result = must_plan([first, second], history)
    assert result.gap == second
    assert any(n.startswith(f"skipped {first.key}: failed 3 times in a row") for n in result.notes)
    # two failures are not enough to skip it
    assert must_plan([first, second], history[:2]).gap == first


def test_a_success_breaks_the_streak() -> None:
    first, second = pytest_gap(), lint_gap()
    history = [
        record(first, 1),
        record(first, 2),
        record(first, 3, IterationOutcome.SUCCESS),
        record(first, 4),
    ]
    assert must_plan([first, second], history).gap == first


def test_waiting_and_aborted_records_neither_fail_nor_clear_a_gap() -> None:
    first, second = pytest_gap(), lint_gap()
    history = [
        record(first, 1),
        record(first, 2, IterationOutcome.WAITING, None),
        record(first, 3),
        record(first, 4, IterationOutcome.ABORTED, None),
        record(first, 5),
    ]
    assert must_plan([first, second], history).gap == second


def test_only_the_last_five_attempts_are_looked_at() -> None:
    first, second = pytest_gap(), lint_gap()
    history = [record(first, seq) for seq in range(1, 9)]
    result = must_plan([first, second], history)
    assert result.gap == second
    assert f"skipped {first.key}: failed 5 times in a row (latest {history[-1].iteration_id})" in (
        result.notes
    )


def test_risk_new_files_low_domain_high_source_medium() -> None:
    new_files = inbox_gap(allowed=["newpkg/feature.py", "tests/test_feature.py"])
    assert must_plan([new_files]).estimated_risk == Risk.LOW
    domain = inbox_gap(allowed=["domain/models.py"])
    assert must_plan([domain]).estimated_risk == Risk.HIGH
    source = inbox_gap(allowed=["calc.py"])
    assert must_plan([source]).estimated_risk == Risk.MEDIUM
    tests_only = inbox_gap(allowed=["tests/test_calc.py"])
    assert must_plan([tests_only]).estimated_risk == Risk.LOW


def test_a_gap_that_failed_before_is_high_risk() -> None:
    gap = lint_gap()
    assert must_plan([gap]).estimated_risk == Risk.MEDIUM
    assert must_plan([gap], [record(gap, 1)]).estimated_risk == Risk.HIGH


def test_iteration_id_comes_from_the_kernels_sequence_and_time() -> None:
    result = must_plan([lint_gap()], st=state(next_sequence=12345))
    assert re.match(ITERATION_ID_PATTERN, result.iteration_id)
    assert result.iteration_id == "iter-12345-20250314-092653"
    assert must_plan([lint_gap()]).iteration_id == "iter-0007-20250314-092653"


def test_criteria_always_include_ruff_and_pyright() -> None:
    for gap in (
        pytest_gap(),
        lint_gap(),
        lint_gap(source="pyright", rule="reportGeneralTypeIssues"),
        inbox_gap(),
        roadmap_gap(),
    ):
        checks = {c.check for c in must_plan([gap]).criteria}
        assert {CheckName.RUFF, CheckName.PYRIGHT, CheckName.GAP_CLOSED} <= checks, gap.key
        assert all(c.text for c in must_plan([gap]).criteria)


def test_all_gaps_exhausted_plans_the_most_critical_at_high_risk_with_a_warning() -> None:
    first, second = pytest_gap(), lint_gap()
    history = [record(first, s) for s in (1, 2, 3)] + [record(second, s) for s in (4, 5, 6)]
    result = must_plan([first, second], history)
    assert result.gap == first
    assert result.estimated_risk == Risk.HIGH
    assert result.actions[0].description.startswith("WARNING: this gap is exhausted")
    assert "failed 3 times in a row" in result.actions[0].description


def test_empty_history_skips_the_failure_check() -> None:
    result = must_plan([pytest_gap()], [])
    assert result.history == ()
    assert result.estimated_risk == Risk.MEDIUM


def test_a_description_that_maps_to_no_files_gives_one_create_action_with_no_targets() -> None:
    result = must_plan([inbox_gap(title="Make startup faster", body="It is slow.")])
    assert len(result.actions) == 1
    assert result.actions[0].action_type == ActionType.CREATE
    assert result.actions[0].target_files == ()
    assert result.allowed_paths == ()  # the kernel lets it touch any non-protected file


def test_quarantined_gaps_are_never_planned() -> None:
    gap = lint_gap()
    assert plan([gap], st=state(quarantined=(gap.key,))) is None


def test_roadmap_verbs_map_to_actions() -> None:
    create = must_plan([roadmap_gap("Create the domain models for budgets")])
    assert create.actions[0].action_type == ActionType.CREATE
    assert create.actions[0].target_files == ("domain/",)
    assert create.estimated_risk == Risk.HIGH
    assert "tests/**" in create.allowed_paths
    tests = must_plan([roadmap_gap("Tests for the planner module")])
    assert tests.actions[0].action_type == ActionType.CREATE
    assert tests.actions[0].target_files == ("modules/planner/tests/",)
    passes_gap = roadmap_gap("All code passes pyright strict")
    typed = lint_gap("calc.py", "reportX", "pyright")
    lint = lint_gap("tests/test_calc.py", "F401")
    passes = must_plan([passes_gap, typed, lint])
    assert passes.gap == passes_gap
    assert passes.task_kind == TaskKind.FIX_TYPES
    assert passes.actions[0].action_type == ActionType.MODIFY
    assert passes.actions[0].target_files == ("calc.py",)
