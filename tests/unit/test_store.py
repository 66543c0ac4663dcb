"""The record store: append-only log, derived index, torn-line repair, malformed lines set aside."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from domain import (
    Candidate,
    FailureCategory,
    GapCategory,
    GapRef,
    IterationOutcome,
    IterationRecord,
)
from kernel.records.store import RecordStore, sequence_of

T0 = datetime(2026, 11, 22, 8, 0, tzinfo=UTC)


def _record(
    seq: int,
    outcome: IterationOutcome = IterationOutcome.SUCCESS,
    key: str = "ruff:a.py:F401",
    cost: float = 0.25,
) -> IterationRecord:
    at = T0 + timedelta(minutes=seq)
    return IterationRecord(
        iteration_id=f"iter-{seq:04d}-{at:%Y%m%d-%H%M%S}",
        started_at=at,
        ended_at=at,
        outcome=outcome,
        gap=GapRef(key=key, category=GapCategory.QUALITY, source=key.split(":")[0], title="t"),
        failure_category=None
        if outcome == IterationOutcome.SUCCESS
        else FailureCategory.LINT_ERROR,
        cost_usd=cost,
        tokens_used=100,
        task_kind="fix_lint",
    )


def test_append_index_and_read_back(tmp_path: Path) -> None:
    store = RecordStore(tmp_path / "history", fingerprint="fp")
    for seq in range(1, 6):
        store.append(
            _record(
                seq,
                IterationOutcome.SUCCESS if seq % 2 else IterationOutcome.ROLLBACK,
                key=f"k{seq % 2}",
            )
        )
    assert store.count() == 5 and store.next_sequence() == 6
    assert [r.iteration_id for r in store.recent(2)] == [
        _record(4).iteration_id,
        _record(5).iteration_id,
    ]
    assert [sequence_of(r.iteration_id) for r in store.for_gaps(["k0"])] == [2, 4]
    assert [s.outcome for s in store.summaries(outcome="rollback")] == ["ROLLBACK", "ROLLBACK"]
    assert store.get(_record(3).iteration_id) == _record(3, key="k1")
    assert store.day_totals("2026-11-22") == (1.25, 5)
    [tally] = store.tallies()
    assert (tally.successes, tally.failures, tally.fingerprint) == (3, 2, "fp")
    assert (tmp_path / "history" / _record(1).iteration_id / "record.json").exists()


def test_index_is_rebuilt_when_missing_and_caught_up_when_stale(tmp_path: Path) -> None:
    history = tmp_path / "history"
    store = RecordStore(history)
    store.append(_record(1))
    store.close()
    (history / ".index.sqlite").unlink()
    assert RecordStore(history).count() == 1
    other = RecordStore(history)
    other.count()
    with (history / "records.jsonl").open(
        "a"
    ) as handle:  # another writer appended behind the index's back
        handle.write(_record(2).model_dump_json() + "\n")
    assert other.count() == 2 and other.next_sequence() == 3
    (history / ".index.sqlite").write_bytes(b"this is not a database")
    assert RecordStore(history).count() == 2


def test_torn_last_line_is_cut_and_kept_aside(tmp_path: Path) -> None:
    history = tmp_path / "history"
    store = RecordStore(history)
    store.append(_record(1))
    store.close()
    whole = (history / "records.jsonl").read_bytes()
    torn = _record(2).model_dump_json().encode()[:40]
    (history / "records.jsonl").write_bytes(whole + torn)
    fresh = RecordStore(history)
    message = fresh.repair()
    assert "torn" in message
    assert (history / "records.jsonl").read_bytes() == whole
    [aside] = list(history.glob("records.jsonl.torn-*"))
    assert aside.read_bytes() == torn
    assert fresh.count() == 1
    assert [
        json.loads(line)["kind"] for line in (history / "events.jsonl").read_text().splitlines()
    ] == ["torn_line_repair"]
    assert fresh.repair() == ""


def test_malformed_line_in_the_middle_is_reported_and_skipped(tmp_path: Path) -> None:
    history = tmp_path / "history"
    history.mkdir()
    lines = [
        _record(1).model_dump_json(),
        '{"iteration_id": "broken"}',
        _record(2).model_dump_json(),
    ]
    (history / "records.jsonl").write_text("\n".join(lines) + "\n")
    store = RecordStore(history)
    assert store.count() == 2
    assert len(store.problems) == 1 and "records.jsonl" in store.problems[0]
    assert (history / "records.jsonl").read_text().count("\n") == 3


def test_the_portfolio_agents_verified_outcomes_are_tallied_from_every_record(
    tmp_path: Path,
) -> None:
    store = RecordStore(tmp_path / "history", fingerprint="fp")
    ran = {"durations": {"execute": 60.0, "verify": 30.0}, "agent_key": "command:cheap"}
    store.append(_record(1).model_copy(update=ran), folder=False)
    store.append(_record(2, IterationOutcome.ROLLBACK).model_copy(update=ran), folder=False)
    # the agent never ran, or the outcome says nothing of it: not a trial
    store.append(
        _record(3, IterationOutcome.ROLLBACK).model_copy(update={"agent_key": "x"}), folder=False
    )
    store.append(_record(4, IterationOutcome.WAITING).model_copy(update=ran), folder=False)
    duel = [
        Candidate(
            number=1,
            backend="command",
            outcome=IterationOutcome.SUCCESS,
            agent_key="command:dear",
            cost_usd=0.4,
            seconds=50,
        ),
        Candidate(
            number=2,
            backend="command",
            outcome=IterationOutcome.ROLLBACK,
            agent_key="command:cheap",
            cost_usd=0.02,
            seconds=20,
        ),
        Candidate(
            number=3, backend="command", outcome=IterationOutcome.ABORTED, agent_key="command:cheap"
        ),
    ]
    store.append(_record(5).model_copy(update={"candidates": tuple(duel)}), folder=False)
    tallies = {(t.key, t.task_kind): t for t in RecordStore(tmp_path / "history").agent_tallies()}
    cheap, dear = tallies[("command:cheap", "fix_lint")], tallies[("command:dear", "fix_lint")]
    assert (cheap.tried, cheap.landed, cheap.seconds) == (3, 1, 200.0)
    assert cheap.cost_usd == 0.25 + 0.25 + 0.02
    assert (dear.tried, dear.landed, dear.cost_usd, dear.seconds) == (1, 1, 0.4, 50.0)
    assert set(tallies) == {("command:cheap", "fix_lint"), ("command:dear", "fix_lint")}
