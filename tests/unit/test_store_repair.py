"""RecordStore.repair: fragments of records.jsonl are set aside and said; no whole record is lost."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from domain import IterationOutcome
from kernel.bounds import RECORD_LINE_MAX
from kernel.errors import SeedError
from kernel.records.store import RecordStore, sequence_of
from tests.unit.factories import gap, record


def _store(tmp: Path, n: int, folders: bool = False) -> tuple[RecordStore, list[bytes]]:
    """A store of n records (with no iteration folders unless asked: the log alone)."""
    store = RecordStore(tmp)
    for seq in range(1, n + 1):
        made = record(gap(f"ruff:f{seq}.py:F401"), seq, IterationOutcome.SUCCESS, None)
        store.append(made, folder=folders)
    return store, store.records_path.read_bytes().splitlines(keepends=True)


def _lines(store: RecordStore) -> list[bytes]:
    return store.records_path.read_bytes().splitlines(keepends=True)


def test_nothing_to_repair(tmp_path: Path) -> None:
    store = RecordStore(tmp_path)
    assert store.repair() == ""  # no file
    store.records_path.write_bytes(b"")
    assert store.repair() == ""  # empty file
    store, lines = _store(tmp_path / "clean", 3)
    assert store.repair() == ""
    assert _lines(store) == lines
    assert store.events() == []


def test_a_torn_last_line_is_cut_saved_aside_and_said(tmp_path: Path) -> None:
    store, lines = _store(tmp_path, 3)
    torn = lines[-1][:40]
    store.records_path.write_bytes(b"".join(lines[:-1]) + torn)
    message = store.repair()
    assert "cut a torn last line of 40 bytes" in message and str(store.records_path) in message
    assert _lines(store) == lines[:-1]
    [aside] = tmp_path.glob("records.jsonl.torn-*")
    assert aside.read_bytes() == torn
    [event] = store.events()
    assert event.kind == "torn_line_repair" and event.data["bytes"] == 40
    assert store.count() == 2
    assert store.next_sequence() == 4  # the torn record's number stays taken
    assert store.repair() == ""  # repaired once, stays repaired


def test_a_complete_but_unparseable_last_line_is_cut(tmp_path: Path) -> None:
    store, lines = _store(tmp_path, 2)
    store.records_path.write_bytes(b"".join(lines) + b'{"iteration_id": "iter-0003\n')
    assert "set aside 1 fragment(s) of 27 bytes" in store.repair()
    assert _lines(store) == lines
    assert store.next_sequence() == 4  # the number the fragment names stays taken


def test_nul_padding_after_a_crash_is_cut(tmp_path: Path) -> None:
    store, lines = _store(tmp_path, 2)
    store.records_path.write_bytes(b"".join(lines) + b"\0" * 4096)
    assert store.repair()
    assert _lines(store) == lines


def test_a_file_that_is_only_a_torn_line(tmp_path: Path) -> None:
    store = RecordStore(tmp_path)
    store.records_path.write_bytes(b'{"iteration_id": "iter-00')
    assert store.repair()
    assert store.records_path.read_bytes() == b""
    assert store.count() == 0


def test_a_malformed_line_in_the_middle_is_kept_and_skipped_not_cut(tmp_path: Path) -> None:
    store, lines = _store(tmp_path, 3)
    bad = b'{"this is": "not a record"}\n'
    store.records_path.write_bytes(lines[0] + bad + b"".join(lines[1:]))
    fresh = RecordStore(tmp_path)
    assert fresh.repair() == ""
    assert fresh.count() == 3
    assert len(fresh.problems) == 1 and "records.jsonl" in fresh.problems[0]
    assert bad in fresh.records_path.read_bytes()  # nothing a person might want is lost


def test_the_index_follows_a_repair_and_appends_go_on(tmp_path: Path) -> None:
    store, lines = _store(tmp_path, 3)
    assert store.count() == 3  # the index now covers three lines
    store.records_path.write_bytes(b"".join(lines[:-1]) + lines[-1][:-10])
    store.repair()
    assert store.count() == 2 and store.next_sequence() == 4
    later = record(gap("ruff:late.py:F401"), 9, IterationOutcome.FAILURE)
    store.append(later)
    reopened = RecordStore(tmp_path)
    assert reopened.count() == 3
    assert reopened.get(later.iteration_id) == later
    assert all(json.loads(line) for line in _lines(reopened))


@settings(
    max_examples=40, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(
    n=st.integers(min_value=1, max_value=5),
    cut=st.floats(min_value=0.0, max_value=1.0),
    junk=st.binary(max_size=64).filter(lambda b: b"\n" not in b and b"{" not in b),
)
def test_any_torn_tail_leaves_a_prefix_of_whole_records(n: int, cut: float, junk: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        store, lines = _store(Path(folder), n)
        whole = b"".join(lines)
        last_start = len(whole) - len(lines[-1])
        torn_at = last_start + int(cut * (len(lines[-1]) - 1))
        store.records_path.write_bytes(whole[:torn_at] + junk)
        fresh = RecordStore(Path(folder))
        fresh.repair()
        data = fresh.records_path.read_bytes()
        assert data == b"" or data.endswith(b"\n")
        kept = data.splitlines(keepends=True)
        assert kept == lines[: len(kept)]
        assert len(kept) >= n - 1
        assert fresh.count() == len(kept)
        fresh.close()


def test_a_record_glued_to_a_torn_line_is_kept(tmp_path: Path) -> None:
    store, lines = _store(tmp_path, 3)
    torn = lines[1][:57]
    store.records_path.write_bytes(lines[0] + torn + lines[2])  # an old writer glued them
    fresh = RecordStore(tmp_path)
    assert fresh.count() == 2  # read before any repair: the glued record counts
    assert "1 whole record(s) in it are read" in fresh.problems[0]
    message = fresh.repair()
    assert "set aside 1 fragment(s) of 57 bytes" in message
    assert "kept 1 whole object(s)" in message
    assert _lines(fresh) == [lines[0], lines[2]]
    [aside] = tmp_path.glob("records.jsonl.torn-*")
    assert aside.read_bytes() == torn
    assert RecordStore(tmp_path).count() == 2 and fresh.next_sequence() == 4
    [event] = fresh.events()
    assert event.kind == "torn_line_repair" and event.data["kept"] == 1


def test_two_records_glued_with_no_fragment_are_both_kept(tmp_path: Path) -> None:
    store, lines = _store(tmp_path, 2)
    store.records_path.write_bytes(lines[0].rstrip(b"\n") + lines[1])
    assert RecordStore(tmp_path).count() == 2
    assert "kept 2 whole object(s)" in store.repair()
    assert _lines(store) == lines
    assert not list(tmp_path.glob("records.jsonl.torn-*"))


def test_a_line_over_the_bound_is_set_aside_unread(tmp_path: Path) -> None:
    store, lines = _store(tmp_path, 2)
    with store.records_path.open("ab") as handle:
        handle.write(b"{" + b"x" * (RECORD_LINE_MAX + 10) + b"\n")
        handle.write(lines[1].replace(b"iter-0002", b"iter-0005"))
    fresh = RecordStore(tmp_path)
    assert fresh.count() == 3
    assert any("over the bound" in p for p in fresh.problems)
    assert "over the bound" in fresh.repair()
    assert len(_lines(fresh)) == 3
    [aside] = tmp_path.glob("records.jsonl.torn-*")
    assert aside.stat().st_size == RECORD_LINE_MAX + 11


def test_a_lost_line_comes_back_from_its_folder(tmp_path: Path) -> None:
    store, lines = _store(tmp_path, 3, folders=True)
    store.records_path.write_bytes(lines[0] + lines[2])  # a person deleted a line
    fresh = RecordStore(tmp_path)
    assert fresh.count() == 2
    assert "its line for iter-0002-20260101-120000 was lost" in fresh.repair()
    assert fresh.count() == 3 and fresh.repair() == ""
    assert [e.kind for e in fresh.events()] == ["record_restored"]


def test_iteration_numbers_never_repeat(tmp_path: Path) -> None:
    history, state = tmp_path / "history", tmp_path / "state"
    store = RecordStore(history, state=state)
    for seq in (1, 2):
        store.append(record(gap(f"ruff:f{seq}.py:F401"), seq))
    assert store.next_sequence() == 3
    assert (state / "sequence").read_text() == "2\n"
    store.folder("iter-0003-20260101-120000")  # an iteration under way takes its number
    assert store.next_sequence() == 4
    store.close()
    # the log gone, the index with it: the folders and the mark still know
    store.records_path.unlink()
    store.index_path.unlink()
    assert RecordStore(history, state=state).next_sequence() == 4
    for folder in history.glob("iter-*"):
        for file in folder.iterdir():
            file.unlink()
        folder.rmdir()
    assert RecordStore(history, state=state).next_sequence() == 4  # the mark alone
    assert RecordStore(history).next_sequence() == 1  # nothing at all: from 1
    (history / "records.jsonl.torn-20260101-120000").write_bytes(b'{"iteration_id":"iter-0009-2')
    assert RecordStore(history).next_sequence() == 10  # a side file names a number
    (state / "sequence").write_bytes(b"not a number" * 100)
    assert RecordStore(history, state=state).next_sequence() == 10


def test_a_number_with_too_many_digits_is_not_one_given_out(tmp_path: Path) -> None:
    assert sequence_of("iter-" + "9" * 19 + "-20260101-120000") == 0
    assert sequence_of("iter-" + "9" * 18 + "-20260101-120000") == 10**18 - 1
    store = RecordStore(tmp_path)
    store.folder("iter-" + "9" * 18 + "-20260101-120000")
    with pytest.raises(SeedError, match="used up"):
        store.next_sequence()


def test_a_log_torn_while_the_daemon_runs_gives_no_number_twice(tmp_path: Path) -> None:
    history, state = tmp_path / "history", tmp_path / "state"
    store = RecordStore(history, state=state)
    first = record(gap("ruff:f1.py:F401"), 1)
    store.append(first)
    whole = store.records_path.read_bytes()
    store.records_path.write_bytes(whole[:-40])  # cut mid-line, no restart, no repair
    assert store.count() == 0
    assert store.next_sequence() == 2  # the folder and the mark still hold number 1
    second = record(gap("ruff:f2.py:F401"), 2)
    store.append(second)
    assert store.records_path.read_bytes() == whole[:-40] + b"\n" + _lines(store)[-1]
    assert store.count() == 1 and store.next_sequence() == 3
    store.close()
    restarted = RecordStore(history, state=state)
    restarted.repair()  # the torn line set aside, the first record back from its folder
    assert {s.iteration_id for s in restarted.summaries()} == {
        first.iteration_id,
        second.iteration_id,
    }
    assert restarted.next_sequence() == 3
