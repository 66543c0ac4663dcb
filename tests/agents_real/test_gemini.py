"""The real Gemini CLI (npm @google/gemini-cli, pinned in package-lock.json) through `seed.py
once`, sandboxed, against a scripted Gemini API server on 127.0.0.1 (`[agent] api_base`
becomes GOOGLE_GEMINI_BASE_URL; ~/.gemini/settings.json selects the API key and the sandbox
shows it in the agent's private HOME)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from modules.agents import gemini
from tests.agents_real.harness import (
    FIXED,
    WRONG,
    Cli,
    ScriptedModel,
    is_ended_at_the_timeout,
    lands_a_fix,
    reports_an_api_error,
    resumes_its_session,
)
from tests.agents_real.model import Turn, call, say, serving
from tests.support import BROKEN_ADD, records

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("bwrap")]

SETTINGS = {
    ".gemini/settings.json": json.dumps({"security": {"auth": {"selectedType": "gemini-api-key"}}})
}
"""What docs/agents.md says a person puts in ~/.gemini/settings.json for api_base."""


def _write(line: str) -> Turn:
    text = BROKEN_ADD["calc.py"].replace("    return a - b\n", line)
    return call("write_file", file_path="calc.py", content=text)


def _same_session(first_log: str, second_log: str, model: ScriptedModel) -> None:
    session = gemini.AGENT.session_of(first_log)
    # gemini sends no session id to the model; the resumed run reports the one it continued
    assert session and gemini.AGENT.session_of(second_log) == session


CLI = Cli(
    backend="gemini",
    fix=[_write(FIXED), say("Fixed add().")],
    wrong_then_right=[_write(WRONG), say("Changed add()."), _write(FIXED), say("Fixed it.")],
    home_files=SETTINGS,
    api_error="gemini exited 145: the model API answered HTTP 401",
    session_evidence=_same_session,
)


def test_gemini_lands_a_fix_and_its_tokens_are_priced(tmp_path: Path) -> None:
    _repo, record, model = lands_a_fix(CLI, tmp_path)
    assert record["agent_version"] == "0.61.0"
    assert record["agent_summary"] == "Fixed add()."
    assert record["agent_model"] == "qwen3-coder"  # one model: -m skips the routing call
    assert {r.path for r in model.requests} == {
        "/v1beta/models/qwen3-coder:streamGenerateContent?alt=sse"
    }
    assert model.requests[0].headers["x-goog-api-key"] == "sk-loopback-test"


def test_gemini_api_error_is_an_agent_error_in_its_own_words(tmp_path: Path) -> None:
    reports_an_api_error(CLI, tmp_path)


def test_gemini_past_its_timeout_is_ended(tmp_path: Path) -> None:
    is_ended_at_the_timeout(CLI, tmp_path)


def test_gemini_repair_round_resumes_its_session(tmp_path: Path) -> None:
    resumes_its_session(CLI, tmp_path)


def test_gemini_without_its_settings_file_names_the_auth_failure(tmp_path: Path) -> None:
    without = dataclasses.replace(CLI, home_files={})
    with serving(CLI.fix) as model:
        repo, result = without.run(tmp_path, without.config(model))
    assert result.returncode == 1
    [record] = records(repo)
    assert (record["outcome"], record["failure_category"]) == ("FAILURE", "AGENT_ERROR")
    assert "gemini exited 41: authentication failed" in record["reason"]
    assert "Invalid auth method selected." in record["reason"]
    assert model.requests == []
