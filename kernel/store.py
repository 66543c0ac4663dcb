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
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from pydantic import ValidationError

from domain import Event, IterationRecord, OutcomeTally
from kernel.briefs import brief_of
from kernel.fsutil import append_line, atomic_write_text, unique_path

_SEQ = re.compile(r"^iter-(\d{4,})-")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS records (
    iteration_id TEXT PRIMARY KEY, seq INTEGER, offset INTEGER, length INTEGER,
    outcome TEXT, category TEXT, gap_key TEXT, gap_source TEXT, gap_category TEXT,
    gap_title TEXT, task_kind TEXT, started TEXT, ended TEXT, day TEXT,
    cost REAL, tokens INTEGER, backend TEXT, fingerprint TEXT
);
CREATE TABLE IF NOT EXISTS briefs (iteration_id TEXT PRIMARY KEY, brief TEXT);
CREATE INDEX IF NOT EXISTS records_by_kind ON records (task_kind, fingerprint, day, outcome);
CREATE INDEX IF NOT EXISTS records_by_gap ON records (gap_key, seq);
CREATE INDEX IF NOT EXISTS records_by_seq ON records (seq);
"""
# what reports and charts need beyond the records table; a new version rebuilds the index
_DETAILS_SCHEMA = """
CREATE TABLE IF NOT EXISTS details (
    iteration_id TEXT PRIMARY KEY, durations TEXT, open_gaps TEXT
);
"""
_DETAILS_VERSION = "1"
_BRIEFS_VERSION = "1"
"""Version of the briefs table (see kernel/briefs.py); an index of another is re-read."""


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


@dataclass(frozen=True)
class Totals:
    """Counts and sums over every indexed record."""

    iterations: int
    by_outcome: dict[str, int]
    cost: float
    tokens: int


def sequence_of(iteration_id: str) -> int:
    """The sequence number inside an iteration id (0 when it has none)."""
    match = _SEQ.match(iteration_id)
    return int(match.group(1)) if match else 0


class RecordStore:
    """Append-only records and events, per-iteration folders, and the index."""

    def __init__(self, history: Path, fingerprint: str = "") -> None:
        self.history = history
        self.records_path = history / "records.jsonl"
        self.events_path = history / "events.jsonl"
        self.index_path = history / ".index.sqlite"
        self.fingerprint = fingerprint
        self.problems: list[str] = []
        """Malformed lines met while indexing (path, line, reason); they are skipped, not lost."""
        self._db: sqlite3.Connection | None = None

    # -- writing ---------------------------------------------------------------

    def folder(self, iteration_id: str) -> Path:
        """history/<iteration_id>/, created on demand."""
        path = self.history / iteration_id
        path.mkdir(parents=True, exist_ok=True)
        return path

    def write_file(self, iteration_id: str, name: str, text: str) -> Path:
        """Write one file of an iteration's folder atomically."""
        path = self.folder(iteration_id) / name
        atomic_write_text(path, text)
        return path

    def append(self, record: IterationRecord) -> None:
        """Append a record (fsynced), write its record.json, and index it."""
        self.history.mkdir(parents=True, exist_ok=True)
        line = record.model_dump_json()
        offset = self.records_path.stat().st_size if self.records_path.exists() else 0
        append_line(self.records_path, line)
        self.write_file(record.iteration_id, "record.json", record.model_dump_json(indent=2) + "\n")
        db = self._index()
        self._insert(db, record, offset, len(line.encode("utf-8")) + 1)
        self._set_meta(db, "size", str(self.records_path.stat().st_size))
        db.commit()

    def event(self, kind: str, message: str, **data: Any) -> Event:
        """Append an event (halt, resume, module fallback, repair) to events.jsonl."""
        event = Event(at=datetime.now(UTC), kind=kind, message=message, data=data)
        append_line(self.events_path, event.model_dump_json())
        return event

    def events(self, limit: int = 50) -> list[Event]:
        """The latest events, oldest first (malformed lines skipped)."""
        if not self.events_path.exists():
            return []
        found: list[Event] = []
        for line in self.events_path.read_text(encoding="utf-8", errors="replace").splitlines()[
            -limit:
        ]:
            with contextlib.suppress(ValidationError, ValueError):
                found.append(Event.model_validate_json(line))
        return found

    def repair(self) -> str:
        """Cut a torn last line off records.jsonl (saving its bytes aside); '' if none."""
        path = self.records_path
        if not path.exists() or path.stat().st_size == 0:
            return ""
        data = path.read_bytes()
        end = len(data)
        good = data.rfind(b"\n") + 1
        torn = data[good:end]
        if not torn:
            last = data[: good - 1].rsplit(b"\n", 1)[-1]
            try:
                json.loads(last)
            except ValueError:
                torn, good = last + b"\n", good - len(last) - 1
            else:
                return ""
        aside = unique_path(self.history / f"records.jsonl.torn-{datetime.now(UTC):%Y%m%d-%H%M%S}")
        aside.write_bytes(torn)
        with path.open("r+b") as handle:
            handle.truncate(good)
            os.fsync(handle.fileno())
        message = f"{path}: cut a torn last line of {len(torn)} bytes (saved to {aside.name})"
        self.event("torn_line_repair", message, bytes=len(torn), saved=aside.name)
        self.close()  # the index may point past the cut: rebuild it
        with contextlib.suppress(OSError):
            self.index_path.unlink()
        return message

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
            db.execute("DELETE FROM details")
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
        return self._db

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
            "INSERT OR REPLACE INTO details VALUES (?,?,?)",
            (record.iteration_id, json.dumps(record.durations), json.dumps(record.open_gaps)),
        )
        db.execute(
            "INSERT OR REPLACE INTO briefs VALUES (?, ?)",
            (record.iteration_id, brief_of(record).model_dump_json()),
        )

    def _refresh(self, db: sqlite3.Connection) -> None:
        size = self.records_path.stat().st_size if self.records_path.exists() else 0
        indexed = int(self._meta(db, "size") or 0)
        if size == indexed:
            return
        if size < indexed:
            db.execute("DELETE FROM records")
            db.execute("DELETE FROM details")
            db.execute("DELETE FROM briefs")
            indexed = 0
        self.problems.clear()
        with self.records_path.open("rb") as handle:
            handle.seek(indexed)
            offset = indexed
            for number, raw in enumerate(handle, start=1):
                if not raw.endswith(b"\n"):
                    break  # a line still being written (or torn): index it next time
                try:
                    record = IterationRecord.model_validate_json(raw)
                except (ValidationError, ValueError) as exc:
                    reason = str(exc).splitlines()[0]
                    self.problems.append(
                        f"{self.records_path}: line at byte {offset} (+{number}): {reason}"
                    )
                else:
                    self._insert(db, record, offset, len(raw))
                offset += len(raw)
        self._set_meta(db, "size", str(offset))
        db.commit()

    # -- reading ----------------------------------------------------------------

    def _load(self, offset: int, length: int) -> IterationRecord | None:
        with self.records_path.open("rb") as handle:
            handle.seek(offset)
            raw = handle.read(length)
        try:
            return IterationRecord.model_validate_json(raw)
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

    def next_sequence(self) -> int:
        """One more than the highest sequence number recorded."""
        row = self._index().execute("SELECT max(seq) FROM records").fetchone()
        return int(row[0] or 0) + 1

    def _briefs(self, rows: Sequence[tuple[str]]) -> list[IterationRecord]:
        out: list[IterationRecord] = []
        for (text,) in rows:
            with contextlib.suppress(ValidationError, ValueError):
                out.append(IterationRecord.model_validate_json(text))
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
        sql = "SELECT iteration_id, seq, outcome, category, gap_key, gap_source, gap_title, started, ended, cost, tokens, backend FROM records"
        where: list[str] = []
        args: list[Any] = []
        if outcome:
            where.append("outcome = ?")
            args.append(outcome.upper())
        if source:
            where.append("gap_source = ?")
            args.append(source)
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY seq DESC"
        if limit:
            sql += f" LIMIT {int(limit)}"
        return [Summary(*row) for row in self._index().execute(sql, args).fetchall()]

    def day_totals(self, day: str) -> tuple[float, int]:
        """Cost and number of iterations that ran an agent, for one UTC day."""
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
            " r.gap_title, r.started, r.ended, r.cost, r.tokens, r.backend, d.durations, d.open_gaps"
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
        return Totals(sum(counts.values()), counts, float(cost), int(tokens))

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
    )


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
