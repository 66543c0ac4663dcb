"""Money: the spend ledger, prices for runs whose tool reports no cost, and the budget checks.

The ledger has one line per agent run, appended as soon as the run ends (records are written
at the end of an iteration; a crash during verification would lose what the agent spent), so
money spent is counted even when the iteration never gets its record. spent_on() is the one
reader of a day's spend: the budget check, `status`, the history digest and the metrics use it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from pydantic import BaseModel, ConfigDict, ValidationError

from domain import AgentReport
from kernel.bounds import LEDGER_LINE_MAX
from kernel.config import BudgetConfig, ModelPrice
from kernel.fsutil import append_line
from kernel.records import jsonl
from kernel.records.journal import stage_at_least
from kernel.records.store import RecordStore

LEDGER_FILE = "ledger.jsonl"
REPORTED = "reported"
PRICES = "prices"
NONE = "none"
"""Where a run's cost comes from: the tool's report, the [agent.prices] table, or nowhere."""
WIRE = "wire"
"""The basis of a killed run's line when the gateway counted its answers (its request lines)."""
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
    request: int = 0
    """The model request (the gateway's number, from 1) this line counts, written as its answer
    ended; 0 for a run's line, which then counts only what its request lines did not."""


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
    return runs_of(history, iteration_id) > 0


def runs_of(history: Path, iteration_id: str) -> int:
    """How many of this iteration's agent runs the ledger has (not their request lines)."""
    return sum(1 for e in entries(history) if e.iteration_id == iteration_id and not e.request)


def of_iteration(line_id: str, iteration_id: str) -> bool:
    """Whether a ledger line's id is the iteration's, or one of its candidates' (ID-cK)."""
    if line_id == iteration_id:
        return True
    tail = line_id.removeprefix(f"{iteration_id}-c")
    return tail != line_id and tail.isdigit()


def iteration_cost(history: Path, iteration_id: str) -> tuple[float, str]:
    """What the ledger counts for one iteration, and where the cost comes from (the last run's
    basis: "reserved" when a killed run was settled at its reservation)."""
    mine = [e for e in entries(history) if of_iteration(e.iteration_id, iteration_id)]
    return round(sum(e.cost_usd for e in mine), 6), (mine[0].cost_basis if mine else "")


FREE_BACKENDS = ("ruff-fix", "none")
"""Backends that never spend money: a run of theirs cut short costs nothing."""


@dataclass(frozen=True)
class Held:
    """An agent run's reservation that no ledger line accounts for yet."""

    usd: float = 0.0
    iteration_id: str = ""
    backend: str = ""
    wire: bool = False
    """The run's model went through the kernel's gateway, which wrote each answer's usage to the
    ledger as it ended: held is only the rest of the reservation, and a killed run is settled at
    what its request lines count (the gateway died with the daemon: nothing more went out)."""


def unsettled(history: Path, journal: Mapping[str, Any] | None) -> Held | None:
    """The run running.json names, if it started and the ledger has not counted it: the run
    under way, or one a killed daemon left (the next start settles it at its reservation, or
    at its request lines when the gateway counted them)."""
    if not journal:
        return None
    iteration_id = str(journal.get("iteration_id", ""))
    if not iteration_id or not stage_at_least(dict(journal), "agent") or journal.get("accounted"):
        return None
    before = journal.get("ledger_runs", 0)
    if runs_of(history, iteration_id) > (before if isinstance(before, int) else 0):
        return None  # accounted after all (killed between the ledger line and the journal)
    backend = str(journal.get("backend", ""))
    amount = journal.get("reserve_usd") or 0.0
    free = backend in FREE_BACKENDS or not isinstance(amount, int | float)
    held = 0.0 if free else round(float(amount), 6)
    if journal.get("wire") is True:
        held = max(round(held - _requests_since_the_last_run(history, iteration_id), 6), 0.0)
        return Held(held, iteration_id, backend, wire=True)
    return Held(held, iteration_id, backend)


def held_now(history: Path, journal: Mapping[str, Any] | None) -> Held:
    """What the runs under way hold: the iteration's own run, or the sum of its candidates'."""
    runs = [journal, *dict(journal.get("candidates") or {}).values()] if journal else []
    found = [h for r in runs if (h := unsettled(history, cast(Mapping[str, Any], r)))]
    if not found:
        return Held()
    return Held(round(sum(h.usd for h in found), 6), found[0].iteration_id, found[0].backend)


def _requests_since_the_last_run(history: Path, iteration_id: str) -> float:
    """Dollars of this iteration's request lines after its latest run's line: the run under way."""
    counted = 0.0
    for entry in entries(history):
        if entry.iteration_id != iteration_id:
            continue
        if not entry.request:
            break
        counted += entry.cost_usd
    return counted


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
            runs += not entry.request
        elif entry_day < day:
            older += 1
            if older > 50:  # appended in time order: well past the day, stop reading
                break
    return Spend(round(cost, 6), tokens, runs)


@dataclass(frozen=True)
class Spent:
    """What one UTC day has used so far, as every reader of the spend sees it."""

    day: str
    cost_usd: float
    iterations: int
    """Iterations recorded, WAITING aside (what max_iterations_per_day counts)."""

    def cost_left(self, budget: BudgetConfig) -> float:
        """Dollars left of the day's cap (0 when spent or no cap)."""
        return max(budget.max_cost_usd_per_day - self.cost_usd, 0.0)


def spent_on(store: RecordStore, day: str | None = None) -> Spent:
    """A UTC day's spend (default today): the ledger's, or the records' if they show more.

    The ledger also counts runs whose iteration never got a record (the daemon died after
    the agent ran); records count spend from before the ledger existed.
    """
    day = day or today()
    from_records, iterations = store.day_totals(day)
    cost = max(day_spend(store.history, day).cost_usd, from_records)
    return Spent(day, cost, iterations)


def today() -> str:
    """Today's UTC date as YYYY-MM-DD."""
    return datetime.now(UTC).date().isoformat()


def find_price(prices: Mapping[str, ModelPrice], *models: str) -> ModelPrice | None:
    """The price of the first model found in the table ("openai/x" also matches "x"), else "*"."""
    for model in models:
        if not model:
            continue
        for key in (model, model.rsplit("/", 1)[-1]):
            if key in prices:
                return prices[key]
    return prices.get("*")


def tokens_cost(report: AgentReport, price: ModelPrice) -> float:
    """USD for the run's tokens; tokens the tool did not split are charged at the dearer rate."""
    inputs = report.input_tokens
    cached = min(report.cached_tokens, inputs)
    outputs = report.output_tokens
    unsplit = max(report.tokens_used - inputs - outputs, 0)
    cached_rate = price.cached_input if price.cached_input is not None else price.input
    usd = (
        (inputs - cached) * price.input
        + cached * cached_rate
        + outputs * price.output
        + unsplit * max(price.input, price.output)
    ) / 1_000_000
    return round(usd, 6)


def price_run(
    report: AgentReport, prices: Mapping[str, ModelPrice], configured_model: str
) -> tuple[AgentReport, str]:
    """The report with its cost filled in when the tool gave none, and where the cost comes from."""
    if report.cost_usd > 0:
        return report, REPORTED
    if report.tokens_used <= 0 and report.input_tokens + report.output_tokens <= 0:
        return report, NONE
    price = find_price(prices, report.model, configured_model)
    if price is None:
        return report, NONE
    return report.model_copy(update={"cost_usd": tokens_cost(report, price)}), PRICES


def reservation(budget: BudgetConfig, plan_cap_usd: float) -> float:
    """The most one agent run may cost: its per-iteration cap, or the day's cap if smaller."""
    caps = [c for c in (plan_cap_usd, budget.max_cost_usd_per_day) if c > 0]
    return min(caps) if caps else 0.0


def budget_problem(
    store: RecordStore,
    budget: BudgetConfig,
    now: datetime | None = None,
    reserve_usd: float = 0.0,
) -> str:
    """Why no agent may start now for budget reasons ('' when it may).

    The spend is spent_on()'s, what `status`, the index and the metrics show. A run may start only if that plus the most it may cost (reserve_usd, see
    reservation()) stays within the day's cap: the cap holds before the money is spent.
    """
    used = spent_on(store, (now or datetime.now(UTC)).astimezone(UTC).date().isoformat())
    day, spent, iterations = used.day, used.cost_usd, used.iterations
    cap = budget.max_cost_usd_per_day
    if cap and spent >= cap:
        return f"spent ${spent:.2f} of ${cap:.2f} allowed on {day} (UTC)"
    if budget.max_iterations_per_day and iterations >= budget.max_iterations_per_day:
        return (
            f"ran {iterations} of {budget.max_iterations_per_day} iterations allowed on {day} (UTC)"
        )
    if cap and spent + reserve_usd > cap:
        return (
            f"a run may cost up to ${reserve_usd:.2f} and only ${cap - spent:.2f} "
            f"of ${cap:.2f} is left on {day} (UTC)"
        )
    return ""
