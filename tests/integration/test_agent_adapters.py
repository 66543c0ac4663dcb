"""Each named adapter, configured as docs/agents.md shows, drives its fake CLI through `once`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import tomli_w

from tests.support import (
    BROKEN_ADD,
    FIX_ADD,
    agent_checkouts,
    docs_example,
    fake_cli_env,
    fake_trace,
    git,
    make_repo,
    records,
    seed,
)

# backend -> (cost the fake reports, version the record carries)
CASES = {
    "claude": (0.12, "2.1.330 (Claude Code)"),
    "codex": (None, "codex-cli 0.169.0"),
    "aider": (0.008, "aider 0.86.2"),
    "mini": (0.02, "mini-swe-agent 2.4.6"),
    "gemini": (None, "0.61.0"),
    "opencode": (0.03, "1.18.33"),
}


def example_config(backend: str) -> tuple[str, float, str]:
    """docs/agents.md's example for the backend with the fakes' variables added; its price for the run."""
    document = docs_example(backend)
    agent = document["agent"]
    assert agent["backend"] == backend
    agent["env"] = [*agent.get("env", []), "FAKE_AGENT_SCRIPT", "FAKE_AGENT_TRACE"]
    # a fake asks no model: its reported usage is the run's, not the wire's (tests/agents_real
    # runs the real tools model-only); with full, [agent] keys pass through as env does
    agent["network"] = "full"
    price = agent.get("prices", {}).get(agent.get("model", ""))
    if price is None:
        return tomli_w.dumps(document), 0.0, "none"
    return tomli_w.dumps(document), (1200 * price["input"] + 300 * price["output"]) / 1e6, "prices"


@pytest.mark.parametrize("backend", sorted(CASES))
def test_adapter_fixes_a_failing_test_and_records_its_usage(tmp_path: Path, backend: str) -> None:
    reported, version = CASES[backend]
    config, priced, basis = example_config(backend)
    cost = reported if reported is not None else priced
    basis = "reported" if reported is not None else basis
    repo = make_repo(tmp_path / "repo", BROKEN_ADD, config)
    behaviour = {"edits": FIX_ADD, "usage": {"input": 1200, "output": 300, "cost": reported}}
    env = fake_cli_env(tmp_path, behaviour)
    keys = docs_example(backend)["agent"].get("keys", [])
    env.update({name: "test-key" for name in keys})
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
        assert run["cwd"] != str(repo)
        # the work runs in the agent's own checkout; the version check in no folder a run wrote
        inside = run["cwd"].startswith(str(agent_checkouts(repo)) + "/")
        assert inside if run in work else run["cwd"] == "/"
        assert "SEED_TEST_SECRET" not in run["env"]
        assert {"PATH", "HOME", "FAKE_AGENT_SCRIPT", *keys} <= set(run["env"])
    folder = repo / "history" / record["iteration_id"]
    assert (folder / "agent.log").stat().st_size > 0
    assert record["agent_note"]  # what the record must know about the tool (e.g. aider's exit 0)
    assert f"({basis})" in (folder / "report.md").read_text()


def test_a_log_cut_at_its_cap_still_yields_the_usage_from_the_tail(tmp_path: Path) -> None:
    config = tomli_w.dumps(
        {
            "agent": {
                "backend": "opencode",
                "max_log_bytes": 2048,
                "env": ["FAKE_AGENT_SCRIPT", "FAKE_AGENT_TRACE"],
            }
        }
    )
    repo = make_repo(tmp_path / "repo", BROKEN_ADD, config)
    behaviour = {"edits": FIX_ADD, "usage": {"cost": 0.03}, "noise_lines": 5000}

    result = seed(repo, "once", env=fake_cli_env(tmp_path, behaviour))

    assert result.returncode == 0, result.stderr
    [record] = records(repo)
    log = (repo / "history" / record["iteration_id"] / "agent.log").read_bytes()
    assert len(log) < 2048 + 200 and b"[seed: output cut at 2048 bytes" in log
    assert record["cost_usd"] == pytest.approx(0.03) and record["tokens_used"] == 1500
