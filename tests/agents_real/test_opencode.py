"""The real opencode (npm opencode-ai, pinned in package-lock.json) through `seed.py once`,
sandboxed, against a scripted OpenAI chat-completions server on 127.0.0.1 (`[agent] api_base`
becomes a provider in OPENCODE_CONFIG_CONTENT)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from modules.agents import opencode
from tests.agents_real.harness import (
    Cli,
    ScriptedModel,
    is_ended_at_the_timeout,
    lands_a_fix,
    reports_an_api_error,
    resumes_its_session,
)
from tests.agents_real.model import Turn, call, say

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("bwrap")]


def _shell(command: str) -> Turn:
    return call("bash", command=command, description="edit calc.py")


def _same_session(first_log: str, second_log: str, model: ScriptedModel) -> None:
    session = opencode.AGENT.session_of(first_log)
    assert session.startswith("ses_")
    assert opencode.AGENT.session_of(second_log) == session


CLI = Cli(
    backend="opencode",
    fix=[_shell("sed -i 's/return a - b/return a + b/' calc.py"), say("Fixed add().")],
    wrong_then_right=[
        _shell("sed -i 's/return a - b/return b - a/' calc.py"),
        say("Changed add()."),
        _shell("sed -i 's/return b - a/return a + b/' calc.py"),
        say("Fixed add() for real."),
    ],
    session_evidence=_same_session,
)


def test_opencode_lands_a_fix_and_its_tokens_are_priced(tmp_path: Path) -> None:
    repo, record, model = lands_a_fix(CLI, tmp_path)
    assert record["agent_version"] == "1.18.33"
    assert record["agent_summary"] == "Fixed add()."
    assert record["agent_turns"] == 2  # one step_finish per model call
    assert {r.path for r in model.requests} == {"/v1/chat/completions"}
    assert all(r.body["model"] == "qwen3-coder" for r in model.requests)
    assert model.requests[0].headers["authorization"] == "Bearer sk-loopback-test"
    # the title call has no tools and is not the script's: it is not in the record's usage
    log = (repo / "history" / record["iteration_id"] / "agent.log").read_text()
    steps = [json.loads(line) for line in log.splitlines() if '"step_finish"' in line]
    assert [s["part"]["cost"] for s in steps] == [0, 0]  # unpriced: [agent.prices] applies


def test_opencode_api_error_is_an_agent_error_in_its_own_words(tmp_path: Path) -> None:
    reports_an_api_error(CLI, tmp_path)


def test_opencode_past_its_timeout_is_ended(tmp_path: Path) -> None:
    is_ended_at_the_timeout(CLI, tmp_path)


def test_opencode_repair_round_resumes_its_session(tmp_path: Path) -> None:
    resumes_its_session(CLI, tmp_path)
