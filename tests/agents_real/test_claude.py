"""The real Claude Code (npm @anthropic-ai/claude-code, pinned in package-lock.json) through
`seed.py once`, sandboxed, against a scripted Anthropic Messages API server on 127.0.0.1
(`[agent] api_base` becomes ANTHROPIC_BASE_URL)."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest

from modules.agents import claude
from tests.agents_real.harness import (
    Cli,
    ScriptedModel,
    anywhere,
    is_ended_at_the_timeout,
    lands_a_fix,
    probe_command,
    program,
    reports_an_api_error,
    resumes_its_session,
    text_of,
)
from tests.agents_real.model import Turn, call, say, serving
from tests.support import records

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("bwrap")]


def _edit(old: str, new: str) -> Turn:
    return call("Edit", file_path="calc.py", old_string=old, new_string=new)


READ = call("Read", file_path="calc.py")
"""Claude Code's Edit refuses a file it has not read (or that changed since it read it)."""


def _same_session(first_log: str, second_log: str, model: ScriptedModel) -> None:
    session = claude.AGENT.session_of(first_log)
    assert session
    # claude names its session in every request's metadata; a resumed one keeps the id
    later = model.answered()[-1]
    assert session in str(later.body.get("metadata")) + str(later.headers)


CLI = Cli(
    backend="claude",
    fix=[READ, _edit("return a - b", "return a + b"), say("Fixed add().")],
    wrong_then_right=[
        READ,
        _edit("return a - b", "return b - a"),
        say("Changed add()."),
        READ,
        _edit("return b - a", "return a + b"),
        say("Fixed add() for real."),
    ],
    session_evidence=_same_session,
)


def test_claude_lands_a_fix_and_its_unknown_cost_is_priced(tmp_path: Path) -> None:
    repo, record, model = lands_a_fix(CLI, tmp_path)
    assert record["agent_version"] == "2.1.332 (Claude Code)"
    assert record["agent_summary"] == "Fixed add()."
    assert record["agent_turns"] == 3
    # claude guessed a cost for the model it has no price for (costBasis "unknown"): the
    # record's cost is [agent.prices]'s, not claude's guess
    log = (repo / "history" / record["iteration_id"] / "agent.log").read_text()
    assert '"costBasis":"unknown"' in log
    first = model.requests[0]
    assert first.path.startswith("/v1/messages") and first.body["model"] == "qwen3-coder"
    assert first.headers["x-api-key"] == "sk-loopback-test"
    assert all(r.body.get("tools") for r in model.requests)  # no side calls without tools


def test_claude_api_error_is_an_agent_error_in_its_own_words(tmp_path: Path) -> None:
    record = reports_an_api_error(CLI, tmp_path)
    assert record["agent_exit_code"] == 1


def test_claude_past_its_timeout_is_ended(tmp_path: Path) -> None:
    is_ended_at_the_timeout(CLI, tmp_path)


def test_claude_repair_round_resumes_its_session(tmp_path: Path) -> None:
    resumes_its_session(CLI, tmp_path)


def test_claude_denied_a_tool_is_an_agent_error_quoting_the_denial(tmp_path: Path) -> None:
    # with seed's sandbox off, claude asks before a tool it was not allowed, and in print mode
    # nobody answers: it says it is done all the same, having changed nothing
    program("claude")
    turns = [
        call("Bash", command="curl -s http://127.0.0.1:9/fix"),
        say("Fixed add(): restored a + b."),
    ]
    with serving(turns) as model:
        config = CLI.config(model) + '\n[guard]\nsandbox = "off"\n'
        repo, result = CLI.run(tmp_path, config)
    assert result.returncode == 1, result.stderr[-3000:]
    [record] = records(repo)
    log = (repo / "history" / record["iteration_id"] / "agent.log").read_text()
    assert '"permission_denials":[{' in log  # claude's own output shape
    assert (record["outcome"], record["failure_category"]) == ("FAILURE", "AGENT_ERROR")
    assert "refused" in record["reason"] and "Bash" in record["reason"], record["reason"]
    assert any('"tool_name":"Bash"' in line and line in log for line in record["evidence"])


@pytest.mark.parametrize("network", ["model-only", "full"])
def test_claude_running_a_shell_command_reaches_no_other_host_and_finds_no_key(
    tmp_path: Path, network: str
) -> None:
    # Claude Code runs its Bash tool's command as given, a shell child of the CLI with its
    # environment, files and process table: the probe sees what any command of the agent sees.
    # network = "full" is the positive control: the same probe reaches the other host and
    # finds the key (the key is the agent's there), so a probe that saw nothing could not pass
    program("claude")
    key = f"sk-real-{uuid.uuid4().hex}"  # in no file: only in the daemon's environment
    with anywhere() as url:
        turns = [call("Bash", command=probe_command(url, key)), say("Looked around.")]
        with serving(turns) as model:
            repo, result = CLI.run(tmp_path, CLI.config(model, network=network), key=key)
    assert result.returncode in (0, 1), result.stderr[-3000:]
    [record] = records(repo)
    log = (repo / "history" / record["iteration_id"] / "agent.log").read_text()
    [probed] = set(re.findall(r"key found in: [^\n]*?dns \w+", log))  # content and stdout
    if network == "model-only":
        assert record["network"] == "model-only"
        assert probed.startswith("key found in: nowhere;"), probed
        assert "http unreachable" in probed and "tcp unreachable" in probed, probed
        assert "dns unresolved" in probed, probed
    else:
        assert record["network"] == "full (opt-out)"
        assert "env ANTHROPIC_API_KEY" in probed, probed
        assert "http anywhere; tcp connected" in probed, probed
    # the tool's result went back to the model: what the agent could tell anyone
    assert any(probed in text_of(r.body) for r in model.requests[1:]), probed


def test_claude_reads_a_request_refused_at_the_cap_as_an_error_and_does_not_retry_it(
    tmp_path: Path,
) -> None:
    """Through the gateway (model-only), a cap of 1,500 tokens: claude's first request may
    cost more (its prompt's bytes and its max_tokens), so it is refused before it goes, in
    Anthropic's error shape; claude reads the 403 as an error and asks no more."""
    program("claude")
    with serving(CLI.fix) as model:
        config = CLI.config(model, keys=list(CLI.keys()))
        repo, result = CLI.run(tmp_path, config + "\n[budget]\nmax_tokens_per_iteration = 1500\n")
    assert result.returncode == 3, result.stderr[-3000:]  # BUDGET_EXCEEDED halts
    [record] = records(repo)
    assert (record["network"], record["failure_category"]) == ("model-only", "BUDGET_EXCEEDED")
    assert "this request may use up to" in record["reason"]
    log = (repo / "history" / record["iteration_id"] / "agent.log").read_text()
    assert '"api_error_status":403' in log and "BUDGET_EXCEEDED" in log
    assert "ECONNRESET" not in log  # the refusal, not a dropped connection
    assert model.requests == []  # nothing left the gateway
