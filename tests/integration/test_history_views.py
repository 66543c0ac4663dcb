"""history/ as people read it, from a real daemon: the index, the CLI views, metrics over HTTP."""

from __future__ import annotations

import json
import re
import signal
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from domain import DaemonStatus, IterationRecord
from tests.histories import every_kind, write_records
from tests.support import (
    SAMPLE,
    agent_config,
    agent_io,
    make_repo,
    records,
    seed,
    start_daemon,
    wait_for,
)


def _status(repo: Path) -> dict[str, Any]:
    try:
        return json.loads((repo / "history" / "status.json").read_text())
    except (OSError, ValueError):
        return {}


@pytest.fixture(scope="module")
def three(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A daemon that landed two lint fixes and planned a failing test it cannot take, now idle."""
    files = {
        **SAMPLE,
        "calc.py": "import os\n\n\n" + SAMPLE["calc.py"],
        "util.py": "import sys\n\n\ndef one():\n    return 1\n",
        "tests/test_calc.py": SAMPLE["tests/test_calc.py"]
        + "\n\ndef test_broken():\n    assert mul(2, 2) == 5\n",
    }
    repo = make_repo(
        tmp_path_factory.mktemp("views") / "repo",
        files,
        '[agent]\nbackend = "ruff-fix"\n[daemon]\npoll_interval_s = 300\n',
    )
    daemon = start_daemon(repo, "run", "--metrics-port", "0", python=sys.executable)
    try:
        wait_for(lambda: len(records(repo)) >= 3, 300, "three iterations")
        wait_for(
            lambda: "re-analysis" in str(_status(repo).get("detail", "")), 120, "the daemon to idle"
        )
        idle_since = _status(repo)["since"]
        yield repo
        # nothing the tests did (reading history, writing index.html) woke the idle daemon
        assert _status(repo)["since"] == idle_since
        url = _status(repo)["metrics_url"]
        daemon.send_signal(signal.SIGTERM)
        _, stderr = daemon.communicate(timeout=60)
        assert daemon.returncode == 0, stderr
        with pytest.raises(urllib.error.URLError):
            urllib.request.urlopen(url, timeout=5)
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.communicate(timeout=30)


def test_index_after_three_iterations_lists_them_newest_first_with_totals(three: Path) -> None:
    text = (three / "history" / "README.md").read_text()
    ids = [r["iteration_id"] for r in records(three)]
    listed = [line.split("](")[0][3:] for line in text.splitlines() if line.startswith("| [iter-")]
    assert listed == list(reversed(ids))
    for iteration_id in ids:
        assert f"]({iteration_id}/report.md)" in text
        assert (three / "history" / iteration_id / "report.md").exists()
    assert "| 3 | 100% (2 of 2 that ran an agent) |" in text
    assert "Outcomes: SUCCESS 2, WAITING 1." in text
    assert "Not halted" in text
    assert "`pytest:tests/test_calc.py::test_broken`" in text  # top of the latest ranking


def test_report_md_says_why_the_gap_was_chosen_over_the_others(three: Path) -> None:
    waiting, landed = records(three)[:2]
    assert waiting["outcome"] == "WAITING" and landed["outcome"] == "SUCCESS"
    assert landed["open_gaps"] == {"pytest": 1, "ruff": 2}
    ranking = {g["key"]: g for g in landed["ranking"]}
    assert ranking[waiting["gap"]["key"]]["skipped"] == "waiting for an agent"
    assert ranking[landed["gap"]["key"]]["rank"] == 2
    text = (three / "history" / landed["iteration_id"] / "report.md").read_text()
    assert "Ranked #2 of 3 open gaps" in text
    assert "Every gap ranked above it was passed over" in text
    others = text.split("Other gaps at the time:", 1)[1].split("##", 1)[0]
    assert "`pytest:tests/test_calc.py::test_broken`" in others
    assert "waiting for an agent" in others and "ranked lower" in others


def test_history_lists_filters_and_prints_one_report(three: Path) -> None:
    ids = [r["iteration_id"] for r in records(three)]
    listing = seed(three, "history")
    assert listing.returncode == 0, listing.stderr
    lines = listing.stdout.splitlines()
    assert [line.split()[0] for line in lines[1:4]] == list(reversed(ids))
    assert lines[-1].startswith("3 shown, 100% landed (2 of 2 agent runs)")

    landed = seed(three, "history", "--outcome", "success").stdout
    assert landed.count("SUCCESS") == 2 and "WAITING" not in landed
    tests = seed(three, "history", "--source", "pytest").stdout
    assert "WAITING" in tests and "SUCCESS " not in tests
    assert "no iterations match" in seed(three, "history", "--source", "inbox").stdout
    bad = seed(three, "history", "--outcome", "landed")
    assert bad.returncode == 2 and "valid: SUCCESS" in bad.stderr

    as_json = seed(three, "history", "--json").stdout.splitlines()
    assert [IterationRecord.model_validate_json(x).iteration_id for x in as_json] == list(
        reversed(ids)
    )
    one = seed(three, "history", ids[0])
    assert one.returncode == 0
    assert one.stdout == (three / "history" / ids[0] / "report.md").read_text()
    missing = seed(three, "history", "iter-9999-20260101-000000")
    assert missing.returncode == 2 and "no iteration" in missing.stderr


def test_status_of_an_idle_daemon(three: Path) -> None:
    result = seed(three, "status", "--json")
    assert result.returncode == 0, result.stderr
    status = DaemonStatus.model_validate_json(result.stdout)
    assert status.running and status.phase == "idle"
    assert status.backend == "ruff-fix"
    assert [g.key for g in status.top_gaps] == ["pytest:tests/test_calc.py::test_broken"]
    assert status.open_gaps == {"pytest": 1}
    assert status.metrics_url.startswith("http://127.0.0.1:")
    text = seed(three, "status").stdout
    assert "idle for" in text and "next re-analysis at" in text
    assert "gaps:        1 open (pytest 1)" in text
    assert "budget:      today $0.00 spent of $10.00" in text


def test_metrics_are_served_over_http(three: Path) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    url = _status(three)["metrics_url"]
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.status == 200
        body = response.read().decode()
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
    }
    assert samples[("seed_iterations_total", (("outcome", "SUCCESS"),))] == 2
    assert samples[("seed_iterations_total", (("outcome", "WAITING"),))] == 1
    assert samples[("seed_iterations_total", (("outcome", "ROLLBACK"),))] == 0
    assert samples[("seed_open_gaps", (("source", "pytest"),))] == 1
    assert samples[("seed_phase_duration_seconds_count", (("phase", "verify"),))] == 2
    assert samples[("seed_phase_duration_seconds_sum", (("phase", "verify"),))] > 0
    assert samples[("seed_cost_usd_total", ())] == 0
    assert samples[("seed_halted", ())] == 0
    assert samples[("seed_daemon_phase", (("phase", "idle"),))] == 1


def test_report_writes_a_dashboard_of_every_iteration(three: Path) -> None:
    result = seed(three, "report")
    assert result.returncode == 0, result.stderr
    page = three / "history" / "index.html"
    assert f"wrote {page}" in result.stdout and "3 iterations" in result.stdout
    html = page.read_text()
    for iteration_id in (r["iteration_id"] for r in records(three)):
        assert f'href="{iteration_id}/report.md"' in html


def test_status_while_a_scripted_agent_is_running(tmp_path: Path) -> None:
    started, release = agent_io(tmp_path) / "agent-started", agent_io(tmp_path) / "release"
    steps = [
        {"print": "reading calc.py\n"},
        {"print": "editing calc.py\n"},
        {"print": "running the tests\n"},
        {"touch": str(started)},
        {"wait_for": str(release)},
    ]
    repo = make_repo(
        tmp_path / "repo",
        {**SAMPLE, "ROADMAP.md": "# Next\n- [ ] add a sub function\n"},
        agent_config(tmp_path, steps),
    )
    daemon = start_daemon(repo)
    try:
        wait_for(started.exists, 240, "the agent to start")
        result = seed(repo, "status")
        assert result.returncode == 0, result.stderr
        text = result.stdout
        assert "daemon:      running (pid " in text
        assert "): agent running for " in text
        assert "| running the tests" in text and "| reading calc.py" in text
        assert "backend:     command (configured in seed.toml)" in text
        assert "halted:      no" in text
        # the run under way holds the iteration's cap until its usage is known
        assert re.search(
            r"budget:      today \$0\.00 spent \(and \$2\.00 held by the run under way, "
            r"iter-0001-\S+\) of \$10\.00, \$8\.00 left",
            text,
        ), text
        assert "1. low      roadmap     add a sub function" in text
        status = DaemonStatus.model_validate_json(seed(repo, "status", "--json").stdout)
        assert status.phase == "agent running" and status.phase_since is not None
        assert status.log_tail[-1] == "running the tests"
        assert status.top_gaps[0].source == "roadmap"
        daemon.send_signal(signal.SIGTERM)  # stopped mid-run: ABORTED, still fully reported
        _, stderr = daemon.communicate(timeout=60)
        assert daemon.returncode == 0, stderr
    finally:
        release.touch()
        if daemon.poll() is None:
            daemon.kill()
            daemon.communicate(timeout=30)
    [aborted] = records(repo)
    assert aborted["outcome"] == "ABORTED"
    report = (repo / "history" / aborted["iteration_id"] / "report.md").read_text()
    assert report.startswith(f"# {aborted['iteration_id']}: ABORTED")
    assert "Ranked #1 of 1 open gap" in report and "rendering failed" not in report
    index = (repo / "history" / "README.md").read_text()
    assert f"| [{aborted['iteration_id']}]" in index and "| ABORTED |" in index
    stopped = seed(repo, "status").stdout
    assert "daemon:      not running" in stopped and "| " not in stopped
    assert "gaps:        1 open (roadmap 1)" in stopped  # the last analysis is kept


def test_metrics_without_prometheus_client_is_a_clear_usage_error(tmp_path: Path) -> None:
    blocker = tmp_path / "blocked"
    blocker.mkdir()
    (blocker / "prometheus_client.py").write_text("raise ImportError('blocked for this test')\n")
    repo = make_repo(tmp_path / "repo", SAMPLE, '[agent]\nbackend = "none"\n')
    result = seed(
        repo, "run", "--metrics-port", "0", env={"PYTHONPATH": str(blocker)}, python=sys.executable
    )
    assert result.returncode == 2
    assert "--metrics-port needs the prometheus_client package" in result.stderr
    assert "Traceback" not in result.stderr
    assert "not running" in seed(repo, "status").stdout  # the lock was let go
    plain = seed(repo, "once", env={"PYTHONPATH": str(blocker)}, python=sys.executable)
    assert plain.returncode == 5, plain.stderr  # without the flag it is never imported


def test_resume_rewrites_the_index_without_the_halt(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", SAMPLE)
    history = repo / "history"
    write_records(history, every_kind()[:2])
    (history / "halt.json").write_text(
        json.dumps({"halted": True, "reason": "ALLOWLIST_VIOLATION in iter-0002"})
    )
    result = seed(repo, "resume")
    assert result.returncode == 0, result.stderr
    index = (history / "README.md").read_text()
    assert "Not halted" in index and "HALTED" not in index
    events = index.split("## Recent events", 1)[1].split("##", 1)[0]
    assert "resume: resumed (was: ALLOWLIST_VIOLATION in iter-0002)" in events
    assert every_kind()[1].iteration_id in index
