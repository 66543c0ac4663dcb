"""`kill -9` in the middle of a tournament: the next start leaves no candidate's checkout,
branch, process or reservation behind, and records the iteration once with every spend."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from tests.integration.test_candidates import RIGHT, _config, _left_behind
from tests.integration.test_ratchet import BUGGY, TOOLS
from tests.support import agent_io, make_repo, records, seed, start_daemon, wait_for

pytestmark = pytest.mark.usefixtures("bwrap")

PAID = {"result": {"summary": "fixed", "cost_usd": 0.25}}


def _agents_alive(script: Path) -> list[int]:
    """Processes running the scripted agent of this test (its script's path in the argv)."""
    found: list[int] = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                argv = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if str(script).encode() in argv:
                found.append(int(entry))
    return found


def test_kill_9_mid_tournament_leaves_nothing_and_counts_each_candidate_once(
    tmp_path: Path,
) -> None:
    io = agent_io(tmp_path)
    hang = [{"touch": str(io / "c2")}, {"hang": True}]
    hang3 = [{"touch": str(io / "c3")}, {"hang": True}]
    money = "[budget]\nmax_cost_usd_per_iteration = 0.5\n"
    config = _config(tmp_path, {"1": [*RIGHT, PAID], "2": hang, "3": hang3})
    repo = make_repo(tmp_path / "repo", BUGGY, config.replace(TOOLS, TOOLS + money))
    ledger = repo / "history" / "ledger.jsonl"

    daemon = start_daemon(repo, "once")
    try:
        wait_for(
            lambda: (io / "c2").exists() and (io / "c3").exists() and ledger.exists(),
            120,
            "two candidates hanging and the first one's spend in the ledger",
            daemon,
        )
    finally:
        os.kill(daemon.pid, signal.SIGKILL)
        daemon.communicate(timeout=60)
    live = json.loads((repo / "history" / "status.json").read_text())
    for k in (2, 3):  # status shows each candidate's phase
        assert f"candidate {k} (command): agent running" in live["detail"], live
    before = json.loads(seed(repo, "status", "--json").stdout)
    assert before["held_usd"] == 1.0  # the two running candidates' reservations, held

    plan_only = tmp_path / "none.toml"
    plan_only.write_text('[agent]\nbackend = "none"\n' + TOOLS, encoding="utf-8")
    restarted = seed(repo, "--config", str(plan_only), "once")

    assert restarted.returncode in (0, 5), restarted.stderr[-3000:]
    assert _left_behind(repo) == []
    assert _agents_alive(tmp_path / "candidates.json") == []
    assert not (repo / ".git" / "seed" / "running.json").exists()
    spent = [json.loads(line) for line in ledger.read_text().splitlines()]
    by_run = {e["iteration_id"][-3:]: (e["cost_usd"], e["cost_basis"]) for e in spent}
    assert by_run == {"-c1": (0.25, "reported"), "-c2": (0.5, "reserved"), "-c3": (0.5, "reserved")}
    [aborted] = [r for r in records(repo) if r["outcome"] == "ABORTED"]
    assert aborted["cost_usd"] == 1.25
    after = json.loads(seed(repo, "status", "--json").stdout)
    assert after["held_usd"] == 0.0 and after["cost_today_usd"] == 1.25


def test_ctrl_c_mid_tournament_leaves_nothing_and_settles_the_runs_cut_short(
    tmp_path: Path,
) -> None:
    io = agent_io(tmp_path)
    hang = [{"touch": str(io / "c2")}, {"hang": True}]
    money = "[budget]\nmax_cost_usd_per_iteration = 0.5\n"
    config = _config(tmp_path, {"1": [*RIGHT, PAID], "2": hang})
    repo = make_repo(tmp_path / "repo", BUGGY, config.replace(TOOLS, TOOLS + money))
    ledger = repo / "history" / "ledger.jsonl"

    daemon = start_daemon(repo, "once")
    status = repo / "history" / "status.json"
    wait_for(
        lambda: (io / "c2").exists() and "candidate 1 (command): passed" in status.read_text(),
        120,
        "candidate 1 judged and candidate 2 hanging",
        daemon,
    )
    daemon.send_signal(signal.SIGINT)
    daemon.communicate(timeout=120)

    assert _left_behind(repo) == []
    assert _agents_alive(tmp_path / "candidates.json") == []
    spent = [json.loads(line) for line in ledger.read_text().splitlines()]
    by_run = {e["iteration_id"][-3:]: (e["cost_usd"], e["cost_basis"]) for e in spent}
    assert by_run == {"-c1": (0.25, "reported"), "-c2": (0.5, "reserved")}
    [aborted] = records(repo)
    assert aborted["outcome"] == "ABORTED" and aborted["cost_usd"] == 0.75
    assert [c["number"] for c in aborted["candidates"]] == [1]  # the one judged before the stop
    status = json.loads(seed(repo, "status", "--json").stdout)
    assert status["held_usd"] == 0.0 and status["cost_today_usd"] == 0.75
