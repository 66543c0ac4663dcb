"""Append-only logs and the small files the kernel reads back: bounded, and nothing swallowed."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from domain import Event
from kernel import bounds
from kernel.bounds import EVENT_LINE_MAX, HALT_FILE_MAX, LEDGER_LINE_MAX, STATUS_FILE_MAX
from kernel.fsutil import append_line
from kernel.records import budget, halt, jsonl
from kernel.records.store import RecordStore
from tests.support import SAMPLE, make_repo, seed
from tests.unit.factories import gap, record


def test_an_append_closes_a_torn_line_first(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(b'{"a": 1}\n{"torn')
    append_line(path, '{"b": 2}')
    assert path.read_bytes() == b'{"a": 1}\n{"torn\n{"b": 2}\n'
    append_line(path, '{"c": 3}')
    assert path.read_bytes().endswith(b'{"b": 2}\n{"c": 3}\n')


def test_an_append_after_a_repair_replaced_the_file_lands_in_the_new_one(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(b'{"at": 1, "kind": "x"}\n\0\0\0\n')  # one whole line kept as it is
    old = path.open("rb")  # a reader (or a waiting appender) holding the old file
    assert jsonl.repair(path, EVENT_LINE_MAX, Event) is not None
    append_line(path, '{"at": 2, "kind": "y"}')
    assert path.read_bytes() == b'{"at": 1, "kind": "x"}\n{"at": 2, "kind": "y"}\n'
    old.close()


def test_lines_over_the_cap_are_skipped_not_held(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"short\n" + b"x" * 1000 + b"\nend")
    forward = list(jsonl.lines(path, 100))
    assert [(line.data, line.size, line.ended) for line in forward] == [
        (b"short\n", 6, True),
        (None, 1001, True),
        (b"end", 3, False),
    ]
    backward = list(jsonl.lines_backwards(path, 100))
    assert [(line.offset, line.data, line.size, line.ended) for line in backward] == [
        (1007, b"end", 3, False),
        (6, None, 1000, True),
        (0, b"short", 5, True),
    ]
    assert [line.data for line in jsonl.lines_backwards(path, 10_000)] == [
        b"end",
        b"x" * 1000,
        b"short",
    ]
    path.write_bytes(b"y" * 200_000)  # one line over the cap, no newline at all
    assert [(line.data, line.size) for line in jsonl.lines_backwards(path, 100)] == [
        (None, 200_000)
    ]
    assert [line.data for line in jsonl.lines(path, 100)] == [None]
    path.write_bytes(b"a\n" * 100_000)  # many blocks
    assert [line.data for line in jsonl.lines_backwards(path, 100)] == [b""] + [b"a"] * 100_000


def test_objects_glued_to_fragments_are_found(tmp_path: Path) -> None:
    whole = b'{"at": "2026-01-01T00:00:00Z", "kind": "halt", "message": "{a}", "data": {"n": [1]}}'
    swallowed = b'{"at": "2026-01-01T00:00:00Z", "kind": "halt", "message": ' + whole + b"}"
    line = b'{"at": "t", "ki' + whole + b"\0\0" + swallowed + b'{"kind": 1}'
    spans = jsonl.objects_in(line, Event)
    assert [line[a:b] for a, b, _ in spans] == [whole, whole]
    assert jsonl.objects_in(b"{" * 100_000, Event) == []  # bounded, and nothing found
    assert jsonl.objects_in(b'{"a":' * 50_000, Event) == []  # too deep for json: no crash
    assert jsonl.objects_in(whole.replace(b"{a}", b"\xff"), Event) == []  # not UTF-8


def test_glued_events_are_read_and_a_repair_sets_the_fragment_aside(tmp_path: Path) -> None:
    store = RecordStore(tmp_path)
    store.event("halt", "one")
    torn = store.events_path.read_bytes()[:-20]
    second = store.event("resume", "two")
    glued = torn + second.model_dump_json().encode() + b"\n"  # as an old writer left it
    store.events_path.write_bytes(glued)
    assert [e.kind for e in store.events()] == ["resume"]
    said = store.repair_events()
    assert "set aside 1 fragment(s)" in said and "kept 1 whole object(s)" in said
    assert [e.message for e in store.events()] == ["two"]
    [aside] = tmp_path.glob("events.jsonl.torn-*")
    assert aside.read_bytes() == torn


def test_a_huge_event_is_cut_to_fit_its_bound(tmp_path: Path) -> None:
    store = RecordStore(tmp_path)
    store.event("halt", "x" * (EVENT_LINE_MAX * 2), evidence=["y" * 1000] * 5000)
    [event] = store.events()
    assert event.message.endswith("characters with its data, cut)") and event.data == {}
    assert store.events_path.stat().st_size < EVENT_LINE_MAX


def test_an_event_line_over_the_bound_is_skipped(tmp_path: Path) -> None:
    store = RecordStore(tmp_path)
    store.event("a", "before")
    with store.events_path.open("ab") as handle:
        handle.write(b'{"at": "' + b"9" * (EVENT_LINE_MAX + 1) + b'"}\n')
    store.event("b", "after")
    assert [e.kind for e in store.events()] == ["a", "b"]
    assert "over the bound" in store.repair_events()
    assert [e.kind for e in store.events()] == ["a", "b"]


def _entry(cost: float, model: str = "m") -> budget.LedgerEntry:
    return budget.LedgerEntry(
        at=datetime.now(UTC),
        iteration_id="iter-0001-x",
        backend="codex",
        model=model,
        cost_usd=cost,
    )


def test_a_ledger_entry_glued_to_a_torn_one_still_counts(tmp_path: Path) -> None:
    path = budget.ledger_path(tmp_path)
    path.write_bytes(
        b'{"at": "2026-' + _entry(0.75).model_dump_json().encode() + b"\n"
    )  # an old writer glued a run's spend onto a torn line
    today = datetime.now(UTC).date().isoformat()
    assert budget.day_spend(tmp_path, today).cost_usd == pytest.approx(0.75)
    assert budget.accounted(tmp_path, "iter-0001-x")
    assert "kept 1 whole object(s)" in budget.repair(tmp_path)
    assert budget.day_spend(tmp_path, today).cost_usd == pytest.approx(0.75)
    assert budget.repair(tmp_path) == ""


def test_a_ledger_line_always_fits_its_bound(tmp_path: Path) -> None:
    budget.append(tmp_path, _entry(2.5, model="m" * (LEDGER_LINE_MAX * 2)))
    assert budget.ledger_path(tmp_path).stat().st_size < LEDGER_LINE_MAX
    today = datetime.now(UTC).date().isoformat()
    assert budget.day_spend(tmp_path, today).cost_usd == pytest.approx(2.5)  # still counted


def test_a_huge_or_strange_halt_file_is_a_halt_with_a_clear_reason(tmp_path: Path) -> None:
    path = tmp_path / halt.HALT_FILE
    path.write_bytes(b'{"halted": false, "reason": "' + b"x" * HALT_FILE_MAX + b'"}')
    state = halt.read_halt(tmp_path)
    assert state.halted and f"over the bound of {HALT_FILE_MAX} bytes" in state.reason
    path.unlink()
    os.mkfifo(path)  # would block a plain read forever
    assert "not a regular file" in halt.read_halt(tmp_path).reason
    path.unlink()
    path.write_bytes(b"[" * 100_000 + b"]" * 100_000)
    assert "unreadable" in halt.read_halt(tmp_path).reason


def test_a_halt_reason_is_cut_to_fit(tmp_path: Path) -> None:
    store = RecordStore(tmp_path)
    halt.halt(store, "z" * (HALT_FILE_MAX * 4))
    state = halt.read_halt(tmp_path)
    assert state.halted and state.reason.endswith("characters cut)")


def test_a_huge_status_file_is_said_by_status(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", SAMPLE)
    (root / "history").mkdir()
    (root / "history" / "status.json").write_bytes(b" " * (STATUS_FILE_MAX + 1) + b"{}")
    shown = seed(root, "status")
    assert shown.returncode == 0, shown.stderr
    assert f"status.json is over the bound of {STATUS_FILE_MAX} bytes; not read" in shown.stdout
    (root / "history" / "status.json").write_bytes(b"\xff\xfe[[[")
    shown = seed(root, "status")
    assert shown.returncode == 0 and "status.json is unreadable" in shown.stdout


def test_the_docs_list_the_bounds() -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "bounds.md").read_text(encoding="utf-8")
    rows = {
        "a line of `history/records.jsonl`": bounds.RECORD_LINE_MAX,
        "a line of `history/events.jsonl`": bounds.EVENT_LINE_MAX,
        "a line of `history/ledger.jsonl`": bounds.LEDGER_LINE_MAX,
        "`history/status.json`": bounds.STATUS_FILE_MAX,
        "`history/halt.json`": bounds.HALT_FILE_MAX,
    }
    for what, size in rows.items():
        shown = f"{size // bounds.MIB} MiB" if size >= bounds.MIB else f"{size // bounds.KIB} KiB"
        assert f"| {what} | {shown}" in text, what
    assert f"{bounds.HALT_REASON_MAX:,} characters" in text
    assert f"| {bounds.SEQUENCE_DIGITS_MAX} digits |" in text


def test_a_record_too_big_for_one_line_is_cut_to_fit(tmp_path: Path) -> None:
    big = record(gap("ruff:big.py:F401"), 7, evidence=tuple("e" * 200 for _ in range(120_000)))
    assert len(big.model_dump_json()) > bounds.RECORD_LINE_MAX
    store = RecordStore(tmp_path)
    store.append(big)
    [line] = store.records_path.read_bytes().splitlines()
    assert len(line) < bounds.RECORD_LINE_MAX
    kept = store.get(big.iteration_id)
    assert kept is not None and len(kept.evidence) == 101
    assert kept.evidence[-1].startswith("... 119900 more items left out")
    assert kept.plan == big.plan  # the plan fitted: it stays
