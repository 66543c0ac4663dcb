"""The fake CLIs against the adapters' own argv: real flags accepted, real output and error shapes.

Each case runs the argv an adapter builds (placeholders filled as the kernel fills them) against
its fake in a scratch git repository, then hands the output to the adapter's parse.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from domain import AgentReport, FailureCategory, RunResult
from modules.agents import aider, claude, codex, gemini, mini, opencode
from modules.agents.tests.helpers import make_context, make_plan
from tests.support import BROKEN_ADD, FAKE_CLIS, FIX_ADD, make_repo

ADAPTERS = {
    "claude": claude.AGENT,
    "codex": codex.AGENT,
    "aider": aider.AGENT,
    "mini": mini.AGENT,
    "gemini": gemini.AGENT,
    "opencode": opencode.AGENT,
}


def _env(tmp: Path, behaviour: dict[str, Any], extra: dict[str, str]) -> dict[str, str]:
    script = tmp / "script.json"
    script.write_text(json.dumps(behaviour))
    env = {
        "PATH": f"{FAKE_CLIS}{os.pathsep}{os.environ['PATH']}",
        "HOME": str(tmp / "home"),
        "FAKE_AGENT_SCRIPT": str(script),
        "FAKE_AGENT_TRACE": str(tmp / "trace.jsonl"),
    }
    env.update(extra)
    return env


def run_adapter(
    tmp: Path, tool: str, behaviour: dict[str, Any], argv: list[str] | None = None
) -> tuple[AgentReport, RunResult, Path]:
    """Run the adapter's argv (or argv) against the fake; the report, the run, the worktree."""
    repo = make_repo(tmp / "wt", BROKEN_ADD)
    run_dir = tmp / "run"
    run_dir.mkdir()
    prompt_file = run_dir / "prompt.md"
    adapter = ADAPTERS[tool]
    spec = adapter.run_spec(make_plan(), make_context(model="openai/fake-model"))
    prompt_file.write_text(spec.prompt)
    values = {"{prompt_file}": str(prompt_file), "{worktree}": str(repo), "{run_dir}": str(run_dir)}
    command = argv if argv is not None else list(spec.argv)
    for key, value in values.items():
        command = [a.replace(key, value) for a in command]
    env = _env(tmp, behaviour, dict(spec.env))
    done = subprocess.run(
        command,
        cwd=repo,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=60,
        check=False,
    )
    text = done.stdout.decode()
    artifacts = {n: (run_dir / n).read_text() for n in spec.artifacts if (run_dir / n).exists()}
    result = RunResult(
        exit_code=done.returncode,
        output=text,
        output_tail=text[-16384:],
        output_bytes=len(done.stdout),
        artifacts=artifacts,
    )
    return adapter.parse(make_plan(), result), result, repo


@pytest.mark.parametrize("tool", sorted(ADAPTERS))
def test_each_fake_accepts_its_adapters_flags_and_edits_as_scripted(
    tmp_path: Path, tool: str
) -> None:
    report, result, repo = run_adapter(tmp_path, tool, {"edits": FIX_ADD})
    assert result.exit_code == 0, result.output
    assert report.success, report.summary
    assert "return a + b" in (repo / "calc.py").read_text()
    assert report.tokens_used == 1500


@pytest.mark.parametrize(
    ("tool", "flag", "code", "words"),
    [
        ("claude", "--bogus", 1, "error: unknown option '--bogus'"),
        ("codex", "--full-auto", 2, "error: unexpected argument '--full-auto' found"),
        ("aider", "--model-name", 2, "aider: error: unrecognized arguments: --model-name"),
        ("mini", "--version", 2, "No such option: --version"),
        ("gemini", "--bogus", 1, "Unknown argument: bogus"),
        ("opencode", "--bogus", 1, "opencode run [message..]"),
    ],
)
def test_an_unknown_flag_fails_the_way_the_real_tool_does(
    tmp_path: Path, tool: str, flag: str, code: int, words: str
) -> None:
    spec = ADAPTERS[tool].run_spec(make_plan(), make_context())
    at = 2 if tool in ("codex", "opencode") else 1  # after the subcommand
    argv = [*spec.argv[:at], flag, *spec.argv[at:]]
    report, result, repo = run_adapter(tmp_path, tool, {"edits": FIX_ADD}, argv)
    assert result.exit_code == code and words in result.output
    assert not report.success and report.failure_category == FailureCategory.AGENT_ERROR
    assert "return a - b" in (repo / "calc.py").read_text()


@pytest.mark.parametrize(
    ("tool", "outcome", "exit_code", "words"),
    [
        # an API error (and gemini's failed authentication) is the real programs' own, in
        # tests/agents_real/
        ("claude", "max_turns", 1, "Reached maximum number of turns"),
        ("mini", "limits", 0, "LimitsExceeded"),
        ("gemini", "turn_limit", 53, "turn limit"),
    ],
)
def test_error_shapes_are_failures_whatever_the_exit_code(
    tmp_path: Path, tool: str, outcome: str, exit_code: int, words: str
) -> None:
    report, result, _ = run_adapter(tmp_path, tool, {"outcome": outcome, "edits": FIX_ADD})
    assert result.exit_code == exit_code, result.output
    assert not report.success and report.failure_category == FailureCategory.AGENT_ERROR
    assert words in report.summary


def test_claude_denied_a_tool_quotes_the_denial_as_printed(tmp_path: Path) -> None:
    script = {"outcome": "denied", "tool": "Edit", "input": {"file_path": "calc.py"}}
    report, result, repo = run_adapter(tmp_path, "claude", {**script, "edits": FIX_ADD})
    assert report.success and "return a - b" in (repo / "calc.py").read_text()
    [quote] = report.refusals
    assert quote.startswith('"permission_denials":[{"tool_name":"Edit"') and quote in result.output


def test_gemini_errors_go_to_stderr_and_stdout_stays_empty(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "wt", BROKEN_ADD)
    spec = gemini.AGENT.run_spec(make_plan(), make_context())
    done = subprocess.run(
        list(spec.argv),
        cwd=repo,
        env=_env(tmp_path, {"outcome": "turn_limit"}, {}),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 53 and done.stdout == ""
    assert json.loads(done.stderr.splitlines()[-1])["error"]["code"] == 53


def test_a_fake_without_its_enabling_flags_changes_nothing(tmp_path: Path) -> None:
    # what the adapters' flags are for: codex defaults to a read-only sandbox, opencode and
    # gemini deny edits in headless mode, gemini refuses an untrusted folder
    cases = {
        "codex": ["codex", "exec", "--json", "-C", "{worktree}", "fix it"],
        "opencode": ["opencode", "run", "--format", "json", "fix it"],
        "gemini": ["gemini", "-p", "fix it", "--output-format", "json", "--skip-trust"],
    }
    for tool, argv in cases.items():
        _, result, repo = run_adapter(tmp_path / tool, tool, {"edits": FIX_ADD}, argv)
        assert "return a - b" in (repo / "calc.py").read_text(), tool
    _, result, _ = run_adapter(
        tmp_path / "untrusted", "gemini", {}, ["gemini", "-p", "x", "--output-format", "json"]
    )
    assert result.exit_code == 55 and "trusted directory" in result.output


def test_mini_needs_its_environment(tmp_path: Path) -> None:
    argv = list(mini.AGENT.run_spec(make_plan(), make_context(model="openai/m")).argv)
    unpriced = {"edits": FIX_ADD, "usage": {"cost": None}}
    repo = make_repo(tmp_path / "wt", BROKEN_ADD)
    run_dir = tmp_path / "run"
    argv = [a.replace("{run_dir}", str(run_dir)) for a in argv]
    bare = _env(tmp_path, unpriced, {"MSWEA_CONFIGURED": "true"})
    done = subprocess.run(
        argv,
        cwd=repo,
        env=bare,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1 and "Error calculating cost" in done.stdout
    trajectory = json.loads((run_dir / "trajectory.json").read_text())
    assert trajectory["info"]["exit_status"] == "RuntimeError"


@pytest.mark.parametrize("tool", ["claude", "codex", "opencode"])
def test_fakes_that_read_stdin_hang_while_it_is_left_open(tmp_path: Path, tool: str) -> None:
    repo = make_repo(tmp_path / "wt", BROKEN_ADD)
    spec = ADAPTERS[tool].run_spec(make_plan(), make_context())
    argv = [a.replace("{worktree}", str(repo)) for a in spec.argv]
    env = _env(tmp_path, {}, {})
    proc = subprocess.Popen(
        argv,
        cwd=repo,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        trace = tmp_path / "trace.jsonl"
        deadline = time.monotonic() + 60
        while not trace.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert trace.exists()
        time.sleep(1.0)  # a process blocked on read stays blocked; nothing is timed here
        assert proc.poll() is None, f"{tool} did not wait for stdin"
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.close()
        out = proc.stdout.read()
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    assert proc.returncode == 0, out
