"""What reports read from the store's index, the ranking kept in records, and the text views."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from domain import (
    DaemonStatus,
    Gap,
    GapCategory,
    GapReport,
    HistoryDigest,
    HistoryTotals,
    InboxItem,
    IterationOutcome,
    PlanningOrder,
    Priority,
    RankedGap,
    Severity,
)
from kernel.host.host import ModuleHost
from kernel.loop import reporting
from kernel.records.store import RecordStore
from modules import registry
from modules.reports import text as views
from modules.server import ContractError, check_contract
from tests.histories import START, every_kind, history_rows, record, write_records
from tests.support import SEED_HOME


def test_report_rows_totals_and_phase_sums_come_from_the_index(tmp_path: Path) -> None:
    store = RecordStore(tmp_path / "history")
    samples = every_kind()
    for item in samples:
        store.append(item)
    rows = store.report_rows()
    assert [r.iteration_id for r in rows] == [r.iteration_id for r in reversed(samples)]
    newest = samples[-1]
    assert rows[0].durations == newest.durations and rows[0].open_gaps == newest.open_gaps
    assert rows[0].gap_category == newest.gap.category.value
    assert [r.iteration_id for r in store.report_rows(limit=2)] == [
        r.iteration_id for r in rows[:2]
    ]
    totals = store.totals()
    assert totals.iterations == len(samples)
    assert totals.by_outcome["SUCCESS"] == 1
    assert totals.cost == sum(r.cost_usd for r in samples)
    phases = store.phase_totals()
    assert phases["analyse"] == (sum(r.durations["analyse"] for r in samples), len(samples))
    assert phases["land"][1] == 1


def test_an_index_written_before_the_details_table_is_rebuilt(tmp_path: Path) -> None:
    history = tmp_path / "history"
    write_records(history, every_kind()[:3])
    store = RecordStore(history)
    assert store.count() == 3
    store.close()
    db = sqlite3.connect(history / ".index.sqlite")
    db.execute("DROP TABLE details")
    db.execute("DELETE FROM meta WHERE key = 'details'")
    db.commit()
    db.close()

    again = RecordStore(history)
    assert all(r.durations for r in again.report_rows())
    assert again.count() == 3


def _gap(n: int, source: str = "ruff") -> Gap:
    return Gap(
        key=f"{source}:f{n}.py:F401",
        category=GapCategory.QUALITY,
        source=source,
        severity=Severity.HIGH,
        title=f"F401 in f{n}.py",
        rank_reason=f"#{n}",
    )


def test_ranking_keeps_the_top_five_and_the_chosen_gap_wherever_it_stood() -> None:
    report = GapReport(gaps=tuple(_gap(n) for n in range(1, 10)))
    held = {"ruff:f1.py:F401": "quarantined", "ruff:f2.py:F401": "waiting for an agent"}
    top = reporting.ranked(report, held, chosen="ruff:f8.py:F401")
    assert [g.rank for g in top] == [1, 2, 3, 4, 5, 8]
    assert [g.skipped for g in top[:3]] == ["quarantined", "waiting for an agent", ""]
    assert top[-1].rank_reason == "#8"
    assert reporting.open_gaps(GapReport(gaps=(_gap(1), _gap(2), _gap(3, "pytest")))) == {
        "pytest": 1,
        "ruff": 2,
    }


def test_status_text_shows_phase_time_log_tail_budget_gaps_and_backend() -> None:
    now = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
    status = DaemonStatus(
        root="/repo",
        running=True,
        pid=42,
        phase="agent running",
        phase_detail="command on roadmap:abc; log: /repo/history/x/agent.log",
        phase_since=now - timedelta(minutes=3, seconds=12),
        halted=True,
        halt_reason="3 consecutive failures across different gaps",
        backend="command",
        backend_reason="configured in seed.toml",
        iterations=12,
        iterations_today=3,
        cost_today_usd=1.25,
        budget_left_today_usd=8.75,
        budget_left_today_iterations=97,
        max_cost_usd_per_day=10.0,
        max_iterations_per_day=100,
        top_gaps=(
            RankedGap(
                key="pytest:t::x",
                category=GapCategory.QUALITY,
                source="pytest",
                title="test x fails",
                rank=1,
                severity=Severity.CRITICAL,
                skipped="quarantined",
            ),
        ),
        quarantined=("pytest:t::x",),
        open_gaps={"pytest": 1, "ruff": 4},
        gaps_as_of=now - timedelta(seconds=90),
        log_tail=("step 1", "step 2"),
        metrics_url="http://127.0.0.1:9000/metrics",
    )
    text = "\n".join(views.status_lines(status, now))
    assert "running (pid 42): agent running for 3m12s" in text
    assert "| step 1\n" in text and text.count("| step") == 2
    assert "YES: 3 consecutive failures across different gaps; run `python seed.py resume`" in text
    assert "command (configured in seed.toml)" in text
    assert "today $1.25 spent of $10.00, $8.75 left; 3 of 100 runs, 97 left" in text
    assert "5 open (pytest 1, ruff 4) as of 1m30s ago" in text
    assert "1. critical pytest      test x fails  [quarantined]" in text
    assert "metrics:     http://127.0.0.1:9000/metrics" in text
    assert "\x1b" not in text  # no colour codes in a log file

    stopped = "\n".join(views.status_lines(DaemonStatus(root="/repo"), now))
    assert "not running" in stopped and "not analysed yet" in stopped


def test_history_text_lists_newest_first_with_a_summary(tmp_path: Path) -> None:
    store = RecordStore(tmp_path / "history")
    for seq, outcome in enumerate(
        (IterationOutcome.SUCCESS, IterationOutcome.ROLLBACK, IterationOutcome.WAITING), start=1
    ):
        store.append(record(seq, START + timedelta(hours=seq), outcome, source="ruff"))
    rows = store.summaries()
    lines = views.history_lines(rows[:2], len(rows), filtered=False)
    assert lines[0].startswith("iteration")
    assert lines[1].startswith("iter-0003-") and "WAITING" in lines[1]
    assert lines[2].startswith("iter-0002-") and "ROLLBACK" in lines[2]
    assert lines[-1] == "2 shown of 3, 0% landed (0 of 1 agent run), $0.01 spent"
    assert views.history_lines([], 0, filtered=True) == ["no iterations match"]


def test_the_module_host_renders_reports_the_index_and_the_dashboard(tmp_path: Path) -> None:
    host = ModuleHost(SEED_HOME, tmp_path / "host.log")
    samples = every_kind()
    digest = HistoryDigest(generated_at=START, rows=history_rows(samples))
    try:
        host.start()
        report = host.render_record(samples[0])
        index = host.render_index(digest)
        page = host.render_dashboard(digest)
    finally:
        host.stop()
    assert report.startswith(f"# {samples[0].iteration_id}: SUCCESS")
    assert index.startswith("# history") and samples[-1].iteration_id in index
    assert page.startswith("<!DOCTYPE html>") and 'id="chart-outcomes"' in page


def test_a_reporter_without_the_index_or_dashboard_is_refused_by_name() -> None:
    class OnlyRecords:
        contract_version = 1

        def render_record(self, record: object) -> str:
            return ""

    with pytest.raises(ContractError, match="missing render_dashboard, render_index"):
        check_contract("reporter", "modules.reports.old:REPORTER", OnlyRecords())
    check_contract("reporter", registry.REPORTER, registry.resolve(registry.REPORTER))


def test_status_says_where_each_waiting_task_stands_in_the_queue() -> None:
    broken = Gap(
        key="pytest:collect:tests/test_a.py",
        category=GapCategory.QUALITY,
        source="pytest",
        severity=Severity.CRITICAL,
        title="tests fail to collect",
    )
    tasks = [_inbox(n) for n in ("foo.md", "bar.md", "held.md")]
    report = GapReport(gaps=(broken, tasks[0], _gap(1), _gap(2), tasks[1], tasks[2]))
    order = PlanningOrder(keys=tuple(g.key for g in report.gaps))
    passed = {"ruff:f1.py:F401": "quarantined", "inbox:held.md": "waiting"}
    queue = reporting.queue(report, passed, order)
    status = DaemonStatus(root="/repo", queue=queue)
    lines = views.status_lines(status, datetime(2026, 6, 1, tzinfo=UTC))
    assert "queue:       inbox/foo.md: 2nd, after build: tests fail to collect" in lines
    assert "             inbox/bar.md: 4th, after build: tests fail to collect and 2 more" in lines
    assert "             inbox/held.md: passed over (waiting)" in lines
    # the planner's order is the queue: a task it takes first is next, whatever the ranking
    first = PlanningOrder(keys=("inbox:bar.md", broken.key, "inbox:foo.md"))
    by_name = {t.name: t for t in reporting.queue(report, {}, first)}
    assert by_name["bar.md"].place == 1 and by_name["foo.md"].place == 3
    assert by_name["held.md"].passed_over == "not planned now"


def test_status_places_a_task_dropped_since_the_analysis_and_forgets_one_gone() -> None:
    live = {
        "queue": [
            {"name": "old.md", "place": 2, "priority": "normal"},
            {"name": "done.md", "place": 1, "priority": "high"},
            {"name": "later.md", "place": 4, "priority": "low"},
        ],
        "next_gap": ["inbox", "done"],
        "new_task_place": {"critical": 1, "high": 2, "normal": 3, "low": 5},
    }
    dropped = [
        InboxItem(name="new.md", title="the new one", priority=Priority.HIGH, received_at=START)
    ]
    queue = reporting.queue_now(live, {"old.md", "later.md", "new.md"}, dropped)
    places = {t.name: t.place for t in queue}
    # done.md left: the others move up; new.md (high) goes before the normal task
    assert places == {"new.md": 1, "old.md": 2, "later.md": 4}
    assert all(t.ahead_title == "the new one" for t in queue if t.place > 1)


def _inbox(name: str) -> Gap:
    item = InboxItem(name=name, title=name, received_at=START)
    return Gap(
        key=f"inbox:{name}",
        category=GapCategory.INBOX,
        source="inbox",
        severity=Severity.NORMAL,
        title=name,
        inbox=item,
    )


def test_every_success_rate_counts_the_iterations_that_ran_an_agent_alike(tmp_path: Path) -> None:
    from modules.reports.index import render_index
    from modules.reports.trends import success_by_source

    store = RecordStore(tmp_path / "history")
    ran = record(1, START, IterationOutcome.SUCCESS, source="ruff")
    refused = record(2, START + timedelta(hours=1), IterationOutcome.ROLLBACK, source="ruff")
    # kept work landed later: a landing in which no agent ran
    kept = record(3, START + timedelta(hours=2), IterationOutcome.SUCCESS, source="ruff")
    kept = kept.model_copy(
        update={"agent_exit_code": None, "durations": {"analyse": 1.0, "land": 0.4}}
    )
    for item in (ran, refused, kept):
        store.append(item)
    assert [r.ran_agent for r in (ran, refused, kept)] == [True, True, False]
    totals = store.totals()
    assert (totals.agent_runs, totals.agent_landed) == (2, 1)
    rows = [reporting.history_row(r) for r in store.report_rows()]
    assert [r.ran_agent for r in rows] == [False, True, True]
    index = render_index(
        HistoryDigest(
            generated_at=START,
            rows=tuple(rows),
            totals=HistoryTotals(
                iterations=totals.iterations,
                by_outcome=totals.by_outcome,
                agent_runs=totals.agent_runs,
                agent_landed=totals.agent_landed,
            ),
        )
    )
    assert "50% (1 of 2 that ran an agent)" in index, index
    assert success_by_source(rows) == [("ruff", 0.5, 1, 2)]
    listed = views.history_lines(store.summaries(), 3, filtered=False)
    assert "50% landed (1 of 2 agent runs)" in listed[-1], listed[-1]
