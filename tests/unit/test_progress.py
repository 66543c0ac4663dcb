"""The progress line: what status.json and the agent's log say, never the agent's escapes."""

from __future__ import annotations

import io
import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

from kernel.shell.progress import NOT_RUNNING, Progress, line, read


def _live(history: Path, log: Path, pid: int, phase: str = "agent running") -> None:
    history.mkdir(parents=True, exist_ok=True)
    since = (datetime.now(UTC) - timedelta(seconds=75)).isoformat()
    detail = f"command on ruff:calc.py:F401; log: {log}"
    (history / "status.json").write_text(
        json.dumps({"pid": pid, "phase": phase, "detail": detail, "since": since})
    )


def test_the_line_shows_phase_time_and_the_agents_latest_line_made_harmless(
    tmp_path: Path,
) -> None:
    log = tmp_path / "agent.log"
    log.write_text("first\n\x1b]0;owned\x07editing \x1b[2Jcalc.py\n\n")
    _live(tmp_path / "history", log, os.getpid())
    reading = read(tmp_path / "history", os.getpid())
    assert reading is not None
    shown = line(reading)
    assert shown.startswith("agent running 1m1") and "command on ruff:calc.py:F401" in shown
    assert (
        shown.endswith("agent: \\x1b]0;owned\\x07editing \\x1b[2Jcalc.py") and "\x1b" not in shown
    )
    assert "log:" not in shown


def test_a_daemon_sees_only_its_own_status_and_follow_sees_a_dead_one_as_stopped(
    tmp_path: Path,
) -> None:
    _live(tmp_path / "history", tmp_path / "agent.log", os.getpid() + 10_000_000)
    assert read(tmp_path / "history", os.getpid()) is None  # an earlier daemon's file
    assert read(tmp_path / "history") == NOT_RUNNING  # no such process


def test_off_a_terminal_one_line_per_phase(tmp_path: Path) -> None:
    out = io.StringIO()
    shown = Progress(tmp_path / "history", out, pid=os.getpid(), tty=False)
    _live(tmp_path / "history", tmp_path / "agent.log", os.getpid(), "analysing")
    shown.tick()
    shown.tick()
    _live(tmp_path / "history", tmp_path / "agent.log", os.getpid(), "verifying")
    shown.tick()
    shown.stop()
    assert out.getvalue() == (
        "analysing: command on ruff:calc.py:F401; log: "
        f"{tmp_path / 'agent.log'}\nverifying: command on ruff:calc.py:F401; log: "
        f"{tmp_path / 'agent.log'}\n"
    )


def test_status_shows_the_agents_log_tail_made_harmless(tmp_path: Path) -> None:
    from kernel.host.context import open_context
    from kernel.isolation.daemonlock import DaemonLock
    from kernel.shell.status import read_status
    from tests.support import SAMPLE, make_repo

    repo = make_repo(tmp_path / "repo", SAMPLE, '[agent]\nbackend = "none"\n')
    ctx = open_context(repo, quiet=True)
    log = tmp_path / "agent.log"
    log.write_text("plain\n\x1b]52;c;ZWNobyBvd25lZA==\x07copied to your clipboard\n")
    _live(ctx.paths.history, log, os.getpid())
    daemon = DaemonLock(ctx.paths.lock)
    daemon.acquire()  # a daemon holds the lock: the live phase counts
    try:
        status = read_status(ctx)
    finally:
        daemon.release()
        ctx.host.stop()  # status asked the module host which backend runs
    assert status.running and status.log_tail[0] == "plain"
    assert status.log_tail[1].endswith("copied to your clipboard")
    assert not any("\x1b" in line or "\x07" in line for line in status.log_tail)


def test_the_line_shows_tokens_and_cost_so_far_and_off_a_terminal_stays_quiet(
    tmp_path: Path,
) -> None:
    history = tmp_path / "history"
    (tmp_path / "agent.log").write_text("editing calc.py\n")
    _live(history, tmp_path / "agent.log", os.getpid())
    live = json.loads((history / "status.json").read_text())
    out = io.StringIO()
    quiet = Progress(history, out, pid=os.getpid(), tty=False)
    quiet.tick()
    for figure in ("1,200 tokens, $0.0100 so far", "3,400 tokens, $0.0300 so far\x1b[2J"):
        (history / "status.json").write_text(json.dumps({**live, "used": figure}))
        reading = read(history, os.getpid())
        assert reading is not None
        quiet.tick()
    assert reading is not None
    shown = line(reading)
    assert shown.endswith("| 3,400 tokens, $0.0300 so far\\x1b[2J | agent: editing calc.py")
    assert len(out.getvalue().splitlines()) == 1  # a new figure is no new phase
    (history / "status.json").write_text(json.dumps({**live, "phase": "verifying", "used": "x"}))
    later = read(history, os.getpid())
    assert later is not None and later.used == ""  # only while the agent runs


def test_so_far_says_tokens_and_cost_and_nothing_before_any() -> None:
    from domain import AgentReport
    from kernel.loop.liveuse import so_far

    assert so_far(AgentReport(success=False)) == ""
    assert so_far(AgentReport(success=False, tokens_used=1234)) == "1,234 tokens so far"
    assert (
        so_far(AgentReport(success=True, tokens_used=12_345, cost_usd=0.01234))
        == "12,345 tokens, $0.0123 so far"
    )


def test_the_watch_reads_only_when_the_output_grew_and_keeps_quiet_on_failures(
    tmp_path: Path,
) -> None:
    import time

    from domain import AgentReport
    from kernel.errors import HostError
    from kernel.loop.liveuse import UsageWatch

    log = tmp_path / "agent.log"
    log.write_text("")
    reads: list[int] = []
    shown: list[str] = []

    def partial() -> AgentReport:
        reads.append(log.stat().st_size)
        if "garbled" in log.read_text():
            raise HostError("the adapter could not read a partial log")
        return AgentReport(success=False, tokens_used=100 * log.stat().st_size)

    def settle() -> None:
        deadline = time.monotonic() + 5
        count = -1
        while count != len(reads) and time.monotonic() < deadline:
            count = len(reads)
            time.sleep(0.15)

    with UsageWatch((log, tmp_path / "result.json"), partial, shown.append, interval_s=0.05):
        settle()
        assert reads == [] and shown == []  # an empty log is not read
        log.write_text("12345")
        settle()
        assert reads == [5] and shown == ["500 tokens so far"]  # read once: it did not grow
        log.write_text("12345 garbled")
        settle()
        assert shown == ["500 tokens so far"]  # a failed reading shows nothing new
        log.write_text("1234567890")
        settle()
    assert shown == ["500 tokens so far", "1,000 tokens so far"]
    assert reads == [5, 13, 10]
