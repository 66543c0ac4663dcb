"""The real mini-swe-agent (PyPI mini-swe-agent, pinned in requirements-mini.lock) through
`seed.py once`, sandboxed and model-only, against a scripted OpenAI chat-completions server on
127.0.0.1 (`[agent] api_base` becomes OPENAI_BASE_URL for litellm). Its other scenarios are
tests/integration/test_mini_real.py's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.agents_real.harness import Cli, lands_a_fix
from tests.agents_real.model import Turn, call
from tests.support import seed

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("bwrap")]


def _bash(command: str) -> Turn:
    return call("bash", command=command)


SUBMIT = _bash("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT")
"""mini ends its run on this line of a command's output (its exit status Submitted)."""

CLI = Cli(
    backend="mini",
    fix=[_bash("sed -i 's/return a - b/return a + b/' calc.py"), SUBMIT],
    wrong_then_right=[_bash("sed -i 's/return a - b/return a + b/' calc.py"), SUBMIT],
)


def test_mini_lands_a_fix_through_the_gateway_with_its_key_named_in_env(tmp_path: Path) -> None:
    # a seed.toml from before [agent] keys: in model-only the gateway holds the tool's key
    # variable all the same, the agent gets the placeholder, and status says to move it
    repo, record, model = lands_a_fix(CLI, tmp_path, env=["OPENAI_API_KEY"], keys=[])
    assert record["agent_version"] == "mini-swe-agent 2.4.6"
    first = model.requests[0]
    assert first.path == "/v1/chat/completions" and first.body["model"] == "qwen2.5-coder:7b"
    assert first.headers["authorization"] == "Bearer sk-loopback-test"
    status = json.loads(seed(repo, "status", "--json").stdout)
    assert status["network"] == "model-only"
    assert status["network_notes"] == [
        "OPENAI_API_KEY is named in [agent] env; in model-only the gateway holds it: move it "
        "to [agent] keys"
    ]
