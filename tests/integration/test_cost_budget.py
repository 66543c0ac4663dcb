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
