"""Fuzzing every reader of history/: arbitrary bytes never raise, lose a whole record or repeat a number.

Each log is built from pieces: whole lines the kernel wrote, the same torn anywhere, random
bytes (NULs, invalid UTF-8, stray newlines), runs of NULs and lines over the bound, glued
together or not. Whatever the mix, every whole record, event and ledger entry in it is read
back, before and after the repair a restart makes, and the next iteration number is above
every number the file names. The bounds are lowered for the run (a line over them costs
the same to skip at 8 KiB as at 16 MiB); the unit tests hold the real ones.

Examples are capped by the "seed-fuzz-logs" profile (SEED_FUZZ_EXAMPLES scales it), with no
example database, so the file runs in well under a minute on two cores.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from unittest import mock

from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st

from domain import Event, IterationOutcome, IterationRecord
from kernel.loop import reporting
from kernel.records import budget, halt, jsonl
from kernel.records import store as store_module
from kernel.records.store import RecordStore, sequence_of
from tests.support import SAMPLE, make_repo, seed
from tests.unit.factories import gap, record

CAP = 8 * 1024
"""The line bound during the fuzz (records here are under 2 KiB)."""
EXAMPLES = int(os.environ.get("SEED_FUZZ_EXAMPLES", "150"))
settings.register_profile(
    "seed-fuzz-logs",
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    phases=[Phase.explicit, Phase.generate, Phase.shrink],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
FUZZ = settings.get_profile("seed-fuzz-logs")
MANY = settings(FUZZ, max_examples=EXAMPLES * 2)
"""For readers that take a millisecond an example."""
SLOW = settings(FUZZ, max_examples=max(EXAMPLES // 30, 3))
"""For examples that run seed.py as a subprocess."""

DAY = datetime(2026, 1, 1, 12, tzinfo=UTC)
RECORDS: list[IterationRecord] = [
    record(gap(f"ruff:f{n}.py:F401"), n, IterationOutcome.SUCCESS, None) for n in range(1, 9)
]
EVENTS: list[Event] = [
    Event(at=DAY + timedelta(seconds=n), kind="recovery", message=f"event {n}", data={"n": n})
    for n in range(8)
]
ENTRIES: list[budget.LedgerEntry] = [
    budget.LedgerEntry(
        at=DAY + timedelta(seconds=n),
        iteration_id=f"iter-{n:04d}-20260101-120000",
        backend="codex",
        cost_usd=0.01 * (n + 1),
    )
    for n in range(1, 9)
]

Piece = tuple[str, int, bytes]
"""(kind, index into the pool or -1, bytes): kind is whole, torn or noise."""


def pieces(pool: list[bytes]) -> st.SearchStrategy[Sequence[tuple[Piece, bytes]]]:
    """A log as pieces, each followed by a separator (a newline, or nothing: glued)."""
    index = st.integers(0, len(pool) - 1)
    whole = index.map(lambda i: ("whole", i, pool[i]))
    torn = st.tuples(index, st.floats(0.0, 1.0)).map(
        lambda t: ("torn", t[0], pool[t[0]][: int(t[1] * (len(pool[t[0]]) - 1))])
    )
    noise = st.one_of(
        st.binary(max_size=200),
        st.integers(1, 300).map(lambda n: b"\0" * n),
        st.integers(CAP + 1, 3 * CAP).map(lambda n: b"x" * n),  # over the bound
        st.sampled_from([b"{", b"}", b'"', b"\\", b"\xff\xfe", b'{"at":', b"\r"]),
    ).map(lambda b: ("noise", -1, b))
    separator = st.sampled_from([b"\n", b"\n", b"\n", b"", b"\r\n", b" "])
    items = st.tuples(st.one_of(whole, whole, torn, noise), separator)
    return st.lists(items, min_size=1, max_size=12).filter(
        lambda ps: sum(len(p[2]) + len(s) for p, s in ps) < 40 * CAP
    )


def tally(what: str, found: int) -> None:
    """Say in hypothesis's statistics how many whole items an example wrote and found."""
    event(f"{what} written whole and read back", found)


def joined(parts: Sequence[tuple[Piece, bytes]]) -> bytes:
    return b"".join(piece[2] + sep for piece, sep in parts)


def written(parts: Sequence[tuple[Piece, bytes]]) -> set[int]:
    """Indexes of the pool items written whole."""
    return {piece[1] for piece, _ in parts if piece[0] == "whole"}


@contextmanager
def low_bounds() -> Iterator[None]:
    """The line bounds lowered to CAP for the readers under test."""
    with (
        mock.patch.object(store_module, "RECORD_LINE_MAX", CAP),
        mock.patch.object(store_module, "EVENT_LINE_MAX", CAP),
        mock.patch.object(budget, "LEDGER_LINE_MAX", CAP),
    ):
        yield


RECORD_LINES = [r.model_dump_json().encode() for r in RECORDS]


@FUZZ
@given(parts=pieces(RECORD_LINES), folders=st.sets(st.integers(0, len(RECORDS) - 1)))
def test_records_any_bytes(parts: Sequence[tuple[Piece, bytes]], folders: set[int]) -> None:
    data = joined(parts)
    ids = {RECORDS[i].iteration_id for i in written(parts)}
    kept = {RECORDS[i].iteration_id for i in folders}
    with tempfile.TemporaryDirectory() as tmp, low_bounds():
        history, state = Path(tmp) / "history", Path(tmp) / "state"
        history.mkdir()
        (history / "records.jsonl").write_bytes(data)
        for i in folders:  # iterations whose folder kept its record.json
            folder = history / RECORDS[i].iteration_id
            folder.mkdir()
            (folder / "record.json").write_text(RECORDS[i].model_dump_json(indent=2))

        before = RecordStore(history, state=state)
        seen_before = {s.iteration_id for s in before.summaries()}
        before.recent(50)
        before.close()

        store = RecordStore(history, state=state)
        store.repair()
        after = {s.iteration_id for s in store.summaries()}
        assert ids | kept <= after, "a whole record was lost"
        tally("records", len(ids | kept))
        assert after <= {r.iteration_id for r in RECORDS}
        assert {r.iteration_id for r in store.recent(50)} == after  # each loads back
        if data.endswith(b"\n") or not data:
            assert seen_before | kept == after, "the index and the repair count differently"
        else:
            assert seen_before <= after
        for line in store.records_path.read_bytes().splitlines():
            assert not line.strip() or isinstance(json.loads(line), dict)  # every line whole

        number = store.next_sequence()
        assert number > max((sequence_of(i) for i in after), default=0)
        assert number > jsonl.numbers_in(data), "a number the log names would come again"
        store.append(record(gap("ruff:new.py:F401"), number))
        assert store.next_sequence() == number + 1
        store.close()

        again = RecordStore(history, state=state)  # a second start: stable, nothing new
        assert again.repair() == ""
        assert {s.iteration_id for s in again.summaries()} == after | {
            f"iter-{number:04d}-20260101-120000"
        }
        again.close()


EVENT_LINES = [e.model_dump_json().encode() for e in EVENTS]


@MANY
@given(parts=pieces(EVENT_LINES))
def test_events_any_bytes(parts: Sequence[tuple[Piece, bytes]]) -> None:
    data = joined(parts)
    messages = {EVENTS[i].message for i in written(parts)}
    with tempfile.TemporaryDirectory() as tmp, low_bounds():
        store = RecordStore(Path(tmp))
        store.events_path.write_bytes(data)
        before = {e.message for e in store.events(1000)}
        assert messages <= before | {m for m in messages if not data.endswith(b"\n")}
        store.repair_events()
        after = {e.message for e in store.events(1000)}
        assert messages <= after, "a whole event was lost"
        tally("events", len(messages))
        assert before <= after
        store.event("halt", "the newest")
        assert store.events(1)[0].message == "the newest"
        assert store.repair_events() == ""


ENTRY_LINES = [e.model_dump_json().encode() for e in ENTRIES]


@MANY
@given(parts=pieces(ENTRY_LINES))
def test_ledger_any_bytes(parts: Sequence[tuple[Piece, bytes]]) -> None:
    data = joined(parts)
    whole = [ENTRIES[piece[1]] for piece, _ in parts if piece[0] == "whole"]
    day = DAY.date().isoformat()
    with tempfile.TemporaryDirectory() as tmp, low_bounds():
        history = Path(tmp)
        budget.ledger_path(history).write_bytes(data)
        spent = budget.day_spend(history, day).cost_usd
        budget.repair(history)
        repaired = budget.day_spend(history, day)
        assert repaired.cost_usd >= round(sum(e.cost_usd for e in whole), 6) - 1e-9
        assert repaired.runs >= len(whole), "a whole entry no longer counts"
        assert repaired.cost_usd >= spent - 1e-9
        assert all(budget.accounted(history, e.iteration_id) for e in whole)
        tally("ledger entries", len(whole))
        assert budget.repair(history) == ""


SMALL_FILES = st.one_of(
    st.binary(max_size=2000),
    st.builds(
        lambda d: json.dumps(d).encode(),
        st.dictionaries(
            st.sampled_from(["halted", "reason", "phase", "top_gaps", "pid", "at"]),
            st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=50)),
        ),
    ),
)


@MANY
@given(data=SMALL_FILES, big=st.booleans(), deep=st.booleans())
def test_halt_and_status_files_any_bytes(data: bytes, big: bool, deep: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        history = Path(tmp)
        body = b"[" * 60_000 + data if deep else data  # too deep for json to parse
        body = body + b" " * (5 * 1024 * 1024) if big else body
        (history / halt.HALT_FILE).write_bytes(body)
        (history / reporting.STATUS_NAME).write_bytes(body)
        state = halt.read_halt(history)
        try:
            parsed: Any = json.loads(body)
        except (ValueError, RecursionError):
            parsed = None
        if not isinstance(parsed, dict) or big:
            assert state.halted and "unreadable" in state.reason
        live, why = reporting.read_live(history)
        assert isinstance(live, dict)
        assert bool(why) == (not isinstance(parsed, dict) or big)


@SLOW
@given(parts=pieces(RECORD_LINES))
def test_history_through_seed_py(parts: Sequence[tuple[Piece, bytes]]) -> None:
    """`seed.py history --json` on any records.jsonl: exit 0 and every whole record listed."""
    parts = [(p, s) for p, s in parts if len(p[2]) <= 1000 or p[0] != "noise"]  # real bounds
    data = joined(parts)
    complete = {RECORDS[i].iteration_id for i in written(parts)}
    with tempfile.TemporaryDirectory() as tmp:
        root = make_repo(Path(tmp) / "repo", SAMPLE)
        (root / "history").mkdir()
        (root / "history" / "records.jsonl").write_bytes(data)
        shown = seed(root, "history", "--json")
        assert shown.returncode == 0, shown.stderr
        listed = {json.loads(line)["iteration_id"] for line in shown.stdout.splitlines()}
        last = data.rsplit(b"\n", 1)[-1]
        assert {i for i in complete if i.encode() not in last} <= listed
        status = seed(root, "status", "--json")
        assert status.returncode == 0, status.stderr
