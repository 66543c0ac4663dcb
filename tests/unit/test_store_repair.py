"""RecordStore.repair: a torn last line of records.jsonl is cut, kept aside and said; nothing else."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from domain import IterationOutcome
from kernel.store import RecordStore
from tests.unit.factories import gap, record


def _store(tmp: Path, n: int) -> tuple[RecordStore, list[bytes]]:
    store = RecordStore(tmp)
    for seq in range(1, n + 1):
        store.append(record(gap(f"ruff:f{seq}.py:F401"), seq, IterationOutcome.SUCCESS, None))
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
    assert store.count() == 2 and store.next_sequence() == 3
    assert store.repair() == ""  # repaired once, stays repaired


def test_a_complete_but_unparseable_last_line_is_cut(tmp_path: Path) -> None:
    store, lines = _store(tmp_path, 2)
    store.records_path.write_bytes(b"".join(lines) + b'{"iteration_id": "iter-0003\n')
    assert "cut a torn last line" in store.repair()
    assert _lines(store) == lines


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
    assert store.count() == 2
    later = record(gap("ruff:late.py:F401"), 9, IterationOutcome.FAILURE)
    store.append(later)
    reopened = RecordStore(tmp_path)
    assert reopened.count() == 3
    assert reopened.get(later.iteration_id) == later
    assert all(json.loads(line) for line in _lines(reopened))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(min_value=1, max_value=5),
    cut=st.floats(min_value=0.0, max_value=1.0),
    junk=st.binary(max_size=64).filter(lambda b: b"\n" not in b),
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
