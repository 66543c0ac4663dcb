"""`kill -9` during a paid agent run: the run's reservation is shown as held until the next
start settles it, and then status, history, the index and the dashboard show one spend."""

from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path

from tests.reliability.helpers import FAST, make_project
from tests.support import UNSANDBOXED, seed, start_daemon, wait_for

PAID = {"result": {"summary": "looked around, changed nothing", "cost_usd": 0.18}}


def _status(root: Path) -> tuple[dict[str, object], str]:
    as_json = seed(root, "status", "--json")
    as_text = seed(root, "status")
    assert as_json.returncode == 0 and as_text.returncode == 0, as_json.stderr + as_text.stderr
    return json.loads(as_json.stdout), as_text.stdout


def test_kill_9_during_an_agent_run_then_every_view_agrees_on_the_spend(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    project.task()
    extra = FAST + UNSANDBOXED
    paid = project.seed(project.config([PAID], extra=extra), "once")
    assert [r["cost_usd"] for r in project.records()] == [0.18], paid.stderr[-2000:]

    started = tmp_path / "agent-started"
    hanging = project.config([{"touch": str(started)}, {"hang": True}], extra=extra)
    daemon = start_daemon(project.root, "--config", str(hanging), "once")
    try:
        wait_for(started.exists, 120, "the agent to start", daemon)
    finally:
        os.kill(daemon.pid, signal.SIGKILL)
        daemon.communicate(timeout=60)
    killed = json.loads((project.root / "history" / "status.json").read_text())
    assert killed["phase"] == "agent running"

    # before the next start: what was paid, and the killed run's reservation as held
    before, text = _status(project.root)
    assert before["running"] is False
    assert before["cost_today_usd"] == 0.18
    assert before["held_usd"] == 2.0
    assert "today $0.18 spent" in text and "$2.00 held by a killed run" in text

    # the next start settles it (backend none: recovery, then plans only)
    restarted = project.seed(project.plan_only(), "once")
    assert restarted.returncode == 5, restarted.stderr[-2000:]
    after, text = _status(project.root)
    assert after["cost_today_usd"] == 2.18 and after["held_usd"] == 0.0
    assert "today $2.18 spent" in text and "held" not in text
    history = seed(project.root, "history")
    assert history.stdout.rstrip().endswith("$2.18 spent"), history.stdout
    aborted = next(r for r in project.records() if r["outcome"] == "ABORTED")
    assert aborted["cost_usd"] == 2.0 and aborted["cost_basis"] == "reserved"
    report = seed(project.root, "report")
    assert report.returncode == 0, report.stderr
    index = (project.root / "history" / "README.md").read_text()
    totals = re.search(r"\| \d+ \| [^|]+ \| (\$[\d.]+)[^|]*\| (\$[\d.]+) \|", index)
    assert totals is not None and totals.groups() == ("$2.18", "$2.18"), index
    page = (project.root / "history" / "index.html").read_text()
    assert "<b>$2.18</b><span>spent today" in page and "<b>$2.18</b><span>spent overall" in page
