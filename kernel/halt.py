"""The persisted halt state, budgets checked before every agent run, and the daemon lock."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, cast

from kernel import ledger
from kernel.config import BudgetConfig
from kernel.errors import LockHeld
from kernel.fsutil import atomic_write_text
from kernel.store import RecordStore

HALT_FILE = "halt.json"


@dataclass(frozen=True)
class HaltState:
    """Whether the daemon may run agents, and why not."""

    halted: bool = False
    reason: str = ""
    category: str = ""
    at: str = ""
    iteration_id: str = ""


def read_halt(history: Path) -> HaltState:
    """The halt state; an unreadable halt file counts as halted (it is kept for a person to see)."""
    path = history / HALT_FILE
    if not path.exists():
        return HaltState()
    try:
        data = cast(dict[str, Any], json.loads(path.read_text(encoding="utf-8")))
        return HaltState(
            halted=bool(data.get("halted", False)),
            reason=str(data.get("reason", "")),
            category=str(data.get("category", "")),
            at=str(data.get("at", "")),
            iteration_id=str(data.get("iteration_id", "")),
        )
    except (OSError, ValueError, AttributeError) as exc:
        return HaltState(
            halted=True, reason=f"{path} is unreadable ({exc}); run `seed.py resume` to clear it"
        )


def halt(store: RecordStore, reason: str, category: str = "", iteration_id: str = "") -> HaltState:
    """Persist a halt and record the event."""
    state = HaltState(True, reason, category, datetime.now(UTC).isoformat(), iteration_id)
    atomic_write_text(store.history / HALT_FILE, json.dumps(asdict(state), indent=2) + "\n")
    store.event("halt", reason, category=category, iteration_id=iteration_id)
    return state


def resume(store: RecordStore) -> HaltState:
    """Clear a halt and record the event; returns the state that was cleared."""
    before = read_halt(store.history)
    atomic_write_text(store.history / HALT_FILE, json.dumps(asdict(HaltState()), indent=2) + "\n")
    store.event(
        "resume", f"resumed (was: {before.reason or 'not halted'})", was_halted=before.halted
    )
    return before


def budget_problem(store: RecordStore, budget: BudgetConfig, now: datetime | None = None) -> str:
    """Why no agent may run now for budget reasons ('' when it may)."""
    day = (now or datetime.now(UTC)).astimezone(UTC).date().isoformat()
    spent, iterations = store.day_totals(day)
    spent = max(spent, ledger.day_spend(store.history, day).cost_usd)  # runs with no record yet
    if budget.max_cost_usd_per_day and spent >= budget.max_cost_usd_per_day:
        return f"spent ${spent:.2f} of ${budget.max_cost_usd_per_day:.2f} allowed on {day}"
    if budget.max_iterations_per_day and iterations >= budget.max_iterations_per_day:
        return f"ran {iterations} of {budget.max_iterations_per_day} iterations allowed on {day}"
    return ""


class DaemonLock:
    """One daemon per repository: an fcntl lock on <git-common-dir>/seed/daemon.lock."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._handle: IO[str] | None = None

    def acquire(self) -> None:
        """Take the lock or raise LockHeld naming the holder."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = self.path.open("a+", encoding="utf-8")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            handle.close()
            raise LockHeld(
                f"another seed daemon (pid {holder}) is running on this repository; lock: {self.path}"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        self._handle = handle

    def release(self) -> None:
        """Release the lock."""
        if self._handle is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._handle.fileno(), fcntl.LOCK_UN)
            self._handle.close()
            self._handle = None
