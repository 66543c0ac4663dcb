"""The record store: history/records.jsonl (append-only, fsynced) and an index beside it.

The index (history/.index.sqlite) is derived: it is brought up to date from the log's tail
when the log grew, and rebuilt when it is missing, unreadable, of an older layout or the log
shrank. Every reader of history (planner input, status, reports) goes through it. Beside each
row it keeps a brief of the record (see brief_of: no plan, failures and tracebacks capped, the
planned gap's signature filled in), so planning reads a kilobyte or two per record from the
index instead of parsing whole records out of records.jsonl.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from pydantic import ValidationError

from domain import AgentTally, Event, IterationOutcome, IterationRecord, OutcomeTally
from kernel.bounds import (
    EVENT_LINE_MAX,
    RECORD_LINE_MAX,
    SEQUENCE_DIGITS_MAX,
    SEQUENCE_FILE_MAX,
)
from kernel.errors import SeedError
from kernel.fsutil import append_line, atomic_write_text
from kernel.records import jsonl
from kernel.records.signature import record_signature

BRIEF_FAILURES = 20
"""Failures a brief keeps (the planner quotes a few; a run that broke hundreds needs no more)."""
BRIEF_DETAILS = 1
"""Failures of a brief that keep their traceback text (the planner quotes the first)."""
BRIEF_DETAIL_CHARS = 1200
"""Traceback text kept per failure in a brief."""


def brief_of(record: IterationRecord) -> IterationRecord:
    """The record without its plan and ranking, failures and their tracebacks capped, the
    planned gap's signature filled in."""
    failures = tuple(
        d.model_copy(update={"detail": d.detail[:BRIEF_DETAIL_CHARS] if i < BRIEF_DETAILS else ""})
        for i, d in enumerate(record.failures[:BRIEF_FAILURES])
    )
    return record.model_copy(
        update={
            "plan": None,
            "ranking": (),
            "failures": failures,
            "gap_signature": record_signature(record),
        }
    )


_SEQ = re.compile(r"^iter-(\d{4,})-")
SEQUENCE_FILE = "sequence"
"""The high-water mark of iteration numbers, in the kernel's state folder."""
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS records (
    iteration_id TEXT PRIMARY KEY, seq INTEGER, offset INTEGER, length INTEGER,
    outcome TEXT, category TEXT, gap_key TEXT, gap_source TEXT, gap_category TEXT,
    gap_title TEXT, task_kind TEXT, started TEXT, ended TEXT, day TEXT,
    cost REAL, tokens INTEGER, backend TEXT, fingerprint TEXT
);
CREATE TABLE IF NOT EXISTS briefs (iteration_id TEXT PRIMARY KEY, brief TEXT);
CREATE TABLE IF NOT EXISTS fates (iteration_id TEXT PRIMARY KEY, outcome TEXT, said TEXT);
CREATE INDEX IF NOT EXISTS records_by_kind ON records (task_kind, fingerprint, day, outcome);
CREATE INDEX IF NOT EXISTS records_by_gap ON records (gap_key, seq);
CREATE INDEX IF NOT EXISTS records_by_seq ON records (seq);
CREATE INDEX IF NOT EXISTS records_by_outcome ON records (outcome);
"""
# what reports and charts need beyond the records table; a new version rebuilds the index
_DETAILS_SCHEMA = """
CREATE TABLE IF NOT EXISTS details (
    iteration_id TEXT PRIMARY KEY, durations TEXT, open_gaps TEXT, candidates TEXT, agent INTEGER
);
CREATE TABLE IF NOT EXISTS agents (
    iteration_id TEXT, run INTEGER, agent_key TEXT, task_kind TEXT, day TEXT,
    landed INTEGER, cost REAL, seconds REAL, PRIMARY KEY (iteration_id, run)
);
"""
_DETAILS_VERSION = "4"
"""Version of the details tables (2: each candidate's outcome; 3: the portfolio agents'
verified outcomes; 4: whether an agent ran); an index of another is re-read."""
_JUDGED = {
    IterationOutcome.SUCCESS: 1,
    IterationOutcome.FAILURE: 0,
    IterationOutcome.ROLLBACK: 0,
    IterationOutcome.NO_CHANGE: 0,
}
"""Outcomes that say whether a portfolio agent was right (the rest: waiting, aborted, kept for
a person, blocked by the person's checkout, say nothing of it)."""
_AGENT_PHASES = ("execute", "inspect", "verify")
FATES = {"pr_merged": IterationOutcome.SUCCESS, "pr_closed": IterationOutcome.ROLLBACK}
"""What the forge did to a PROPOSED iteration's pull request (events.jsonl), as the outcome the
index counts it as for memory, counts, quarantine and the inbox task (the record stays as written)."""


def agent_runs(record: IterationRecord) -> list[tuple[int, str, int, float, float]]:
    """The record's verified outcomes of portfolio agents: (run, agent key, landed, cost,
    seconds); a single run only if its agent ran, a candidate only if it ran a round."""
    runs: list[tuple[int, str, int, float, float]] = []
    for c in record.candidates:
        if c.agent_key and c.outcome in _JUDGED and c.rounds:
            runs.append((c.number, c.agent_key, _JUDGED[c.outcome], c.cost_usd, c.seconds))
    judged = record.outcome in _JUDGED and "execute" in record.durations
    if not record.candidates and record.agent_key and judged:
        seconds = sum(record.durations.get(p, 0.0) for p in _AGENT_PHASES)
        cost = max(record.cost_usd, record.wire_cost_usd)
        runs.append((0, record.agent_key, _JUDGED[record.outcome], cost, seconds))
    return runs


_BRIEFS_VERSION = "1"
"""Version of the briefs table (see brief_of); an index of another is re-read."""


@dataclass(frozen=True)
class Summary:
    """One row of the index: enough for lists and budgets without reading the record."""

    iteration_id: str
    seq: int
    outcome: str
    category: str
    gap_key: str
    gap_source: str
    gap_title: str
    started: str
    ended: str
    cost: float
    tokens: int
    backend: str
    ran_agent: bool = False
    """An agent ran in it (IterationRecord.ran_agent)."""


@dataclass(frozen=True)
class ReportRow:
    """One row of the index with what reports and charts need (durations, open gaps)."""

    iteration_id: str
    outcome: str
    category: str
    gap_key: str
    gap_source: str
    gap_category: str
    gap_title: str
    started: str
    ended: str
    cost: float
    tokens: int
    backend: str
    durations: dict[str, float]
    open_gaps: dict[str, int]
    candidates: tuple[str, ...] = ()
    """Each candidate's outcome ([candidates] n > 1; empty for a single run)."""
    ran_agent: bool = False


@dataclass(frozen=True)
class Totals:
    """Counts and sums over every indexed record."""

    iterations: int
    by_outcome: dict[str, int]
    cost: float
    tokens: int
    agent_runs: int = 0
    """Iterations that ran an agent (IterationRecord.ran_agent)."""
    agent_landed: int = 0
    """Of those, the ones that landed."""


def sequence_of(iteration_id: str) -> int:
    """The sequence number inside an iteration id (0 when it has none, or more digits than
    SEQUENCE_DIGITS_MAX: not a number the kernel gave out)."""
    match = _SEQ.match(iteration_id)
    if not match or len(match.group(1)) > SEQUENCE_DIGITS_MAX:
        return 0
    return int(match.group(1))


class RecordStore:
    """Append-only records and events, per-iteration folders, and the index."""

    def __init__(self, history: Path, fingerprint: str = "", state: Path | None = None) -> None:
        self.history = history
        self.records_path = history / "records.jsonl"
        self.events_path = history / "events.jsonl"
        self.index_path = history / ".index.sqlite"
        self.fingerprint = fingerprint
        self.mark_path = state / SEQUENCE_FILE if state is not None else None
        """Where the highest iteration number ever given out is kept (None: nowhere)."""
        self._mark = -1
        self._sides: dict[str, tuple[tuple[int, int], int]] = {}
        self.problems: list[str] = []
        """Malformed lines met while indexing (path, line, reason); they are skipped, not lost."""
        self._local = threading.local()
        """Each thread its own index connection (candidates run in threads of their own)."""
        self._fates: dict[str, tuple[IterationOutcome, str]] = {}
        self._fates_mark = ""

    @property
    def _db(self) -> sqlite3.Connection | None:
        return getattr(self._local, "db", None)

    @_db.setter
    def _db(self, value: sqlite3.Connection | None) -> None:
        self._local.db = value

    # -- writing ---------------------------------------------------------------

    def folder(self, iteration_id: str) -> Path:
        """history/<iteration_id>/, created on demand (its number is then taken for good)."""
        self.raise_mark(sequence_of(iteration_id))
        path = self.history / iteration_id
        path.mkdir(parents=True, exist_ok=True)
        return path

    def write_file(self, iteration_id: str, name: str, text: str) -> Path:
        """Write one file of an iteration's folder atomically."""
        path = self.folder(iteration_id) / name
        atomic_write_text(path, text)
        return path

    def append(self, record: IterationRecord, *, folder: bool = True) -> None:
        """Append a record (fsynced), write its record.json, and index it."""
        self.history.mkdir(parents=True, exist_ok=True)
        record = fitted(record)
        self.raise_mark(sequence_of(record.iteration_id))
        line = record.model_dump_json()
        append_line(self.records_path, line)
        if folder:
            self.write_file(
                record.iteration_id, "record.json", record.model_dump_json(indent=2) + "\n"
            )
        self._index()  # the new line is read back like any other: one way to index a record

    def event(self, kind: str, message: str, **data: Any) -> Event:
        """Append an event (halt, resume, module fallback, repair) to events.jsonl."""
        event = Event(at=datetime.now(UTC), kind=kind, message=message, data=data)
        line = event.model_dump_json()
        if len(line) + 1 > EVENT_LINE_MAX // 4:  # characters may take up to 4 bytes each
            event = Event(
                at=event.at,
                kind=kind[:200],
                message=message[:4000] + f" ... ({len(line)} characters with its data, cut)",
                data={},
            )
            line = event.model_dump_json()
        append_line(self.events_path, line)
        return event

    def events(self, limit: int = 50) -> list[Event]:
        """The latest events, oldest first (damaged lines give up their whole events)."""
        if not self.events_path.exists() or limit <= 0:
            return []
        found: list[Event] = []
        for line in jsonl.lines_backwards(self.events_path, EVENT_LINE_MAX):
            if line.data is None:
                glued = jsonl.objects_in_long(self.events_path, line, Event, EVENT_LINE_MAX)
                found += reversed([event for _, _, event in glued])
            elif line.data.strip():
                found += reversed(_events_in(line.data))
            if len(found) >= limit:
                break
        return list(reversed(found[:limit]))

    def repair(self) -> str:
        """Make records.jsonl whole again and bring back lost records; '' when there was nothing.

        Every whole record in a damaged line is kept on a line of its own; only fragments are
        set aside, bytes unchanged (see jsonl.repair). A record whose line was lost while its
        folder kept record.json is appended again. Each step is an event.
        """
        said: list[str] = []
        clean = int(self._meta(self._index(), "clean") or 0)
        fixed = jsonl.repair(self.records_path, RECORD_LINE_MAX, IterationRecord, clean)
        if fixed is not None:
            self.raise_mark(fixed.highest)
            message = fixed.message()
            self.event(
                "torn_line_repair",
                message,
                bytes=fixed.aside_bytes,
                saved=fixed.aside.name if fixed.aside else "",
                kept=fixed.kept,
                fragments=fixed.fragments,
            )
            self.close()  # the index points into the old file: rebuild it
            with contextlib.suppress(OSError):
                self.index_path.unlink()
            said.append(message)
        said += self._restore()
        return "; ".join(said)

    def repair_events(self) -> str:
        """Make events.jsonl whole again (see jsonl.repair); what was done, or ''."""
        fixed = jsonl.repair(self.events_path, EVENT_LINE_MAX, Event)
        return fixed.message() if fixed is not None else ""

    def _restore(self) -> list[str]:
        """Append again the records whose folder has record.json but whose line is gone."""
        if not self.history.is_dir():
            return []
        known = {str(r[0]) for r in self._index().execute("SELECT iteration_id FROM records")}
        said: list[str] = []
        for name in sorted(os.listdir(self.history)):
            if name in known or not sequence_of(name):
                continue
            path = self.history / name / "record.json"
            record = _read_record(path)
            if record is None or record.iteration_id != name:
                continue
            self.append(record, folder=False)
            message = f"{self.records_path}: its line for {name} was lost; restored from {path}"
            self.event("record_restored", message, iteration_id=name)
            said.append(message)
        return said

    # -- iteration numbers ------------------------------------------------------

    def _read_mark(self) -> int:
        if self.mark_path is None:
            return 0
        if self._mark < 0:
            self._mark = 0
            with contextlib.suppress(OSError, ValueError), self.mark_path.open("rb") as handle:
                text = handle.read(SEQUENCE_FILE_MAX + 1)
                if len(text) <= SEQUENCE_FILE_MAX:
                    self._mark = sequence_of(f"iter-{int(text.strip()):04d}-")
        return self._mark

    def raise_mark(self, number: int) -> None:
        """Keep `number` as given out for good (in the kernel's state), if it is the highest."""
        if self.mark_path is None or number <= self._read_mark():
            return
        with contextlib.suppress(OSError):
            atomic_write_text(self.mark_path, f"{number}\n")
            self._mark = number

    def _side_highest(self, side: Path) -> int:
        """The highest number a side file names (read again only when it changed)."""
        try:
            stat = side.stat()
        except OSError:
            return 0
        key = (stat.st_size, stat.st_mtime_ns)
        known = self._sides.get(side.name)
        if known is None or known[0] != key:
            known = (key, jsonl.highest_in_file(side))
            self._sides[side.name] = known
        return known[1]

    def next_sequence(self) -> int:
        """One more than the highest iteration number ever given out.

        Whatever state records.jsonl is in (torn, cut short, lines deleted, the index lost),
        the number is above every one its lines, unreadable lines, side files and iteration
        folders name, and above the high-water mark kept in the kernel's state.
        """
        db = self._index()
        row = db.execute("SELECT max(seq) FROM records").fetchone()
        highest = max(int(row[0] or 0), int(self._meta(db, "seen") or 0), self._read_mark())
        with contextlib.suppress(OSError):
            for name in os.listdir(self.history):
                highest = max(highest, sequence_of(name))
        for side in jsonl.side_files(self.records_path):
            highest = max(highest, self._side_highest(side))
        number = highest + 1
        if len(str(number)) > SEQUENCE_DIGITS_MAX:
            raise SeedError(
                f"{self.history}: iteration numbers are used up (iter-{highest}-...); "
                "move history/ aside to start again"
            )
        return number

    # -- the index --------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        self.history.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.index_path, isolation_level="DEFERRED")
        db.executescript(_SCHEMA + _DETAILS_SCHEMA)
        if (
            self._meta(db, "details") != _DETAILS_VERSION
            or self._meta(db, "briefs") != _BRIEFS_VERSION
        ):
            # an index written before the details or briefs tables existed: re-read the log once
            db.execute("DELETE FROM records")
            db.execute("DROP TABLE details")  # its columns may have changed
            db.execute("DROP TABLE IF EXISTS agents")
            db.executescript(_DETAILS_SCHEMA)
            db.execute("DELETE FROM briefs")
            self._set_meta(db, "size", "0")
            self._set_meta(db, "details", _DETAILS_VERSION)
            self._set_meta(db, "briefs", _BRIEFS_VERSION)
            db.commit()
        return db

    def _index(self) -> sqlite3.Connection:
        if self._db is None:
            try:
                self._db = self._connect()
                self._db.execute("SELECT count(*) FROM records").fetchone()
            except sqlite3.DatabaseError:
                with contextlib.suppress(OSError):
                    self.index_path.unlink()
                self._db = self._connect()
        self._refresh(self._db)
        self._refresh_fates(self._db)
        return self._db

    def _refresh_fates(self, db: sqlite3.Connection) -> None:
        """Read new pr_merged/pr_closed events into the fates table and count PROPOSED records
        by them (the first word on an iteration is its fate)."""
        size = self.events_path.stat().st_size if self.events_path.exists() else 0
        mark = f"{size}:{self._meta(db, 'size')}"
        if mark == self._meta(db, "fated"):  # indexed already: read, never written again
            if self._fates_mark != mark:
                self._load_fates(db, mark)
            return
        read = int(self._meta(db, "events") or 0)
        if size < read:  # rewritten by a repair: read it all again
            db.execute("DELETE FROM fates")
            read = 0
        for line in jsonl.lines(self.events_path, EVENT_LINE_MAX, read) if size else ():
            if not line.ended:
                break
            read = line.offset + line.size
            for event in _events_in(line.data or b""):
                fate, iteration = FATES.get(event.kind), event.data.get("iteration")
                if fate is not None and isinstance(iteration, str):
                    db.execute(
                        "INSERT OR IGNORE INTO fates VALUES (?, ?, ?)",
                        (iteration, fate.value, event.message),
                    )
        db.execute(
            "UPDATE records SET outcome = (SELECT f.outcome FROM fates f WHERE f.iteration_id ="
            " records.iteration_id) WHERE outcome = 'PROPOSED' AND iteration_id IN"
            " (SELECT iteration_id FROM fates)"
        )
        self._set_meta(db, "events", str(read))
        self._set_meta(db, "fated", mark)
        db.commit()
        self._load_fates(db, mark)

    def _load_fates(self, db: sqlite3.Connection, mark: str) -> None:
        """The fates table into memory, as of mark."""
        rows = db.execute("SELECT iteration_id, outcome, said FROM fates").fetchall()
        self._fates = {r[0]: (IterationOutcome(r[1]), str(r[2])) for r in rows}
        self._fates_mark = mark

    def _fated(self, record: IterationRecord) -> IterationRecord:
        """A PROPOSED record as its pull request's fate counts it (the forge's word in its reason)."""
        fate = self._fates.get(record.iteration_id)
        if record.outcome != IterationOutcome.PROPOSED or fate is None:
            return record
        return record.model_copy(
            update={"outcome": fate[0], "reason": f"{record.reason}; then {fate[1]}"}
        )

    def _meta(self, db: sqlite3.Connection, key: str) -> str:
        row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return str(row[0]) if row else ""

    def _set_meta(self, db: sqlite3.Connection, key: str, value: str) -> None:
        db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    def _insert(
        self, db: sqlite3.Connection, record: IterationRecord, offset: int, length: int
    ) -> None:
        db.execute(
            "INSERT OR REPLACE INTO records VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                record.iteration_id,
                sequence_of(record.iteration_id),
                offset,
                length,
                record.outcome.value,
                record.failure_category.value if record.failure_category else "",
                record.gap.key,
                record.gap.source,
                record.gap.category.value,
                record.gap.title,
                record.task_kind,
                record.started_at.isoformat(),
                record.ended_at.isoformat(),
                record.ended_at.astimezone(UTC).date().isoformat(),
                record.cost_usd,
                record.tokens_used,
                record.backend,
                self.fingerprint,
            ),
        )
        db.execute(
            "INSERT OR REPLACE INTO details VALUES (?,?,?,?,?)",
            (
                record.iteration_id,
                json.dumps(record.durations),
                json.dumps(record.open_gaps),
                json.dumps([c.outcome.value for c in record.candidates]),
                int(record.ran_agent),
            ),
        )
        day = record.ended_at.astimezone(UTC).date().isoformat()
        db.executemany(
            "INSERT OR REPLACE INTO agents VALUES (?,?,?,?,?,?,?,?)",
            [
                (record.iteration_id, run, key, record.task_kind, day, landed, cost, seconds)
                for run, key, landed, cost, seconds in agent_runs(record)
            ],
        )
        db.execute(
            "INSERT OR REPLACE INTO briefs VALUES (?, ?)",
            (record.iteration_id, brief_of(record).model_dump_json()),
        )

    def _refresh(self, db: sqlite3.Connection) -> None:
        try:
            stat = self.records_path.stat()
        except FileNotFoundError:
            size, identity = 0, ""
        else:
            size, identity = stat.st_size, f"{stat.st_dev}:{stat.st_ino}"
        indexed = int(self._meta(db, "size") or 0)
        replaced = identity != self._meta(db, "file") and indexed > 0
        if size == indexed and not replaced:
            return
        seen = int(self._meta(db, "seen") or 0)
        clean = int(self._meta(db, "clean") or 0)  # every line before it is a whole record
        self._set_meta(db, "file", identity)
        if size < indexed or replaced:  # cut short, or rewritten by a repair: read it all again
            db.execute("DELETE FROM records")
            db.execute("DELETE FROM details")
            db.execute("DELETE FROM agents")
            db.execute("DELETE FROM briefs")
            indexed = seen = clean = 0
        self.problems.clear()
        offset = indexed
        for line in jsonl.lines(self.records_path, RECORD_LINE_MAX, indexed):
            if not line.ended:
                break  # a line still being written (or torn): index it next time
            offset = line.offset + line.size
            where = f"{self.records_path}: line at byte {line.offset}"
            if line.data is None:
                found = 0
                for start, end, inner in jsonl.objects_in_long(
                    self.records_path, line, IterationRecord, RECORD_LINE_MAX
                ):
                    self._insert(db, inner, start, end - start)
                    found += 1
                kept = f" ({found} whole record(s) in it are read)" if found else ""
                self.problems.append(
                    f"{where}: {line.size} bytes, over the bound of {RECORD_LINE_MAX}{kept}"
                )
                continue
            if not line.data.strip():
                clean = offset if clean == line.offset else clean
                continue
            try:
                record = IterationRecord.model_validate_json(line.data)
            except (ValidationError, ValueError) as exc:
                reason = str(exc).splitlines()[0]
            else:
                self._insert(db, record, line.offset, line.size)
                clean = offset if clean == line.offset else clean
                continue
            seen = max(seen, jsonl.numbers_in(line.data))
            found = 0
            for start, end, inner in jsonl.objects_in(line.data, IterationRecord):
                self._insert(db, inner, line.offset + start, end - start)
                found += 1
            kept = f" ({found} whole record(s) in it are read)" if found else ""
            self.problems.append(f"{where}: {reason}{kept}")
        self._set_meta(db, "size", str(offset))
        self._set_meta(db, "seen", str(min(seen, 10**SEQUENCE_DIGITS_MAX - 1)))
        self._set_meta(db, "clean", str(clean))
        db.commit()

    # -- reading ----------------------------------------------------------------

    def _load(self, offset: int, length: int) -> IterationRecord | None:
        if not 0 < length <= RECORD_LINE_MAX:
            return None
        with self.records_path.open("rb") as handle:
            handle.seek(offset)
            raw = handle.read(length)
        try:
            return self._fated(IterationRecord.model_validate_json(raw))
        except (ValidationError, ValueError):
            return None

    def _records(self, rows: Sequence[tuple[int, int]]) -> list[IterationRecord]:
        out: list[IterationRecord] = []
        for offset, length in rows:
            record = self._load(offset, length)
            if record is not None:
                out.append(record)
        return out

    def count(self) -> int:
        """Number of indexed records."""
        return int(self._index().execute("SELECT count(*) FROM records").fetchone()[0])

    def _briefs(self, rows: Sequence[tuple[str]]) -> list[IterationRecord]:
        out: list[IterationRecord] = []
        for (text,) in rows:
            with contextlib.suppress(ValidationError, ValueError):
                out.append(self._fated(IterationRecord.model_validate_json(text)))
        return out

    def recent(self, limit: int = 20, *, brief: bool = False) -> list[IterationRecord]:
        """The latest records, oldest first (briefs: no plan, see brief_of)."""
        db = self._index()
        if brief:
            rows = db.execute(
                "SELECT b.brief FROM (SELECT iteration_id, seq FROM records ORDER BY seq DESC LIMIT ?) r "
                "JOIN briefs b USING (iteration_id) ORDER BY r.seq",
                (limit,),
            ).fetchall()
            return self._briefs(rows)
        rows = db.execute(
            "SELECT offset, length FROM (SELECT * FROM records ORDER BY seq DESC LIMIT ?) ORDER BY seq",
            (limit,),
        ).fetchall()
        return self._records(rows)

    def for_gaps(
        self, keys: Sequence[str], per_gap: int = 5, *, brief: bool = False
    ) -> list[IterationRecord]:
        """The latest records of each of these gaps, oldest first (briefs: no plan)."""
        db = self._index()
        rows: list[tuple[int, Any, Any]] = []
        sql = (
            "SELECT r.seq, b.brief, 0 FROM records r JOIN briefs b USING (iteration_id) "
            "WHERE r.gap_key = ? ORDER BY r.seq DESC LIMIT ?"
            if brief
            else "SELECT seq, offset, length FROM records WHERE gap_key = ? ORDER BY seq DESC LIMIT ?"
        )
        for key in dict.fromkeys(keys):
            rows += db.execute(sql, (key, per_gap)).fetchall()
        rows.sort(key=lambda row: row[0])
        if brief:
            return self._briefs([(b,) for _, b, _ in rows])
        return self._records([(o, n) for _, o, n in rows])

    def proposed(self) -> list[IterationRecord]:
        """The PROPOSED records whose pull request the forge has not yet merged or closed."""
        rows = (
            self._index()
            .execute("SELECT offset, length FROM records WHERE outcome = 'PROPOSED' ORDER BY seq")
            .fetchall()
        )
        return [r for r in self._records(rows) if r.pull_request]

    def get(self, iteration_id: str) -> IterationRecord | None:
        """One record by id."""
        row = (
            self._index()
            .execute("SELECT offset, length FROM records WHERE iteration_id = ?", (iteration_id,))
            .fetchone()
        )
        return self._load(int(row[0]), int(row[1])) if row else None

    def summaries(self, outcome: str = "", source: str = "", limit: int = 0) -> list[Summary]:
        """Index rows, newest first, optionally filtered by outcome and gap source."""
        sql = (
            "SELECT r.iteration_id, r.seq, r.outcome, r.category, r.gap_key, r.gap_source,"
            " r.gap_title, r.started, r.ended, r.cost, r.tokens, r.backend, coalesce(d.agent, 0)"
            " FROM records r LEFT JOIN details d ON d.iteration_id = r.iteration_id"
        )
        where: list[str] = []
        args: list[Any] = []
        if outcome:
            where.append("r.outcome = ?")
            args.append(outcome.upper())
        if source:
            where.append("r.gap_source = ?")
            args.append(source)
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY r.seq DESC"
        if limit:
            sql += f" LIMIT {int(limit)}"
        return [
            Summary(*row[:-1], ran_agent=bool(row[-1])) for row in self._index().execute(sql, args)
        ]

    def day_totals(self, day: str) -> tuple[float, int]:
        """Cost and number of iterations recorded (WAITING aside: what max_iterations_per_day
        counts), for one UTC day."""
        row = (
            self._index()
            .execute(
                "SELECT coalesce(sum(cost), 0), count(*) FROM records WHERE day = ? AND outcome != 'WAITING'",
                (day,),
            )
            .fetchone()
        )
        return float(row[0]), int(row[1])

    def tallies(self) -> list[OutcomeTally]:
        """Successes and failures per task kind, fingerprint and day (the planner's memory)."""
        rows = (
            self._index()
            .execute(
                "SELECT task_kind, fingerprint, day, sum(outcome = 'SUCCESS'), "
                "sum(outcome IN ('FAILURE', 'ROLLBACK', 'NO_CHANGE', 'MERGE_BLOCKED')) "
                "FROM records WHERE task_kind != '' GROUP BY task_kind, fingerprint, day ORDER BY day"
            )
            .fetchall()
        )
        return [
            OutcomeTally(
                task_kind=r[0], fingerprint=r[1], day=r[2], successes=int(r[3]), failures=int(r[4])
            )
            for r in rows
        ]

    def agent_tallies(self) -> list[AgentTally]:
        """The portfolio agents' verified outcomes per agent, task kind and day."""
        rows = (
            self._index()
            .execute(
                "SELECT agent_key, task_kind, day, count(*), sum(landed), sum(cost), sum(seconds)"
                " FROM agents GROUP BY agent_key, task_kind, day ORDER BY day, agent_key, task_kind"
            )
            .fetchall()
        )
        return [
            AgentTally(
                key=r[0],
                task_kind=r[1],
                day=r[2],
                tried=int(r[3]),
                landed=int(r[4]),
                cost_usd=float(r[5]),
                seconds=float(r[6]),
            )
            for r in rows
        ]

    def iter_all(self) -> Iterator[IterationRecord]:
        """Every record in order (for reports that need them all)."""
        rows = self._index().execute("SELECT offset, length FROM records ORDER BY seq").fetchall()
        for offset, length in rows:
            record = self._load(int(offset), int(length))
            if record is not None:
                yield record

    def report_rows(self, limit: int = 0) -> list[ReportRow]:
        """Index rows with durations and open gaps, newest first (all of them when limit is 0)."""
        sql = (
            "SELECT r.iteration_id, r.outcome, r.category, r.gap_key, r.gap_source, r.gap_category,"
            " r.gap_title, r.started, r.ended, r.cost, r.tokens, r.backend, d.durations, d.open_gaps,"
            " d.candidates, d.agent"
            " FROM records r LEFT JOIN details d ON d.iteration_id = r.iteration_id"
            " ORDER BY r.seq DESC, r.started DESC"
        )
        if limit:
            sql += f" LIMIT {int(limit)}"
        return [_report_row(row) for row in self._index().execute(sql).fetchall()]

    def totals(self) -> Totals:
        """Iterations by outcome, and cost and tokens over every record."""
        db = self._index()
        counts = {
            str(o): int(n)
            for o, n in db.execute("SELECT outcome, count(*) FROM records GROUP BY outcome")
        }
        cost, tokens = db.execute(
            "SELECT coalesce(sum(cost), 0), coalesce(sum(tokens), 0) FROM records"
        ).fetchone()
        runs, landed = db.execute(
            "SELECT count(*), coalesce(sum(r.outcome = 'SUCCESS'), 0) FROM records r"
            " JOIN details d ON d.iteration_id = r.iteration_id WHERE d.agent = 1"
        ).fetchone()
        return Totals(
            sum(counts.values()), counts, float(cost), int(tokens), int(runs), int(landed)
        )

    def count_category(self, category: str) -> int:
        """Records of one failure category, over every indexed record."""
        row = (
            self._index()
            .execute("SELECT count(*) FROM records WHERE category = ?", (category,))
            .fetchone()
        )
        return int(row[0])

    def candidate_totals(self) -> dict[str, int]:
        """Candidates by outcome, over every record (a single run counts none)."""
        rows = (
            self._index()
            .execute(
                "SELECT j.value, count(*) FROM details d, json_each(d.candidates) j"
                " GROUP BY j.value ORDER BY j.value"
            )
            .fetchall()
        )
        return {str(k): int(n) for k, n in rows}

    def phase_totals(self) -> dict[str, tuple[float, int]]:
        """Seconds and number of iterations per phase, over every record."""
        rows = (
            self._index()
            .execute(
                "SELECT j.key, sum(j.value), count(*) FROM details d, json_each(d.durations) j"
                " GROUP BY j.key ORDER BY j.key"
            )
            .fetchall()
        )
        return {str(k): (float(total or 0.0), int(n)) for k, total, n in rows}

    def close(self) -> None:
        """Close the index connection."""
        if self._db is not None:
            self._db.close()
            self._db = None


def _report_row(row: Sequence[Any]) -> ReportRow:
    return ReportRow(
        iteration_id=str(row[0]),
        outcome=str(row[1]),
        category=str(row[2] or ""),
        gap_key=str(row[3]),
        gap_source=str(row[4]),
        gap_category=str(row[5]),
        gap_title=str(row[6] or ""),
        started=str(row[7]),
        ended=str(row[8]),
        cost=float(row[9] or 0.0),
        tokens=int(row[10] or 0),
        backend=str(row[11] or ""),
        durations=_json_numbers(row[12]),
        open_gaps={k: int(v) for k, v in _json_numbers(row[13]).items()},
        candidates=_json_strings(row[14]),
        ran_agent=bool(row[15]),
    )


def _json_strings(text: str | None) -> tuple[str, ...]:
    """A JSON list of strings from the index (() when absent or unreadable)."""
    try:
        raw: Any = json.loads(text or "[]")
    except ValueError:
        return ()
    return tuple(str(v) for v in cast(list[Any], raw)) if isinstance(raw, list) else ()


def _json_numbers(text: str | None) -> dict[str, float]:
    """A JSON object of numbers from the index ({} when absent or unreadable)."""
    if not text:
        return {}
    try:
        raw: Any = json.loads(text)
    except ValueError:
        return {}
    if not isinstance(raw, dict):
        return {}
    items = cast(dict[str, Any], raw).items()
    return {str(k): float(v) for k, v in items if isinstance(v, int | float)}


def _events_in(raw: bytes) -> list[Event]:
    """The events of one line of events.jsonl: the line, or the whole ones glued in it."""
    with contextlib.suppress(ValidationError, ValueError):
        return [Event.model_validate_json(raw)]
    return [event for _, _, event in jsonl.objects_in(raw, Event)]


def _read_record(path: Path) -> IterationRecord | None:
    """A record.json of an iteration folder (None when absent, a link, too big or not a record)."""
    try:
        if path.is_symlink() or not path.is_file():
            return None
        with path.open("rb") as handle:
            data = handle.read(RECORD_LINE_MAX + 1)
    except OSError:
        return None
    if len(data) > RECORD_LINE_MAX:
        return None
    with contextlib.suppress(ValidationError, ValueError):
        return IterationRecord.model_validate_json(data)
    return None


_TRIMMED = (
    "evidence",
    "failures",
    "verdicts",
    "touched_files",
    "repairs",
    "rounds",
    "checkout_changes",
    "ranking",
)
_KEEP_ITEMS = 100


def _line_bytes(record: IterationRecord) -> int:
    return len(record.model_dump_json().encode("utf-8")) + 2


def fitted(record: IterationRecord) -> IterationRecord:
    """The record cut to fit one line of records.jsonl (RECORD_LINE_MAX): long lists first,
    then the plan (history/<id>/plan.json keeps it), then long texts; what was cut is said."""
    if _line_bytes(record) <= RECORD_LINE_MAX:
        return record
    update: dict[str, Any] = {}
    left_out = 0
    for name in _TRIMMED:
        items = cast(tuple[Any, ...], getattr(record, name))
        if len(items) > _KEEP_ITEMS:
            update[name] = items[:_KEEP_ITEMS]
            left_out += len(items) - _KEEP_ITEMS
    evidence = [e[:2000] for e in update.get("evidence", record.evidence)]
    evidence.append(
        f"... {left_out} more items left out: the record had to fit one line of records.jsonl"
    )
    update["evidence"] = tuple(evidence)
    record = record.model_copy(update=update)
    if _line_bytes(record) > RECORD_LINE_MAX:
        record = record.model_copy(update={"plan": None})
    if _line_bytes(record) > RECORD_LINE_MAX:
        record = record.model_copy(
            update={
                "reason": record.reason[:1000],
                "agent_summary": record.agent_summary[:4000],
                "agent_note": record.agent_note[:4000],
                "evidence": tuple(e[:200] for e in record.evidence[:20]),
            }
        )
    return record
