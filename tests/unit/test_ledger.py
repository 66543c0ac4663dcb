"""The spend ledger and the pricing table."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from domain import AgentReport
from kernel.config import BudgetConfig, ModelPrice
from kernel.records.budget import (
    LedgerEntry,
    append,
    budget_problem,
    day_spend,
    ledger_path,
    price_run,
)
from kernel.records.store import RecordStore


def entry(at: datetime, cost: float, tokens: int = 100) -> LedgerEntry:
    return LedgerEntry(
        at=at,
        iteration_id="iter-0001-20260101-000000",
        backend="codex",
        cost_usd=cost,
        tokens_used=tokens,
    )


def test_a_run_without_a_record_still_counts_against_the_day_budget(tmp_path: Path) -> None:
    store = RecordStore(tmp_path / "history")
    now = datetime(2026, 3, 4, 12, tzinfo=UTC)
    append(store.history, entry(now - timedelta(days=1), 5.0))
    append(store.history, entry(now - timedelta(hours=1), 0.7, 500))
    budget = BudgetConfig(max_cost_usd_per_day=1.0)
    assert budget_problem(store, budget, now) == ""

    append(store.history, entry(now, 0.4, 300))

    spend = day_spend(store.history, "2026-03-04")
    assert (spend.cost_usd, spend.tokens, spend.runs) == (pytest.approx(1.1), 800, 2)
    assert "spent $1.10 of $1.00" in budget_problem(store, budget, now)


def test_a_torn_last_line_loses_only_itself(tmp_path: Path) -> None:
    history = tmp_path / "history"
    now = datetime.now(UTC)
    append(history, entry(now, 0.25))
    with ledger_path(history).open("a") as handle:
        handle.write('{"at": "2026-')  # a crash mid-write
    append(history, entry(now, 0.5))
    assert day_spend(history, now.date().isoformat()).cost_usd == pytest.approx(0.75)


def test_many_days_are_read_from_the_end(tmp_path: Path) -> None:
    history = tmp_path / "history"
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for n in range(400):
        append(history, entry(start + timedelta(hours=6 * n), 0.01))
    last = (start + timedelta(hours=6 * 399)).date().isoformat()
    assert day_spend(history, last).runs == 4
    assert day_spend(history, "2026-01-01").runs == 4


PRICE = {"gpt-5": ModelPrice(input=1.25, output=10.0, cached_input=0.125)}


def test_unreported_cost_is_priced_from_the_table() -> None:
    report = AgentReport(
        success=True,
        tokens_used=1_100_000,
        input_tokens=1_000_000,
        output_tokens=100_000,
        cached_tokens=800_000,
        model="openai/gpt-5",
    )
    priced, basis = price_run(report, PRICE, "")
    assert basis == "prices"
    assert priced.cost_usd == pytest.approx(0.2 * 1.25 + 0.8 * 0.125 + 0.1 * 10.0)


def test_reported_cost_wins_and_unknown_models_stay_unpriced() -> None:
    reported = AgentReport(success=True, tokens_used=10, input_tokens=10, cost_usd=0.3)
    assert price_run(reported, PRICE, "gpt-5") == (reported, "reported")
    unknown = AgentReport(success=True, tokens_used=10, input_tokens=10, model="other")
    assert price_run(unknown, PRICE, "") == (unknown, "none")
    star = {"*": ModelPrice(input=1.0, output=1.0)}
    assert price_run(unknown, star, "")[1] == "prices"


def test_tokens_the_tool_did_not_split_are_charged_at_the_dearer_rate() -> None:
    report = AgentReport(success=True, tokens_used=1_000_000)
    priced, _ = price_run(report, PRICE, "gpt-5")
    assert priced.cost_usd == pytest.approx(10.0)
