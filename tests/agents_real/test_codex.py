"""The real Codex CLI (npm @openai/codex, pinned in package-lock.json) through `seed.py once`,
sandboxed, against a scripted OpenAI Responses API server on 127.0.0.1 (`[agent] api_base`
becomes a model provider entry: codex ignores OPENAI_BASE_URL)."""

from __future__ import annotations

from pathlib import Path

import pytest

from modules.agents import codex
from tests.agents_real.harness import (
    Cli,
    ScriptedModel,
    is_ended_at_the_timeout,
    lands_a_fix,
    program,
    reports_an_api_error,
    resumes_its_session,
)
from tests.agents_real.model import Turn, call, say, serving
from tests.support import records

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("bwrap")]


def _shell(command: str) -> Turn:
    return call("exec_command", cmd=command)


def _same_thread(first_log: str, second_log: str, model: ScriptedModel) -> None:
    thread = codex.AGENT.session_of(first_log)
    assert thread
    # a resumed thread keeps its id: codex keys its prompt cache and its session header by it
    later = model.answered()[-1]
    assert thread in str(later.headers) + str(later.body.get("prompt_cache_key"))


CLI = Cli(
    backend="codex",
    fix=[_shell("sed -i 's/return a - b/return a + b/' calc.py"), say("Fixed add().")],
    wrong_then_right=[
        _shell("sed -i 's/return a - b/return b - a/' calc.py"),
        say("Changed add()."),
        _shell("sed -i 's/return b - a/return a + b/' calc.py"),
        say("Fixed add() for real."),
    ],
    api_error="codex: turn.failed: unexpected status 401 Unauthorized",
    session_evidence=_same_thread,
)


def test_codex_lands_a_fix_and_its_tokens_are_priced(tmp_path: Path) -> None:
    _repo, record, model = lands_a_fix(CLI, tmp_path)
    assert record["agent_version"] == "codex-cli 0.169.0"  # no warning line kept
    assert record["agent_summary"] == "Fixed add()."
    first = model.requests[0]
    assert first.path == "/v1/responses" and first.body["model"] == "qwen3-coder"
    assert first.headers["authorization"] == "Bearer sk-loopback-test"
    assert record["agent_turns"] == 1  # one command_execution


def test_codex_api_error_is_an_agent_error_in_its_own_words(tmp_path: Path) -> None:
    reports_an_api_error(CLI, tmp_path)


def test_codex_past_its_timeout_is_ended(tmp_path: Path) -> None:
    is_ended_at_the_timeout(CLI, tmp_path)


def test_codex_repair_round_resumes_its_thread(tmp_path: Path) -> None:
    resumes_its_session(CLI, tmp_path)


def test_codex_unsandboxed_with_home_under_tmp_waits_before_it_spends(tmp_path: Path) -> None:
    # with seed's sandbox off codex runs its own, whose helper is not found while HOME is
    # under /tmp (the harness's HOME is): seed says so instead of paying for the run
    program("codex")
    assert str(tmp_path).startswith("/tmp/")
    with serving(CLI.fix) as model:
        repo, result = CLI.run(tmp_path, CLI.config(model) + '\n[guard]\nsandbox = "off"\n')
        asked = len(model.requests)
    said = result.stdout + result.stderr
    assert result.returncode == 5, said[-3000:]
    assert asked == 0  # nothing spent
    [record] = records(repo)
    assert record["outcome"] == "WAITING" and "codex-linux-sandbox" in record["reason"]
    assert "codex-linux-sandbox" in said
