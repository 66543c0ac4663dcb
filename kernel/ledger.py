"""The spend ledger: one line per agent run, written as soon as the run ends; budgets read it.

Records are written at the end of an iteration; a crash during verification would lose what
the agent spent. The ledger is appended right after the agent's process ends, so money spent
is counted even when the iteration never gets its record.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from kernel import jsonl
from kernel.bounds import LEDGER_LINE_MAX
from kernel.fsutil import append_line
from kernel.store import RecordStore

LEDGER_FILE = "ledger.jsonl"
_FIELD_MAX = 500
"""Characters of each text field of an entry: a line always fits LEDGER_LINE_MAX."""


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
    """Append one run (fsynced; a torn last line from a crash stays a line of its own)."""
    entry = entry.model_copy(
        update={
            name: str(getattr(entry, name))[:_FIELD_MAX]
            for name in ("iteration_id", "backend", "model", "cost_basis")
        }
    )
    append_line(ledger_path(history), entry.model_dump_json())


def entries(history: Path) -> Iterator[LedgerEntry]:
    """Every readable entry, newest first; a damaged line gives up the whole entries in it, a
    line over LEDGER_LINE_MAX is skipped unread."""
    path = ledger_path(history)
    if not path.exists():
        return
    for line in jsonl.lines_backwards(path, LEDGER_LINE_MAX):
        raw = line.data
        if raw is None:
            glued = jsonl.objects_in_long(path, line, LedgerEntry, LEDGER_LINE_MAX)
            yield from reversed([entry for _, _, entry in glued])
            continue
        if not raw.strip():
            continue
        try:
            yield LedgerEntry.model_validate_json(raw)
            continue
        except (ValidationError, ValueError):
            pass
        yield from reversed([entry for _, _, entry in jsonl.objects_in(raw, LedgerEntry)])


def accounted(history: Path, iteration_id: str) -> bool:
    """Whether the ledger has an entry for this iteration."""
    return any(e.iteration_id == iteration_id for e in entries(history))


def repair(history: Path) -> str:
    """Make ledger.jsonl whole again (see jsonl.repair); what was done, or ''."""
    fixed = jsonl.repair(ledger_path(history), LEDGER_LINE_MAX, LedgerEntry)
    return fixed.message() if fixed is not None else ""


def day_spend(history: Path, day: str) -> Spend:
    """Cost, tokens and runs of one UTC day (YYYY-MM-DD); unreadable lines are skipped."""
    cost = 0.0
    tokens = runs = 0
    older = 0
    for entry in entries(history):
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
