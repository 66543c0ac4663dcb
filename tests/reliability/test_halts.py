"""Halts, quarantine, budgets and the one-daemon lock, on real daemons."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from datetime import datetime
from pathlib import Path

from kernel.records import halt
from kernel.records.store import RecordStore
from tests.reliability.helpers import (
    FAST,
    assert_checkout_kept,
    assert_no_leftovers,
    make_project,
)
from tests.support import agent_io, seed, start_daemon, wait_for

FAIL = [{"exit": 1}]


def _trace(tmp: Path) -> tuple[dict[str, str], Path]:
    """A first step that leaves a line in a file outside the checkout each time the agent runs."""
    path = agent_io(tmp) / "agent-runs.txt"
    return {"append": str(path), "text": "ran\n"}, path


def _runs(trace: Path) -> int:
    return len(trace.read_text().splitlines()) if trace.exists() else 0


def test_a_halt_survives_restarts_blocks_agents_and_only_resume_clears_it(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    project.task()
    ran, trace = _trace(tmp_path)
    kernel_edit = [ran, {"write": "kernel/core.py", "text": "X = 1\n"}]
    first = project.seed(project.config(kernel_edit, extra=FAST), "once")
    assert first.returncode == 3, first.stderr
    before = project.snapshot()
    status = project.status()
    assert status["halted"] and "SANDBOX_VIOLATION" in status["halt_reason"]
    shown = seed(project.root, "status")
    assert "YES: SANDBOX_VIOLATION" in shown.stdout
    assert f"--root {project.root} resume" in shown.stdout

    honest = project.config([ran], extra=FAST)
    again = project.seed(honest, "once")

    assert again.returncode == 3 and "resume" in again.stderr
    assert _runs(trace) == 1, "no agent runs while halted"
    assert len(project.records()) == 1
    assert_checkout_kept(project, before)

    resumed = seed(project.root, "resume")
    assert resumed.returncode == 0 and "was halted: SANDBOX_VIOLATION" in resumed.stdout
    assert not project.status()["halted"]
    # the planner never plans a gap again after a violation: a new task gets the agent
    project.task("Add a div(a, b) function to calc.py, with a test.", name="div.md")
    after = project.seed(honest, "once")
    assert after.returncode == 1, after.stderr  # NO_CHANGE: the agent ran
    assert _runs(trace) == 2
    assert [e["kind"] for e in project.events() if e["kind"] in ("halt", "resume")] == [
        "halt",
        "resume",
    ]


def test_a_halted_daemon_keeps_watching_and_reporting_until_resumed(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    ran, trace = _trace(tmp_path)
    halt.halt(
        RecordStore(project.root / "history"), "halted by an earlier violation", "GROWTH_LIMIT"
    )
    config = project.config([ran], extra=FAST + "[daemon]\npoll_interval_s = 600\n")
    daemon = start_daemon(project.root, "--config", str(config), "run")
    status_file = project.root / "history" / "status.json"
    try:
        wait_for(lambda: _phase(status_file) == "halted", 120, "the daemon to report the halt")
        (project.root / "inbox" / "bad.md").write_bytes(b"\x00\x01 not text")
        project.task()
        reason = project.root / "inbox" / "rejected" / "bad.md.reason.txt"
        wait_for(reason.exists, 60, "the bad inbox file to be set aside while halted")
        assert "binary" in reason.read_text()
        assert (project.root / "inbox" / "rejected" / "bad.md").exists()
        wait_for(lambda: _status(status_file).get("inbox_queued") == 1, 60, "the queue count")
        assert "halted by an earlier violation" in str(_status(status_file)["detail"])
        assert _runs(trace) == 0

        assert seed(project.root, "resume").returncode == 0

        wait_for(lambda: _runs(trace) == 1, 120, "the agent to run after resume")
        wait_for(lambda: len(project.records()) == 1, 120, "the record")
        daemon.send_signal(signal.SIGINT)
        _, stderr = daemon.communicate(timeout=120)
    finally:
        _end(daemon)
    assert daemon.returncode == 0, stderr
    assert project.records()[0]["outcome"] == "NO_CHANGE"


def test_quarantine_skips_a_gap_until_a_person_asks_again(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    (project.root / "ROADMAP.md").write_text("# Next\n- [ ] add a sub function to calc\n")
    subprocess.run(["git", "add", "ROADMAP.md"], cwd=project.root, check=True)
    subprocess.run(
        ["git", "-c", "user.name=u", "-c", "user.email=u@e", "commit", "-qm", "roadmap"],
        cwd=project.root,
        check=True,
    )
    failing = project.config(FAIL, extra=FAST)
    assert project.seed(failing, "once").returncode == 1
    assert project.seed(failing, "once").returncode == 1
    key = project.records()[0]["gap"]["key"]

    skipped = project.seed(failing, "once")

    assert skipped.returncode == 5, skipped.stderr  # the only gap is quarantined
    assert len(project.records()) == 2
    status = project.status()
    assert status["quarantined"] == [key] and not status["halted"]
    shown = seed(project.root, "status").stdout
    assert "quarantined: 1" in shown and key in shown
    assert [e["data"]["gap"] for e in project.events("quarantine")] == [key]

    # the ask must come after the last failure, and be old enough (1 s) to be read at once
    last_failure = datetime.fromisoformat(project.records()[-1]["ended_at"]).timestamp()
    time.sleep(max(0.0, last_failure + 2.0 - time.time()))
    project.task("Please try again: add a sub function to calc", name="retry.md", age_s=1.5)
    planned = project.seed(project.plan_only(), "once")

    assert planned.returncode == 5, planned.stderr
    # once records one iteration: the ask's plan (the lifted gap is planned again later)
    waiting = [r["gap"]["key"] for r in project.records()[2:]]
    assert waiting == ["inbox:retry.md"]
    assert project.status()["quarantined"] == []
    assert [e["data"]["gap"] for e in project.events("quarantine_lifted")] == [key]


def test_three_failures_across_gaps_halt_and_a_quarantined_task_moves_to_failed(
    tmp_path: Path,
) -> None:
    project = make_project(tmp_path)
    project.task(name="a.md")
    project.task("Add a div function.", name="b.md", front='priority = "low"\n')
    project.task("Add a pow function.", name="c.md", front='priority = "low"\n')
    before = project.snapshot()
    failing = project.config(FAIL, extra=FAST)

    # a.md and b.md twice each (each then quarantined), c.md: the third distinct gap halts
    codes = [project.seed(failing, "once").returncode for _ in range(5)]

    assert codes == [1, 1, 1, 1, 3]
    records = project.records()
    keys = ["inbox:a.md", "inbox:a.md", "inbox:b.md", "inbox:b.md", "inbox:c.md"]
    assert [r["gap"]["key"] for r in records] == keys
    assert all(r["failure_category"] == "AGENT_ERROR" for r in records)
    failed = project.root / "inbox" / "failed" / "a.md"
    assert failed.exists()
    assert "Quarantined" in failed.with_name("a.md.result.md").read_text()
    reason = project.halt()["reason"]
    assert reason.startswith("5 consecutive failures across 3 different gaps")
    assert (project.root / "inbox" / "failed" / "b.md").exists()
    assert (project.root / "inbox" / "c.md").exists()
    assert_checkout_kept(project, before)
    assert_no_leftovers(project)


def test_the_day_budget_stops_a_run_before_the_money_is_spent(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    project.task()
    ran, trace = _trace(tmp_path)
    spend = [ran, {"result": {"summary": "tried", "tokens_used": 1000, "cost_usd": 1.5}}]
    budget = "[budget]\nmax_cost_usd_per_day = 3.0\nmax_cost_usd_per_iteration = 2.0\n"
    config = project.config(spend, extra=FAST + budget)

    assert project.seed(config, "once").returncode == 1  # NO_CHANGE, $1.50 spent
    second = project.seed(config, "once")

    assert second.returncode == 3, second.stderr
    assert _runs(trace) == 1, "the second run must not start"
    last = project.records()[-1]
    assert (last["outcome"], last["failure_category"]) == ("FAILURE", "BUDGET_EXCEEDED")
    assert "may cost up to $2.00" in last["reason"] and "$1.50 of $3.00 is left" in last["reason"]
    status = project.status()
    assert status["halted"] and status["cost_today_usd"] == 1.5
    ledger = (project.root / "history" / "ledger.jsonl").read_text().splitlines()
    assert [json.loads(line)["cost_usd"] for line in ledger] == [1.5]


def test_a_second_daemon_names_the_first_and_exits_2(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    project.task()
    started = agent_io(tmp_path) / "agent-started"
    config = project.config([{"touch": str(started)}, {"hang": True}], extra=FAST)
    first = start_daemon(project.root, "--config", str(config), "run")
    try:
        wait_for(started.exists, 120, "the first daemon's agent to start")
        second = project.seed(config, "once")
        assert second.returncode == 2
        assert f"pid {first.pid}" in second.stderr and "daemon.lock" in second.stderr
        assert project.status()["running"] and project.status()["pid"] == first.pid
        first.send_signal(signal.SIGINT)
        _, stderr = first.communicate(timeout=120)
    finally:
        _end(first)
    assert first.returncode == 0, stderr
    assert [r["outcome"] for r in project.records()] == ["ABORTED"]
    assert (project.root / "inbox" / "sub.md").exists()


def _end(proc: subprocess.Popen[str]) -> None:
    """Kill a daemon a failed test left running, and close its pipes."""
    if proc.poll() is None:
        proc.kill()
    proc.communicate(timeout=60)


def _status(path: Path) -> dict[str, object]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _phase(path: Path) -> object:
    return _status(path).get("phase")
