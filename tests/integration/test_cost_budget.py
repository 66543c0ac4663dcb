"""Cost accounting: priced runs land in the record and the ledger; a spent budget stops the next run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import (
    BROKEN_ADD,
    FIX_ADD,
    fake_cli_config,
    fake_cli_env,
    fake_trace,
    make_repo,
    records,
    seed,
)

CONFIG = fake_cli_config(
    "codex",
    'model = "gpt-5-codex"\n'
    '[agent.prices."gpt-5-codex"]\ninput = 2.0\noutput = 10.0\n'
    "[budget]\nmax_cost_usd_per_day = 0.5\n",
)
"""codex reports no cost: 200k input + 20k output tokens at $2 / $10 per million is $0.60."""


def test_a_budget_spent_by_one_iteration_halts_before_the_next_agent_starts(
    tmp_path: Path,
) -> None:
    files = {**BROKEN_ADD, "calc.py": BROKEN_ADD["calc.py"].replace("a * b", "a / b")}
    repo = make_repo(tmp_path / "repo", files, CONFIG)
    behaviour = {"edits": FIX_ADD, "usage": {"input": 200_000, "output": 20_000}}
    env = fake_cli_env(tmp_path, behaviour)

    first = seed(repo, "once", env=env)

    assert first.returncode in (0, 1), first.stderr
    [record] = records(repo)
    assert record["backend"] == "codex" and record["tokens_used"] == 220_000
    assert record["cost_usd"] == pytest.approx(0.6) and record["cost_basis"] == "prices"
    ledger = (repo / "history" / "ledger.jsonl").read_text().splitlines()
    assert [json.loads(line)["cost_usd"] for line in ledger] == [pytest.approx(0.6)]
    work_runs = [t for t in fake_trace(tmp_path) if "exec" in t["argv"]]
    assert len(work_runs) == 1

    second = seed(repo, "once", env=env)

    assert second.returncode == 3, second.stderr
    assert len([t for t in fake_trace(tmp_path) if "exec" in t["argv"]]) == 1
    last = records(repo)[-1]
    assert last["failure_category"] == "BUDGET_EXCEEDED" and last["tokens_used"] == 0
    status = json.loads(seed(repo, "status", "--json", env=env).stdout)
    assert status["halted"] and "$0.60 of $0.50" in status["halt_reason"]
    assert status["cost_today_usd"] == pytest.approx(0.6)
    assert status["backend"] == "codex"

    assert seed(repo, "once", env=env).returncode == 3
    assert len([t for t in fake_trace(tmp_path) if "exec" in t["argv"]]) == 1


def test_a_run_without_a_record_counts_the_same_everywhere_the_spend_is_shown(
    tmp_path: Path,
) -> None:
    """The daemon died after the agent ran: the ledger has the run, no record does. The budget
    check, `status`, the history index and the metrics all show the same spend."""
    from datetime import UTC, datetime

    from domain import DaemonStatus
    from kernel.host.context import open_context
    from kernel.loop import reporting
    from kernel.records import budget
    from kernel.shell import metrics

    repo = make_repo(
        tmp_path / "repo", {"a.py": "x = 1\n"}, "[budget]\nmax_cost_usd_per_day = 1.0\n"
    )
    history = repo / "history"
    history.mkdir()
    budget.append(
        history,
        budget.LedgerEntry(
            at=datetime.now(UTC),
            iteration_id="iter-0001-20260101-000000",
            backend="codex",
            cost_usd=1.5,
        ),
    )
    ctx = open_context(repo, quiet=True)
    try:
        refused = budget.budget_problem(ctx.store, ctx.config.budget)
        assert refused.startswith("spent $1.50 of $1.00")
        status = DaemonStatus.model_validate_json(seed(repo, "status", "--json").stdout)
        assert status.cost_today_usd == 1.5 and status.budget_left_today_usd == 0.0
        assert reporting.digest(ctx).totals.cost_today_usd == 1.5
        index = reporting.write_index(ctx).read_text()
        assert "| $1.50 of $1.00 (0 of 100 runs on" in index
        shown = metrics.snapshot(ctx, {}, "idle")
        assert shown.cost_today_usd == 1.5 and shown.budget_left_today_usd == 0.0
    finally:
        ctx.host.stop()
        ctx.store.close()
