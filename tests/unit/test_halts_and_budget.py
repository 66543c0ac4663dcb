"""Halt conditions, the persisted halt state, the cost ledger and the daemon lock."""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from domain import FailureCategory, IterationOutcome
from kernel.config import BudgetConfig
from kernel.errors import LockHeld
from kernel.isolation.daemonlock import DaemonLock
from kernel.records import halt
from kernel.records.budget import LedgerEntry, append, budget_problem, reservation
from kernel.records.store import RecordStore
from tests.unit.factories import T0, gap, record

A, B, C = gap("ruff:a.py:F401"), gap("ruff:b.py:F401"), gap("ruff:c.py:F401")
FAIL = IterationOutcome.FAILURE


@pytest.mark.parametrize(
    "category", [FailureCategory.SANDBOX_VIOLATION, FailureCategory.BUDGET_EXCEEDED]
)
def test_a_sandbox_violation_and_a_spent_budget_halt_at_once(category: FailureCategory) -> None:
    r = record(A, 1, IterationOutcome.ROLLBACK, category)
    assert halt.halt_reason(r, [r]).startswith(f"{category.value} in {r.iteration_id}")


REPEATING = [
    FailureCategory.HYGIENE_VIOLATION,
    FailureCategory.ALLOWLIST_VIOLATION,
    FailureCategory.GROWTH_LIMIT,
    FailureCategory.RUN_LIMIT,
]


@pytest.mark.parametrize("category", REPEATING)
def test_hygiene_allowlist_growth_and_run_limits_halt_only_on_the_third_in_a_utc_day(
    category: FailureCategory,
) -> None:
    rollback = IterationOutcome.ROLLBACK
    day = [record(g, i, rollback, category) for i, g in enumerate((A, A, A), start=1)]
    assert halt.halt_reason(day[0], day[:1]) == ""
    assert halt.halt_reason(day[1], day[:2]) == ""
    reason = halt.halt_reason(day[2], day)
    assert reason.startswith(f"{category.value} 3 times on {T0.date().isoformat()} (UTC)")
    assert day[2].iteration_id in reason


@pytest.mark.parametrize("category", REPEATING)
def test_repeats_on_another_day_or_before_a_resume_do_not_count(
    category: FailureCategory,
) -> None:
    rollback = IterationOutcome.ROLLBACK
    yesterday = T0 - timedelta(days=1)
    old = [record(A, i, rollback, category, ended=yesterday) for i in (1, 2)]
    today = record(A, 3, rollback, category)
    assert halt.halt_reason(today, [*old, today]) == ""
    same_day = [record(A, i, rollback, category) for i in (1, 2)]
    resumed = (same_day[-1].ended_at + timedelta(seconds=1)).isoformat()
    assert halt.halt_reason(today, [*same_day, today], resumed) == ""
    other = record(A, 2, rollback, REPEATING[(REPEATING.index(category) + 1) % 3])
    assert halt.halt_reason(today, [same_day[0], other, today]) == ""


@pytest.mark.parametrize(
    "category",
    [FailureCategory.AGENT_ERROR, FailureCategory.AGENT_TIMEOUT, FailureCategory.TEST_REGRESSION],
)
def test_a_single_ordinary_failure_does_not_halt(category: FailureCategory) -> None:
    r = record(A, 1, FAIL, category)
    assert halt.halt_reason(r, [r]) == ""


def test_three_consecutive_failures_across_gaps_halt() -> None:
    history = [record(A, 1), record(B, 2), record(C, 3)]
    reason = halt.halt_reason(history[-1], history)
    assert reason.startswith("3 consecutive failures across 3 different gaps")
    assert all(r.iteration_id in reason for r in history)


def test_two_gaps_in_three_failures_are_no_halt_and_one_gap_is_quarantine_not_halt() -> None:
    two = [record(A, 1), record(A, 2), record(B, 3)]
    assert halt.halt_reason(two[-1], two) == ""
    one = [record(A, 1), record(A, 2), record(A, 3)]
    assert halt.halt_reason(one[-1], one) == ""


def test_a_success_waiting_or_aborted_iteration_breaks_or_skips_the_streak() -> None:
    success = [
        record(A, 1),
        record(B, 2, IterationOutcome.SUCCESS, None),
        record(C, 3),
    ]
    assert halt.halt_reason(success[-1], success) == ""
    skipped = [
        record(A, 1),
        record(B, 2, IterationOutcome.WAITING, None),
        record(B, 3, IterationOutcome.ABORTED, None),
        record(B, 4, IterationOutcome.NO_CHANGE, None),
        record(C, 5),
    ]
    assert "consecutive failures" in halt.halt_reason(skipped[-1], skipped)


def test_a_resume_starts_the_streak_again() -> None:
    history = [record(A, 1), record(B, 2), record(C, 3)]
    resumed = (history[1].ended_at + timedelta(seconds=1)).isoformat()
    assert halt.halt_reason(history[-1], history, resumed) == ""


def test_a_flaky_streak_of_three_halts() -> None:
    flaky = [record(A, n, IterationOutcome.ROLLBACK, FailureCategory.FLAKY_TEST) for n in (1, 2, 3)]
    assert halt.halt_reason(flaky[-1], flaky).startswith("a flaky streak of 3")
    two = flaky[1:]
    assert halt.halt_reason(two[-1], two) == ""


def test_halt_state_survives_and_only_resume_clears_it(tmp_path: Path) -> None:
    store = RecordStore(tmp_path)
    assert not halt.read_halt(tmp_path).halted
    halt.halt(store, "first reason", "SANDBOX_VIOLATION", "iter-0001-20260101-120000")
    halt.halt(store, "second reason", "GROWTH_LIMIT")
    state = halt.read_halt(tmp_path)  # a fresh read, as after a restart
    assert state.halted and state.reason == "first reason" and state.category == "SANDBOX_VIOLATION"
    was = halt.resume(store)
    assert was.reason == "first reason"
    after = halt.read_halt(tmp_path)
    assert not after.halted and after.resumed_at
    kinds = [e.kind for e in store.events()]
    assert kinds == ["halt", "halt", "resume"]
    # a resume of a daemon that is not halted is no event (the dashboard lists events)
    assert not halt.resume(store).halted
    assert [e.kind for e in store.events()] == kinds
    assert halt.read_halt(tmp_path).resumed_at == after.resumed_at


def test_an_unreadable_halt_file_counts_as_halted(tmp_path: Path) -> None:
    (tmp_path / halt.HALT_FILE).write_text("{not json")
    state = halt.read_halt(tmp_path)
    assert state.halted and "unreadable" in state.reason and "resume" in state.reason
    halt.resume(RecordStore(tmp_path))
    assert not halt.read_halt(tmp_path).halted


def _run(history: Path, cost: float, at: datetime = T0) -> None:
    append(
        history,
        LedgerEntry(at=at, iteration_id=f"i{cost}", backend="command", cost_usd=cost),
    )


def test_a_run_reserves_its_cap_or_the_days_if_smaller() -> None:
    assert reservation(BudgetConfig(max_cost_usd_per_day=10.0), 2.0) == 2.0
    assert reservation(BudgetConfig(max_cost_usd_per_day=0.5), 2.0) == 0.5
    assert reservation(BudgetConfig(max_cost_usd_per_day=0.0), 2.0) == 2.0
    assert reservation(BudgetConfig(max_cost_usd_per_day=0.0), 0.0) == 0.0


def test_budget_is_checked_before_the_money_is_spent(tmp_path: Path) -> None:
    store = RecordStore(tmp_path)
    budget = BudgetConfig(max_cost_usd_per_day=3.0, max_cost_usd_per_iteration=2.0)
    assert budget_problem(store, budget, T0, reserve_usd=2.0) == ""
    _run(tmp_path, 1.5)
    problem = budget_problem(store, budget, T0, reserve_usd=2.0)
    assert "may cost up to $2.00" in problem and "$1.50 of $3.00 is left" in problem
    assert budget_problem(store, budget, T0, reserve_usd=1.0) == ""
    _run(tmp_path, 1.6)
    assert "spent $3.10 of $3.00" in budget_problem(store, budget, T0, reserve_usd=0.0)
    unlimited = BudgetConfig(max_cost_usd_per_day=0, max_iterations_per_day=0)
    assert budget_problem(store, unlimited, T0, reserve_usd=5.0) == ""
    store.close()


def test_the_day_run_cap_counts_iterations(tmp_path: Path) -> None:
    store = RecordStore(tmp_path)
    for seq in (1, 2, 3):
        store.append(record(gap(f"ruff:f{seq}.py:F401"), seq))
    runs = BudgetConfig(max_iterations_per_day=3)
    day = record(A, 1).ended_at
    assert "ran 3 of 3 iterations" in budget_problem(store, runs, day)
    store.close()


def test_a_second_lock_names_the_holder(tmp_path: Path) -> None:
    first = DaemonLock(tmp_path / "daemon.lock")
    first.acquire()
    try:
        with pytest.raises(LockHeld, match=f"pid {os.getpid()}"):
            DaemonLock(tmp_path / "daemon.lock").acquire()
    finally:
        first.release()
    again = DaemonLock(tmp_path / "daemon.lock")
    again.acquire()
    again.release()
