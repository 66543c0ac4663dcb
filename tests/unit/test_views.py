"""The text views and the metrics page come from the reporter through the module host; the
kernel falls back to plain text of its own only when the host fails."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from domain import DaemonStatus, IterationOutcome, MetricsSnapshot, PhaseTotal
from kernel.errors import HostError
from kernel.host.context import open_context
from kernel.loop import reporting
from kernel.records.store import RecordStore
from kernel.shell import metrics
from kernel.shell.status import status_text
from modules.reports import text
from modules.reports.metrics import render_metrics
from tests.histories import START, record
from tests.support import SAMPLE, make_repo

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
STATUS = DaemonStatus(root="/repo", halted=True, halt_reason="GROWTH_LIMIT 3 times", iterations=4)
SNAP = MetricsSnapshot(
    by_outcome={"SUCCESS": 1}, phases={"verify": PhaseTotal(seconds=2.5, count=1)}, phase="idle"
)


def test_the_host_renders_status_history_and_metrics_as_the_reporter_does(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", SAMPLE)
    store = RecordStore(repo / "history")
    store.append(record(1, START, IterationOutcome.SUCCESS))
    store.close()
    ctx = open_context(repo, quiet=True)
    try:
        rows = ctx.store.summaries()
        assert status_text(ctx, STATUS).startswith("repository:  /repo\ndaemon:      not running")
        assert ctx.host.render_status(STATUS, NOW) == "\n".join(text.status_lines(STATUS, NOW))
        assert reporting.history_text(ctx, rows, 1, False) == "\n".join(
            text.history_lines(rows, 1, False)
        )
        assert metrics.exposition(ctx, SNAP) == render_metrics(SNAP)
    finally:
        ctx.host.stop()
        ctx.store.close()


def test_status_history_and_metrics_still_answer_when_the_modules_are_broken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "repo", SAMPLE)
    ctx = open_context(repo, quiet=True)

    def broken() -> None:
        raise HostError("the modules do not load")

    monkeypatch.setattr(ctx, "start_host", broken)
    shown = status_text(ctx, STATUS)
    assert "halted:      YES: GROWTH_LIMIT 3 times; run `python seed.py resume`" in shown
    assert "iterations:  4 in all" in shown
    assert "(the status view could not be rendered: the modules do not load)" in shown
    listed = reporting.history_text(ctx, [], 0, False)
    assert listed == "(the history view could not be rendered: the modules do not load)"
    page = metrics.exposition(ctx, SNAP)  # the host is not running
    assert 'seed_daemon_phase{phase="idle"} 1.0' in page and "seed_halted 0.0" in page
    ctx.store.close()
