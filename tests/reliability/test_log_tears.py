"""A log torn while the daemon runs: no record is swallowed, no iteration number given twice."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

from domain import Event
from kernel.records.budget import LedgerEntry
from tests.reliability.helpers import DO_THE_TASK, FAST, make_project
from tests.support import agent_io, seed, start_daemon, wait_for

NEG = "\n\ndef neg(a):\n    return -a\n"
NEG_TEST = "\n\ndef test_neg():\n    from calc import neg\n\n    assert neg(4) == -4\n"


def _ids_in_history(root: Path) -> list[str]:
    """The iteration ids `seed.py history` lists (what a person sees)."""
    shown = seed(root, "history")
    assert shown.returncode == 0, shown.stderr
    return re.findall(r"iter-\d{4,}-\d{8}-\d{6}", shown.stdout)


def test_a_record_appended_after_a_tear_survives_the_next_start(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    log = project.root / "history" / "records.jsonl"
    project.task(name="one.md")
    first = project.seed(project.config(DO_THE_TASK, extra=FAST), "once")
    assert first.returncode == 0, first.stderr
    [one] = project.records()
    assert one["outcome"] == "SUCCESS"

    io = agent_io(tmp_path)
    started, release = io / "agent-started", io / "release"
    steps = [
        {"touch": str(started)},
        {"wait_for": str(release)},
        {"append": "calc.py", "text": NEG},
        {"append": "tests/test_calc.py", "text": NEG_TEST},
    ]
    project.task("Add a neg(a) function to calc.py that returns -a, with a test.", name="two.md")
    daemon = start_daemon(project.root, "--config", str(project.config(steps, extra=FAST)), "once")
    try:
        wait_for(started.exists, 240, "the second agent to start", alive=daemon)
        whole = log.read_bytes()
        log.write_bytes(whole[:-40])  # the log is cut mid-line while the daemon works
    finally:
        release.touch()
    _, stderr = daemon.communicate(timeout=300)
    assert daemon.returncode == 0, stderr

    # the next start repairs the log, then plans a third task (no agent): one more record
    project.task("Add a half(a) function to calc.py that returns a / 2.", name="three.md")
    again = project.seed(project.plan_only(), "once")
    assert again.returncode == 5, again.stderr

    listed = _ids_in_history(project.root)
    outcomes = {r["iteration_id"]: r["outcome"] for r in project.records()}
    assert one["iteration_id"] in listed, "the torn record is restored from its folder"
    assert [o for o in outcomes.values()].count("SUCCESS") == 2, outcomes
    assert len(listed) == 3 and len(outcomes) == 3
    numbers = [int(i.split("-")[1]) for i in outcomes]
    assert sorted(numbers) == [1, 2, 3], "an iteration number was given twice"
    # every line of the log is one whole JSON object; the torn bytes are kept aside, and said
    for line in log.read_bytes().splitlines():
        assert isinstance(json.loads(line), dict)
    [aside] = (project.root / "history").glob("records.jsonl.torn-*")
    assert aside.read_bytes() == whole[:-40]
    said = [e["message"] for e in project.events("recovery")]
    assert any("records.jsonl" in m and "set aside" in m for m in said), said


def test_torn_and_glued_events_and_ledger_are_repaired_at_start(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    history = project.root / "history"
    history.mkdir()
    now = datetime.now(UTC)
    spend = LedgerEntry(at=now, iteration_id="iter-0007-x", backend="codex", cost_usd=2.5)
    old = Event(at=now, kind="halt", message="an old halt")
    (history / "ledger.jsonl").write_bytes(b'{"at": "20' + spend.model_dump_json().encode() + b"\n")
    (history / "events.jsonl").write_bytes(b'{"at": "2026-' + old.model_dump_json().encode())
    project.task()

    started = project.seed(project.plan_only(), "once")

    assert started.returncode == 5, started.stderr
    said = [e["message"] for e in project.events("recovery")]
    assert any("ledger.jsonl" in m and "kept 1 whole object(s)" in m for m in said), said
    assert any("events.jsonl" in m and "kept 1 whole object(s)" in m for m in said), said
    assert project.events("halt")[0]["message"] == "an old halt"  # the glued event is kept
    assert project.status()["cost_today_usd"] == 2.5  # the glued spend still counts
    [aside] = history.glob("ledger.jsonl.torn-*")
    assert aside.read_bytes() == b'{"at": "20'
    assert [r["outcome"] for r in project.records()] == ["WAITING"]
