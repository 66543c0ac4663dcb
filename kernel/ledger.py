"""The spend ledger: one line per agent run, written as soon as the run ends; budgets read it.

Records are written at the end of an iteration; a crash during verification would lose what
the agent spent. The ledger is appended right after the agent's process ends, so money spent
is counted even when the iteration never gets its record.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from kernel.fsutil import append_line
from kernel.store import RecordStore

LEDGER_FILE = "ledger.jsonl"
_BLOCK = 64 * 1024


class LedgerEntry(BaseModel):
    """What one agent run used."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    at: datetime
    iteration_id: str
    backend: str
    model: str = ""
    tokens_used: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    cost_basis: str = ""


@dataclass(frozen=True)
class Spend:
    """What the runs of one UTC day used."""

    cost_usd: float = 0.0
    tokens: int = 0
    runs: int = 0


def ledger_path(history: Path) -> Path:
    """history/ledger.jsonl."""
    return history / LEDGER_FILE


def append(history: Path, entry: LedgerEntry) -> None:
    """Append one run (fsynced); a torn last line from a crash is closed off first."""
    path = ledger_path(history)
    line = entry.model_dump_json()
    with contextlib.suppress(OSError):
        if path.stat().st_size > 0:
            with path.open("rb") as handle:
                handle.seek(-1, os.SEEK_END)
                if handle.read(1) != b"\n":
                    line = "\n" + line
    append_line(path, line)


def _lines_backwards(path: Path) -> Iterator[bytes]:
    """Lines from the end of the file, newest first, read in blocks."""
    with path.open("rb") as handle:
        position = handle.seek(0, os.SEEK_END)
        rest = b""
        while position > 0:
            step = min(_BLOCK, position)
            position -= step
            handle.seek(position)
            lines = (handle.read(step) + rest).split(b"\n")
            rest = lines[0]
            yield from reversed(lines[1:])
        yield rest


def day_spend(history: Path, day: str) -> Spend:
    """Cost, tokens and runs of one UTC day (YYYY-MM-DD); unreadable lines are skipped."""
    path = ledger_path(history)
    if not path.exists():
        return Spend()
    cost = 0.0
    tokens = runs = 0
    older = 0
    for raw in _lines_backwards(path):
        if not raw.strip():
            continue
        try:
            entry = LedgerEntry.model_validate_json(raw)
        except (ValidationError, ValueError):
            continue
        entry_day = entry.at.astimezone(UTC).date().isoformat()
        if entry_day == day:
            cost += entry.cost_usd
            tokens += entry.tokens_used
            runs += 1
        elif entry_day < day:
            older += 1
            if older > 50:  # appended in time order: well past the day, stop reading
                break
    return Spend(round(cost, 6), tokens, runs)


def spent(store: RecordStore, day: str) -> float:
    """USD spent on a UTC day: the ledger, or the records if they show more (older histories)."""
    from_records, _ = store.day_totals(day)
    return max(day_spend(store.history, day).cost_usd, from_records)


def today() -> str:
    """Today's UTC date as YYYY-MM-DD."""
    return datetime.now(UTC).date().isoformat()
