"""Memory: decayed success rates per task kind and repository order ties and set risk."""

from __future__ import annotations

import pytest

from domain import Risk, TaskKind
from modules.planner.actions import task_kind
from modules.planner.memory import rate, risk_floor
from modules.planner.tests.factory import (
    NOW,
    inbox_gap,
    lint_gap,
    must_plan,
    pytest_gap,
    roadmap_gap,
    state,
    tally,
)


def test_each_outcome_weighs_0_95_to_the_power_of_its_age_in_days() -> None:
    today = rate([tally("fix_lint", "2025-03-14", 1, 0)], TaskKind.FIX_LINT, "abc123", NOW)
    assert today.total == pytest.approx(1.0)
    old = rate([tally("fix_lint", "2025-02-12", 0, 1)], TaskKind.FIX_LINT, "abc123", NOW)
    assert old.total == pytest.approx(0.95**30)
    mixed = rate(
        [tally("fix_lint", "2025-03-14", 2, 0), tally("fix_lint", "2025-03-04", 0, 2)],
        TaskKind.FIX_LINT,
        "abc123",
        NOW,
    )
    assert mixed.successes == pytest.approx(2.0)
    assert mixed.total == pytest.approx(2 + 2 * 0.95**10)
    assert mixed.value == pytest.approx((2 + 1) / (2 + 2 * 0.95**10 + 2))


def test_rates_are_per_kind_and_repository_with_other_repositories_as_fallback() -> None:
    tallies = [
        tally("fix_lint", "2025-03-14", 0, 5, fp="other"),
        tally("fix_test", "2025-03-14", 5, 0),
    ]
    assert rate(tallies, TaskKind.FIX_TEST, "abc123", NOW).value > 0.8
    assert rate(tallies, TaskKind.FIX_LINT, "abc123", NOW).value < 0.2  # fallback
    assert rate(tallies, TaskKind.FEATURE, "abc123", NOW).value == 0.5
    mine = [*tallies, tally("fix_lint", "2025-03-14", 3, 0)]
    assert rate(mine, TaskKind.FIX_LINT, "abc123", NOW).value == pytest.approx(4 / 5)


def test_memory_orders_gaps_only_within_one_group_of_the_ranking() -> None:
    feature = roadmap_gap("Implement the report module", line=3)
    fix = roadmap_gap("Refactor calc.py into smaller functions", line=5)
    assert task_kind(feature) != task_kind(fix)
    gaps = [feature, fix]  # one group (the roadmap), the report ranks the feature first
    assert must_plan(gaps).gap == feature
    good, bad = task_kind(fix).value, task_kind(feature).value
    history = state(tallies=(tally(bad, "2025-03-13", 0, 6), tally(good, "2025-03-13", 6, 0)))
    chosen = must_plan(gaps, st=history)
    assert chosen.gap == fix
    assert any(n.startswith(f"memory: {good} succeeded") for n in chosen.notes)
    # the plan says which higher-ranked gap it passed over, and why
    assert any(
        n.startswith(f"skipped {feature.key}: memory takes {fix.key} first") for n in chosen.notes
    )


def test_memory_never_moves_a_gap_past_another_group_nor_a_persons_task() -> None:
    failing = pytest_gap()
    lint = lint_gap("calc.py", "E999", "ruff").model_copy(update={"severity": failing.severity})
    history = state(
        tallies=(tally("fix_test", "2025-03-13", 0, 6), tally("fix_lint", "2025-03-13", 6, 0))
    )
    assert must_plan([failing, lint], st=history).gap == failing
    task = inbox_gap()
    normal = lint_gap().model_copy(update={"severity": task.severity})
    learnt = state(tallies=(tally("fix_lint", "2025-03-13", 9, 0),))
    assert must_plan([task, normal], st=learnt).gap == task


def test_memory_never_reorders_across_severities() -> None:
    failing, inbox = pytest_gap(), inbox_gap()
    history = state(
        tallies=(tally("fix_test", "2025-03-13", 0, 9), tally("feature", "2025-03-13", 9, 0))
    )
    assert must_plan([failing, inbox], st=history).gap == failing


def test_a_kind_that_often_failed_raises_risk_and_never_lowers_it() -> None:
    gap = inbox_gap(allowed=["tests/test_new.py"])
    assert must_plan([gap]).estimated_risk == Risk.LOW
    poor = state(tallies=(tally("feature", "2025-03-13", 0, 5),))
    assert must_plan([gap], st=poor).estimated_risk == Risk.HIGH
    middling = state(tallies=(tally("feature", "2025-03-13", 2, 2),))
    assert must_plan([gap], st=middling).estimated_risk == Risk.MEDIUM
    good = state(tallies=(tally("feature", "2025-03-13", 9, 0),))
    domain = inbox_gap(allowed=["domain/models.py"])
    assert must_plan([domain], st=good).estimated_risk == Risk.HIGH


def test_little_or_old_evidence_does_not_move_risk() -> None:
    from modules.planner.memory import Rate

    assert risk_floor(Rate(0.0, 2.0)) == Risk.LOW
    ancient = [tally("feature", "2023-01-01", 0, 50)]
    assert risk_floor(rate(ancient, TaskKind.FEATURE, "abc123", NOW)) == Risk.LOW
