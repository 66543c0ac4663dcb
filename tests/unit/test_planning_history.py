"""The history the planner is given: briefs read from the record index, never a scan of the log."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

from domain import (
    Diagnostic,
    FailureCategory,
    Gap,
    GapCategory,
    GapReport,
    IterationOutcome,
    IterationRecord,
    Severity,
    Tool,
    gap_ref,
)
from kernel.loop.loop import for_planner, planning_history
from kernel.loop.quarantine import quarantined
from kernel.records.signature import gap_signature
from kernel.records.store import BRIEF_DETAIL_CHARS, BRIEF_FAILURES, RecordStore, brief_of
from modules.planner.fsport import MemoryFS
from modules.planner.planner import make_plan
from modules.planner.tests.factory import state

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def _gap(n: int) -> Gap:
    d = Diagnostic(tool=Tool.RUFF, file=f"m{n}.py", line=1, rule="F401", message="unused")
    return Gap(
        key=f"ruff:m{n}.py:F401",
        category=GapCategory.QUALITY,
        source="ruff",
        severity=Severity.NORMAL,
        title=f"F401 in m{n}.py",
        files=(f"m{n}.py",),
        evidence=(d,),
    )


def _record(seq: int, gap: Gap, failures: int = 0, with_plan: bool = True) -> IterationRecord:
    plan = make_plan(GapReport(gaps=(gap,)), [], state(next_sequence=seq), MemoryFS())
    assert plan is not None
    started = T0 + timedelta(minutes=seq)
    return IterationRecord(
        iteration_id=f"iter-{seq:04d}-{started:%Y%m%d-%H%M%S}",
        started_at=started,
        ended_at=started,
        gap=gap_ref(gap),
        outcome=IterationOutcome.ROLLBACK,
        failure_category=FailureCategory.LINT_ERROR,
        evidence=("same",),
        failures=tuple(
            Diagnostic(tool=Tool.PYTEST, node_id=f"t.py::t{i}", rule="failed", detail="x" * 5000)
            for i in range(failures)
        ),
        task_kind="fix_lint",
        plan=plan if with_plan else None,
    )


def test_briefs_drop_the_plan_keep_the_signature_and_cap_failures() -> None:
    gap = _gap(1)
    full = _record(1, gap, failures=BRIEF_FAILURES + 5)
    brief = brief_of(full)
    assert brief.plan is None
    assert brief.gap_signature == gap_signature(gap)
    assert len(brief.failures) == BRIEF_FAILURES
    assert len(brief.failures[0].detail) == BRIEF_DETAIL_CHARS
    assert brief.failures[-1].detail == ""
    assert brief.failures[-1].node_id == full.failures[BRIEF_FAILURES - 1].node_id
    assert brief.evidence == full.evidence and brief.reason == full.reason


def test_planning_history_reads_briefs_of_the_reported_gaps_and_the_latest(tmp_path: Path) -> None:
    store = RecordStore(tmp_path / "history")
    gaps = [_gap(n) for n in range(4)]
    for seq in range(1, 61):
        store.append(_record(seq, gaps[seq % 4] if seq <= 20 else _gap(100 + seq)))
    report = GapReport(gaps=(gaps[1],))
    history = planning_history(store, report)
    ids = [r.iteration_id for r in history]
    assert ids == sorted(ids)
    assert all(r.plan is None for r in history)
    mine = [r for r in history if r.gap.key == gaps[1].key]
    assert [int(r.iteration_id[5:9]) for r in mine] == [1, 5, 9, 13, 17]  # its latest five
    assert len(history) == 50 + 3  # the latest 50 (seq 11-60) and the gap's older 1, 5, 9
    store.close()


def test_quarantine_works_on_briefs_as_on_full_records(tmp_path: Path) -> None:
    store = RecordStore(tmp_path / "history")
    gap = _gap(7)
    for seq in (1, 2, 3):
        store.append(_record(seq, gap))
    report = GapReport(gaps=(gap,))
    assert quarantined(report, store.recent(10)) == (gap.key,)
    assert quarantined(report, planning_history(store, report)) == (gap.key,)
    store.close()


def test_an_index_of_the_old_schema_is_rebuilt_with_briefs(tmp_path: Path) -> None:
    history = tmp_path / "history"
    store = RecordStore(history)
    gap = _gap(3)
    for seq in (1, 2):
        store.append(_record(seq, gap, with_plan=seq == 1))
    store.close()
    db = sqlite3.connect(history / ".index.sqlite")
    db.execute("DROP TABLE briefs")
    db.execute("DELETE FROM meta WHERE key = 'briefs'")
    db.commit()
    db.close()
    reopened = RecordStore(history)
    briefs = reopened.for_gaps([gap.key], brief=True)
    assert [b.iteration_id[:9] for b in briefs] == ["iter-0001", "iter-0002"]
    assert briefs[0].gap_signature == gap_signature(gap)  # filled in from the plan
    assert briefs[1].gap_signature == ""  # a record without a plan has none to give
    assert reopened.count() == 2
    reopened.close()


def test_the_planner_gets_its_gaps_records_and_the_latest_not_held_back_gaps_history(
    tmp_path: Path,
) -> None:
    store = RecordStore(tmp_path / "history")
    held, planned = _gap(1), _gap(2)
    for seq in range(1, 6):
        store.append(_record(seq, held))
        store.append(_record(10 + seq, planned))
    for seq in range(20, 80):
        store.append(_record(seq, _gap(100 + seq)))
    full = GapReport(gaps=(held, planned))
    history = planning_history(store, full)
    given = for_planner(history, full.model_copy(update={"gaps": (planned,)}))
    keys = [r.gap.key for r in given]
    assert held.key not in keys
    assert keys.count(planned.key) == 5
    assert given[-50:] == history[-50:]  # the latest records always go along
    assert len(given) == 55
    store.close()
