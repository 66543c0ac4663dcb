"""A run's reservation is held until the ledger counts the run: per run, not per iteration."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from kernel.records import budget


def _paid(history: Path, iteration_id: str, usd: float) -> None:
    entry = budget.LedgerEntry(
        at=datetime.now(UTC), iteration_id=iteration_id, backend="command", cost_usd=usd
    )
    budget.append(history, entry)


def test_a_second_rounds_run_is_held_though_the_first_round_was_paid(tmp_path: Path) -> None:
    _paid(tmp_path, "iter-0001", 0.18)  # round 1, accounted
    # round 2 started: the journal still carries round 1's facts, and this run's own
    journal = {
        "iteration_id": "iter-0001",
        "stage": "agent",
        "backend": "command",
        "reserve_usd": 2.0,
        "accounted": False,
        "ledger_runs": 1,
    }
    assert budget.unsettled(tmp_path, journal) == budget.Held(2.0, "iter-0001", "command")
    _paid(tmp_path, "iter-0001", 0.30)  # killed after the ledger line, before the journal's
    assert budget.unsettled(tmp_path, journal) is None
    assert budget.iteration_cost(tmp_path, "iter-0001") == (0.48, "")


def test_free_backends_hold_nothing_and_unstarted_runs_hold_nothing(tmp_path: Path) -> None:
    free = {
        "iteration_id": "iter-0002",
        "stage": "agent",
        "backend": "ruff-fix",
        "reserve_usd": 2.0,
    }
    assert budget.unsettled(tmp_path, free) == budget.Held(0.0, "iter-0002", "ruff-fix")
    planned = {**free, "backend": "command", "stage": "planned"}
    assert budget.unsettled(tmp_path, planned) is None
    assert budget.unsettled(tmp_path, None) is None
