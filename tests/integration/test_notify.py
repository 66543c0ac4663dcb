"""Notifications from real daemons: a real command and a loopback webhook each told once, across
a kill -9 and a restart; a budget spent and the daemon stopping by itself told, a stop by the
person not; a kept change told with the command that lands it, while the agent's sandbox,
searched by the agent itself, holds no trace of the webhook's URL."""

from __future__ import annotations

import json
import secrets
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes import notify_fakes
from tests.fakes.notify_fakes import Receiver, calls
from tests.integration.test_ratchet import TOOLS
from tests.integration.test_uncovered import LINT
from tests.support import (
    AGENT,
    SAMPLE,
    agent_config,
    agent_io,
    make_repo,
    records,
    seed,
    start_daemon,
    wait_for,
)

FAKE = str(Path(notify_fakes.__file__))
UNUSED = {**SAMPLE, "calc.py": "import os\n\n\n" + SAMPLE["calc.py"]}
"""SAMPLE with one lint finding ruff-fix lands (F401)."""


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver().start()
    try:
        yield found
    finally:
        found.stop()


def notify_toml(out: Path, extra: str = "") -> str:
    """[notify] with the recording command (every placeholder) and the webhook's variable."""
    argv = json.dumps([sys.executable, FAKE, str(out), "{event}", "{iteration}", "{message}"])
    return f'\n[notify]\ncommand = {argv}\nwebhook_env = "SEED_TEST_HOOK"\n{extra}'


def everything_written(repo: Path) -> str:
    """Every file of history/ and the kernel's state, as text, for a secret to be looked for."""
    places = [repo / "history", repo / ".git" / "seed"]
    found = [p for place in places for p in place.rglob("*") if p.is_file()]
    return "\n".join(p.read_bytes().decode("utf-8", "replace") for p in found)


def test_a_command_and_a_webhook_are_told_once_each_across_a_kill_and_a_restart(
    tmp_path: Path, receiver: Receiver
) -> None:
    out = tmp_path / "calls.jsonl"
    token = f"T0KEN-{secrets.token_hex(8)}"
    hook = {"SEED_TEST_HOOK": f"{receiver.url}/hook/{token}"}
    config = '[agent]\nbackend = "ruff-fix"\n' + notify_toml(out)
    repo = make_repo(tmp_path / "repo", UNUSED, config)

    killed = seed(repo, "once", env={**hook, "SEED_FAULT_AT": "notice-queued"})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    [landed] = records(repo)
    assert landed["outcome"] == "SUCCESS"
    assert calls(out) == [] and receiver.got == [], "killed after queueing, before any send"
    outbox = repo / "history" / "notifications.jsonl"
    assert [json.loads(line)["state"] for line in outbox.read_text().splitlines()] == ["queued"]

    restarted = seed(repo, "once", env=hook)
    assert restarted.returncode == 5, restarted.stderr  # nothing left to do: it only tells
    again = seed(repo, "once", env=hook)
    assert again.returncode == 5, again.stderr

    iteration = landed["iteration_id"]
    [call] = calls(out)
    assert call["argv"][:2] == ["landed", iteration]
    assert call["argv"][2].startswith(f"Landed {iteration} for ruff:calc.py:F401 (commit ")
    assert call["seed"]["SEED_ITERATION"] == iteration
    assert "SEED_TEST_HOOK" not in call["names"], "the command is not given the webhook"
    [got] = receiver.got
    assert got.path == f"/hook/{token}"
    body = got.json()
    assert (body["event"], body["iteration"], body["message"]) == (
        "landed",
        iteration,
        call["argv"][2],
    )
    shown = killed.stderr + restarted.stderr + again.stderr + restarted.stdout + again.stdout
    assert token not in shown and token not in everything_written(repo)


def test_a_spent_budget_and_a_stop_by_itself_are_told_and_a_stop_by_the_person_is_not(
    tmp_path: Path,
) -> None:
    out = tmp_path / "calls.jsonl"
    files = {**UNUSED, "util.py": "import sys\n\n\ndef one():\n    return 1\n"}
    config = (
        '[agent]\nbackend = "ruff-fix"\n[budget]\nmax_iterations_per_day = 1\n'
        "[daemon]\npoll_interval_s = 1\n" + notify_toml(out)
    )
    repo = make_repo(tmp_path / "repo", files, config)

    ran = seed(repo, "run", "--max-iterations", "2")
    assert ran.returncode == 0, ran.stderr
    outcomes = [(r["outcome"], r["failure_category"]) for r in records(repo)]
    assert outcomes == [("SUCCESS", None), ("FAILURE", "BUDGET_EXCEEDED")]
    told = [c["argv"] for c in calls(out)]
    assert [argv[0] for argv in told] == ["landed", "budget", "stopped"]
    assert told[1][1] == records(repo)[1]["iteration_id"]
    assert "The budget is spent, so the daemon halted" in told[1][2] and " resume`" in told[1][2]
    assert told[2][1] == "" and told[2][2].startswith("The daemon stopped by itself: it ran the 2")
    assert " run`" in told[2][2]

    daemon = start_daemon(repo)  # halted: it waits for the person, who stops it
    try:
        status = repo / "history" / "status.json"
        wait_for(lambda: '"halted"' in status.read_text(), 120, "the halted phase", daemon)
        daemon.send_signal(signal.SIGINT)
        _, stderr = daemon.communicate(timeout=60)
    finally:
        if daemon.poll() is None:
            daemon.kill()
    assert daemon.returncode == 0, stderr
    assert len(calls(out)) == 3, "a stop by the person is not told, nor the halt again"


@pytest.mark.usefixtures("bwrap")
def test_a_kept_change_is_told_with_its_approve_command_and_the_sandbox_never_holds_the_url(
    tmp_path: Path, receiver: Receiver
) -> None:
    token, control = f"T0KEN-{secrets.token_hex(8)}", f"CONTROL-{secrets.token_hex(8)}"
    found = agent_io(tmp_path) / "found.json"
    repo_path = tmp_path / "repo"
    look = {
        "run": [
            sys.executable,
            FAKE,
            "search",
            str(found),
            ".",
            str(repo_path),
            "/tmp",
            "/run",
            str(Path.home()),
            "--",
            token[::-1],  # reversed: the agent's own argv and script never hold the word
            control[::-1],
        ]
    }
    steps = [look, {"replace": "calc.py", "old": "+ missing", "new": "+ 0"}]
    config = agent_config(
        tmp_path, steps, extra=TOOLS + f"# {control}\n" + notify_toml(tmp_path / "c")
    )
    repo = make_repo(repo_path, LINT, config)
    assert str(AGENT) in config

    result = seed(repo, "once", env={"SEED_TEST_HOOK": f"{receiver.url}/hook/{token}"})

    [record] = records(repo)
    assert record["outcome"] == "KEPT", (record["reason"], result.stderr)
    [got] = receiver.got
    body = got.json()
    assert body["event"] == "kept" and body["iteration"] == record["iteration_id"]
    assert f"approve {record['iteration_id']}`" in body["message"]
    assert record["kept_branch"] in body["message"]
    searched = json.loads(found.read_text())
    assert searched["files"] > 0 and searched["procs"] > 0, searched
    hits = {word[::-1]: where for word, where in searched["hits"].items()}
    assert hits[control], "the search reads seed.toml: it would find a URL written there"
    assert hits[token] == [], hits[token]
