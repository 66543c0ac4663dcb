"""Which upstream a run's model gateway forwards to, which URL the tool is pointed at, which
keys the gateway holds, and what status says about keys and logins (issue 27's Decisions:
model-only by default for every backend with an endpoint)."""

from __future__ import annotations

import http.client
import json
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from kernel.config import AgentConfig
from kernel.isolation import gateway, jails
from kernel.loop import modelrun
from tests.agents_real.model import say, serving

LOCAL = {
    "claude": "http://10.0.0.5:4000",
    "codex": "http://10.0.0.5:8000/v1",
    "gemini": "http://10.0.0.5:8080",
    "opencode": "http://10.0.0.5:11434/v1",
    "aider": "http://10.0.0.5:11434/v1",
    "mini": "http://10.0.0.5:11434/proxy/v1",
}
"""A self-hosted api_base of each backend's shape in docs/agents.md."""

KEY = {"claude": "ANTHROPIC_API_KEY", "gemini": "GEMINI_API_KEY"}


def _agent(backend: str, **given: object) -> AgentConfig:
    return AgentConfig.model_validate({"backend": backend, **given})


@pytest.mark.parametrize(
    ("backend", "agent_url", "upstream"),
    [
        ("claude", "", "http://10.0.0.5:4000"),
        ("codex", "/v1", "http://10.0.0.5:8000"),
        ("gemini", "", "http://10.0.0.5:8080"),
        ("opencode", "/v1", "http://10.0.0.5:11434"),
        ("aider", "/v1", "http://10.0.0.5:11434"),
        ("mini", "/v1", "http://10.0.0.5:11434/proxy"),
    ],
)
def test_with_api_base_the_tool_keeps_its_path_and_the_gateway_does_not_double_it(
    backend: str, agent_url: str, upstream: str
) -> None:
    agent = _agent(backend, api_base=LOCAL[backend], keys=["K"])
    assert modelrun.network(agent, backend, True) == "model-only"
    assert modelrun.agent_base(agent, backend, True) == jails.MODEL_URL + agent_url
    assert modelrun.gateway_base(agent, backend) == upstream


@pytest.mark.parametrize(
    ("backend", "agent_url", "upstream"),
    [
        ("claude", "", "https://api.anthropic.com"),
        ("codex", "/v1", "https://api.openai.com"),
        ("gemini", "", "https://generativelanguage.googleapis.com"),
    ],
)
def test_without_api_base_a_one_vendor_tool_goes_to_its_vendor_through_the_gateway(
    backend: str, agent_url: str, upstream: str
) -> None:
    agent = _agent(backend, env=[KEY.get(backend, "OPENAI_API_KEY")])
    assert modelrun.network(agent, backend, True) == "model-only"
    assert modelrun.said(agent, backend, True) == "model-only"
    assert modelrun.agent_base(agent, backend, True) == jails.MODEL_URL + agent_url
    assert modelrun.gateway_base(agent, backend) == upstream


@pytest.mark.parametrize("backend", ["opencode", "aider", "mini"])
def test_without_api_base_a_tool_whose_vendor_follows_the_model_stays_full_and_says_why(
    backend: str,
) -> None:
    agent = _agent(backend, env=["OPENAI_API_KEY"])
    assert modelrun.network(agent, backend, True) == "full"
    assert modelrun.said(agent, backend, True) == (
        f"full ({backend} picks its vendor by the model's name: set api_base for the gateway)"
    )
    assert modelrun.agent_base(agent, backend, True) == ""


@pytest.mark.parametrize(
    ("backend", "host"), [("codex", "chatgpt.com"), ("gemini", "cloudcode-pa.googleapis.com")]
)
def test_a_login_the_gateway_cannot_serve_keeps_the_full_network_and_says_why(
    backend: str, host: str
) -> None:
    agent = _agent(backend)
    assert modelrun.network(agent, backend, True) == "full"
    assert host in modelrun.said(agent, backend, True)
    # claude's subscription login goes to the API's host: the gateway forwards it
    assert modelrun.network(_agent("claude"), "claude", True) == "model-only"


def test_command_is_model_only_only_with_an_api_base_and_keeps_it_whole() -> None:
    assert modelrun.network(_agent("command", command=["x"]), "command", True) == "full"
    agent = _agent("command", command=["x"], api_base="http://10.0.0.5:8000/v1")
    assert modelrun.network(agent, "command", True) == "model-only"
    assert modelrun.gateway_base(agent, "command") == "http://10.0.0.5:8000/v1"


def test_a_key_named_in_env_is_held_by_the_gateway_and_the_agent_gets_a_placeholder() -> None:
    environ = {"ANTHROPIC_API_KEY": "sk-real", "OTHER": "x", "HTTPS_PROXY": "p"}
    agent = _agent("claude", env=["ANTHROPIC_API_KEY", "HTTPS_PROXY"])
    assert modelrun.held_keys(agent, "claude") == ["ANTHROPIC_API_KEY"]
    assert modelrun.upstream_keys(modelrun.held_keys(agent, "claude"), environ) == {
        "x-api-key": "sk-real"
    }
    given = modelrun.agent_env(agent, "model-only", environ, "claude")
    assert given == {"ANTHROPIC_API_KEY": modelrun.PLACEHOLDER}
    # with network = "full", env passes through as before (the runner passes [agent] env)
    assert modelrun.agent_env(agent, "full", environ, "claude") == {}
    # another backend's key variable is not this tool's: env keeps passing it
    assert modelrun.held_keys(_agent("gemini", env=["ANTHROPIC_API_KEY"]), "gemini") == []


def test_status_warns_of_a_key_in_env_and_names_a_login_folder(tmp_path: Path) -> None:
    agent = _agent("claude", env=["ANTHROPIC_API_KEY"])
    assert modelrun.warnings(agent, "claude", True, tmp_path) == [
        "ANTHROPIC_API_KEY is named in [agent] env; in model-only the gateway holds it: "
        "move it to [agent] keys"
    ]
    (tmp_path / ".claude").mkdir()
    moved = _agent("claude", keys=["ANTHROPIC_API_KEY"])
    assert modelrun.warnings(moved, "claude", True, tmp_path) == [
        "~/.claude is bound into the agent's sandbox: a login there is visible to it"
    ]
    # with the full network the key in env is the agent's, as before: nothing to move
    full = _agent("claude", env=["ANTHROPIC_API_KEY"], network="full")
    assert "ANTHROPIC_API_KEY" not in " ".join(modelrun.warnings(full, "claude", True, tmp_path))


def test_a_gateway_holding_no_key_forwards_the_agents_own_login_and_drops_nothing_else() -> None:
    body = json.dumps({"model": "claude-x", "messages": [], "tools": [{}]}).encode()
    login = {"authorization": "Bearer sk-ant-oat-login", "anthropic-version": "2023-06-01"}
    with serving([say("a"), say("b")]) as model:
        for keys in ({}, {"x-api-key": "sk-real"}):
            gate = gateway.Gateway(model.origin, keys)
            where = urlsplit(gate.start())
            try:
                connection = http.client.HTTPConnection(where.hostname or "", where.port)
                connection.request("POST", "/v1/messages", body, login)
                assert connection.getresponse().status == 200
                connection.close()
            finally:
                gate.stop()
        login_run, key_run = model.requests
    # on a login (no key held) its credential goes on; with a key held, only the key does
    assert login_run.headers["authorization"] == "Bearer sk-ant-oat-login"
    assert "authorization" not in key_run.headers
    assert key_run.headers["x-api-key"] == "sk-real"
