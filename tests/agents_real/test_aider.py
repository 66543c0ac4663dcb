"""The real Aider (PyPI aider-chat, pinned in requirements-aider.lock) through `seed.py once`,
sandboxed, against a scripted OpenAI chat-completions server on 127.0.0.1 (`[agent] api_base`
becomes --openai-api-base, with --edit-format diff)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.agents_real.harness import (
    Cli,
    ScriptedModel,
    is_ended_at_the_timeout,
    lands_a_fix,
    reports_an_api_error,
    resumes_its_session,
    text_of,
)
from tests.agents_real.model import SIDE_TEXT, say

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("bwrap")]


def _replace(old: str, new: str, words: str) -> str:
    """An answer in aider's diff edit format (one SEARCH/REPLACE block)."""
    block = f"calc.py\n```python\n<<<<<<< SEARCH\n{old}=======\n{new}>>>>>>> REPLACE\n```\n"
    return f"{words}\n\n{block}"


def _restored(first_log: str, second_log: str, model: ScriptedModel) -> None:
    # aider has no session id: it reloads the iteration's chat history file, condenses it
    # (a side call that is shown round 1's task) and hands the model the summary
    # (aider may condense more than once: it summarizes again when the summary is still long)
    condense = [r for r in model.requests if "summarize" in text_of(r.body)[:400]]
    assert any("return b - a" in text_of(r.body) for r in condense), len(condense)
    round_two = [r for r in model.answered() if "## Round 2" in text_of(r.body)]
    assert "I spoke to you previously" in text_of(round_two[0].body)
    assert SIDE_TEXT in text_of(round_two[0].body)


CLI = Cli(
    backend="aider",
    fix=[say(_replace("    return a - b\n", "    return a + b\n", "Fixing add()."))],
    wrong_then_right=[
        say(_replace("    return a - b\n", "    return b - a\n", "Changing add().")),
        say(_replace("    return b - a\n", "    return a + b\n", "Fixing add() for real.")),
    ],
    text_only=True,
    cached_reported=False,  # aider prints cache hits only with prompt caching on
    carries_task=False,
    session_evidence=_restored,
)


def test_aider_lands_a_fix_and_its_tokens_are_priced(tmp_path: Path) -> None:
    repo, record, model = lands_a_fix(CLI, tmp_path)
    assert record["agent_version"] == "aider 0.86.2"
    assert record["agent_model"] == "openai/qwen2.5-coder:7b"
    summary = record["agent_summary"]
    assert "Fixing add()." in summary
    # aider's offline and headless noise stays out of the summary
    for noise in ("HTTPSConnectionPool", "Update git", "Input is not a terminal"):
        assert noise not in summary
    assert "model_prices_and_context_window" not in summary
    assert not list(repo.glob(".aider*"))  # no repository map cache
    first = model.requests[0]
    assert first.path == "/v1/chat/completions" and first.body["model"] == "qwen2.5-coder:7b"
    assert "SEARCH/REPLACE" in str(first.body["messages"][0])  # the diff edit format


def test_aider_api_error_is_an_agent_error_in_its_own_words(tmp_path: Path) -> None:
    record = reports_an_api_error(CLI, tmp_path)
    assert "litellm.AuthenticationError" in record["reason"]


def test_aider_past_its_timeout_is_ended(tmp_path: Path) -> None:
    is_ended_at_the_timeout(CLI, tmp_path)


def test_aider_repair_round_restores_its_chat_history(tmp_path: Path) -> None:
    resumes_its_session(CLI, tmp_path)
