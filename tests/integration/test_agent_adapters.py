"""Each named adapter drives its fake CLI through `seed.py once`: the fix lands, usage is recorded."""

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
    git,
    make_repo,
    records,
    seed,
)

PRICED = 'model = "openai/fake-model"\n[agent.prices."fake-model"]\ninput = 2.0\noutput = 10.0\n'
"""A model at $2 / $10 per million tokens: 1200 input + 300 output tokens cost $0.0054."""

# backend -> (reported cost, expected cost, cost basis, version the record carries)
CASES = {
    "claude": (0.12, 0.12, "reported", "2.1.330 (Claude Code)"),
    "codex": (None, 0.0054, "prices", "codex-cli 0.169.0"),
    "aider": (0.008, 0.008, "reported", "aider 0.86.2"),
    "mini": (0.02, 0.02, "reported", "mini-swe-agent 2.4.6"),
    "gemini": (None, 0.0054, "prices", "0.61.0"),
    "opencode": (0.03, 0.03, "reported", "1.18.33"),
}


@pytest.mark.parametrize("backend", sorted(CASES))
def test_adapter_fixes_a_failing_test_and_records_its_usage(tmp_path: Path, backend: str) -> None:
    reported, cost, basis, version = CASES[backend]
    repo = make_repo(tmp_path / "repo", BROKEN_ADD, fake_cli_config(backend, PRICED))
    behaviour = {"edits": FIX_ADD, "usage": {"input": 1200, "output": 300, "cost": reported}}
    env = fake_cli_env(tmp_path, behaviour)
    env["SEED_TEST_SECRET"] = "must not reach the agent"

    result = seed(repo, "once", env=env)

    assert result.returncode == 0, result.stderr
    assert "return a + b" in (repo / "calc.py").read_text()
    [record] = records(repo)
    assert record["outcome"] == "SUCCESS" and record["backend"] == backend
    assert record["commit"] == git(repo, "rev-parse", "HEAD").strip()
    assert record["tokens_used"] == 1500
    assert (record["input_tokens"], record["output_tokens"]) == (1200, 300)
    assert record["cost_usd"] == pytest.approx(cost)
    assert record["cost_basis"] == basis
    assert record["agent_version"] == version
    assert record["agent_turns"] > 0
    ledger = [json.loads(line) for line in (repo / "history" / "ledger.jsonl").read_text().split()]
    assert [(e["iteration_id"], e["cost_usd"]) for e in ledger] == [
        (record["iteration_id"], pytest.approx(cost))
    ]
    runs = [t for t in fake_trace(tmp_path) if t["tool"] == backend]
    work = [t for t in runs if "--version" not in t["argv"]]
    assert len(work) == 1
    for run in runs:
        assert run["stdin"] == "devnull" and run["pgid_is_own"]
        assert run["cwd"] != str(repo) and "/seed/wt/" in run["cwd"]
        assert "SEED_TEST_SECRET" not in run["env"]
        assert {"PATH", "HOME", "FAKE_AGENT_SCRIPT"} <= set(run["env"])
    log = repo / "history" / record["iteration_id"] / "agent.log"
    assert log.stat().st_size > 0
