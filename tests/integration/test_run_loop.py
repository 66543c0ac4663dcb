"""`python seed.py` (run): iterate while the agent can take a gap, then idle without re-planning."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

from tests.support import (
    SAMPLE,
    branches,
    git,
    make_repo,
    records,
    start_daemon,
    wait_for,
    worktrees,
)


def test_run_lands_what_it_can_plans_the_rest_once_then_idles_and_stops_on_sigterm(
    tmp_path: Path,
) -> None:
    files = {
        **SAMPLE,
        "calc.py": "import os\n\n\n" + SAMPLE["calc.py"],
        "util.py": "import sys\n\n\ndef one():\n    return 1\n",
        "tests/test_calc.py": SAMPLE["tests/test_calc.py"]
        + "\n\ndef test_broken():\n    assert mul(2, 2) == 5\n",
    }
    repo = make_repo(
        tmp_path / "repo", files, '[agent]\nbackend = "ruff-fix"\n[daemon]\npoll_interval_s = 1\n'
    )
    start = git(repo, "rev-parse", "HEAD").strip()
    daemon = start_daemon(repo)
    try:
        wait_for(lambda: len(records(repo)) >= 3, 240, "two landings and one waiting plan", daemon)
        status = repo / "history" / "status.json"
        wait_for(
            lambda: json.loads(status.read_text()).get("phase") == "idle",
            120,
            "the daemon to idle",
            daemon,
        )
        time.sleep(3)  # three timer ticks: re-analysis must not plan the waiting gap again
        seen = records(repo)
        daemon.send_signal(signal.SIGTERM)
        _, stderr = daemon.communicate(timeout=60)
    finally:
        if daemon.poll() is None:
            daemon.kill()
    assert daemon.returncode == 0, stderr
    outcomes = sorted((r["gap"]["key"], r["outcome"]) for r in seen)
    assert outcomes == [
        ("pytest:tests/test_calc.py::test_broken", "WAITING"),
        ("ruff:calc.py:F401", "SUCCESS"),
        ("ruff:util.py:F401", "SUCCESS"),
    ]
    assert records(repo) == seen
    assert git(repo, "rev-list", "--count", f"{start}..HEAD").strip() == "2"
    waiting = next(r for r in seen if r["outcome"] == "WAITING")
    assert (repo / "history" / waiting["iteration_id"] / "plan.json").exists()
    assert "waiting for an agent" in waiting["reason"]
    assert branches(repo) == [] and worktrees(repo) == [str(repo)]
    assert "Traceback" not in stderr and "error" not in stderr.lower()
