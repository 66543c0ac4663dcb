"""Stuck runs end early on the agent's log where the gateway does not serve the run (issue 42
item 6): the same tool call with the same result `stuck_repeats` times in a row, or no new
bytes in the checkout for `stuck_turns` turns. A command agent (tests/fakes/looping_agent.py)
prints Claude Code's stream-json events with the network full (no gateway): the kernel reads
the events as they come and ends the run's process group STUCK long before its time cap."""

from __future__ import annotations

import json
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from tests.fakes import looping_agent, scripted_agent
from tests.support import (
    BROKEN_ADD,
    FIX_ADD,
    fake_cli_config,
    fake_cli_env,
    git,
    make_repo,
    records,
    seed,
    start_daemon,
    wait_for,
)


def _once(tmp: Path, mode: str, turns: int, extra: str = "") -> tuple[int, dict[str, Any], float]:
    argv = json.dumps([sys.executable, looping_agent.__file__, mode, str(turns)])
    config = (
        f'[agent]\nbackend = "command"\ncommand = {argv}\nrepair_rounds = 0\n'
        f'network = "full"\ntimeout_s = 240\n{extra}'
    )
    repo = make_repo(tmp / "repo", BROKEN_ADD, config)
    started = time.monotonic()
    done = seed(repo, "once")
    took = time.monotonic() - started
    [record] = records(repo)
    return done.returncode, record, took


def _stuck(record: dict[str, Any]) -> None:
    assert (record["outcome"], record["failure_category"]) == ("FAILURE", "STUCK"), record["reason"]


def test_the_same_tool_call_and_result_in_the_log_ends_the_run_stuck(tmp_path: Path) -> None:
    # 2,000 turns 0.1 s apart would run past the 240 s cap
    code, record, took = _once(tmp_path, "same", 2000)
    assert code == 1, record["reason"]
    _stuck(record)
    assert (
        "8 identical tool calls in a row in the agent's log, each with the same result"
        in (record["reason"])
    )
    assert "grep -n 'return a - b' calc.py" in record["evidence"][0]
    assert record["durations"]["execute"] < 60 and took < 200
    text = (tmp_path / "repo" / "history" / record["iteration_id"] / "report.md").read_text()
    assert "STUCK" in text


def test_the_same_lines_as_plain_text_are_not_read(tmp_path: Path) -> None:
    # only the structured events of a known format count: the same text printed 30 times is not
    code, record, _ = _once(tmp_path, "text", 30)
    assert record["failure_category"] != "STUCK", record["reason"]
    assert code in (0, 1)


def test_no_new_bytes_in_the_checkout_for_stuck_turns_ends_the_run_stuck(tmp_path: Path) -> None:
    code, record, took = _once(tmp_path, "vary", 2000, "stuck_turns = 12\n")
    assert code == 1, record["reason"]
    _stuck(record)
    assert "no change to the checkout in 12 turns" in record["reason"]
    assert record["durations"]["execute"] < 60 and took < 200


def test_turns_that_write_are_not_stuck(tmp_path: Path) -> None:
    code, record, _ = _once(tmp_path, "write", 30, "stuck_turns = 12\n")
    assert record["failure_category"] != "STUCK", record["reason"]
    assert code in (0, 1)


def _portfolio(tmp: Path, scope: str) -> tuple[Path, dict[str, str], int]:
    """A portfolio of the fake claude (its model's usage limit, resetting in 120 s) first and a
    command agent that fixes the gap second, dealt in that order; `scope` the limit's ('': the
    default)."""
    tmp.mkdir()
    reset = int(time.time()) + 120
    script = tmp / "fix.json"
    script.write_text(json.dumps({"steps": FIX_ADD}), encoding="utf-8")
    command = json.dumps([sys.executable, scripted_agent.__file__, str(script)])
    config = fake_cli_config("claude", f'network = "full"\ncommand = {command}\n') + (
        '[candidates]\nlearn = false\nagent = [{ backend = "claude" }, { backend = "command" }]\n'
        "[daemon]\nmax_iterations = 2\npoll_interval_s = 1\n"
        + (f'limit_scope = "{scope}"\n' if scope else "")
    )
    repo = make_repo(tmp / "repo", BROKEN_ADD, config)
    return repo, fake_cli_env(tmp, {"outcome": "limited", "reset": reset}), reset


def test_a_limit_on_one_agent_of_the_portfolio_lets_the_other_run(tmp_path: Path) -> None:
    repo, env, reset = _portfolio(tmp_path / "backend", "backend")
    started = time.monotonic()
    daemon = start_daemon(repo, env=env)
    try:
        wait_for(lambda: len(records(repo)) >= 2, 100, "two records", alive=daemon)
        daemon.communicate(timeout=60)
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.communicate()
    assert time.monotonic() - started < 100  # long before claude's reset
    first, second = records(repo)
    assert (first["outcome"], first["backend"]) == ("LIMITED", "claude"), first["reason"]
    assert (second["outcome"], second["backend"]) == ("SUCCESS", "command"), second["reason"]
    assert "return a + b" in git(repo, "show", "HEAD:calc.py")
    pause = json.loads((repo / "history" / "limit.json").read_text())
    assert datetime.fromisoformat(pause["backends"]["claude"]["until"]).timestamp() == reset
    status = seed(repo, "status", env=env)
    assert "limited:     until " in status.stdout and "for claude" in status.stdout, status.stdout
    log = (repo / "history" / "daemon.log").read_text()
    assert "limited until" in log and "for claude: the portfolio's other agents run" in log
    assert seed(repo, "report", env=env).returncode == 0
    page = (repo / "history" / "index.html").read_text()
    assert "claude's usage limit: the portfolio's other agents run meanwhile" in page


def test_a_limit_pauses_every_agent_by_default(tmp_path: Path) -> None:
    repo, env, _ = _portfolio(tmp_path / "all", "")
    done = seed(repo, "once", env=env)
    assert done.returncode == 5, done.stderr
    again = seed(repo, "once", env=env)  # the command agent waits too
    assert again.returncode == 5 and len(records(repo)) == 1, again.stderr
    status = seed(repo, "status", env=env)
    assert "limited:     until " in status.stdout, status.stdout
    assert "(claude's limit): no agent runs" in status.stdout, status.stdout
