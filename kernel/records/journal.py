"""The iteration under way, persisted: <git-common-dir>/seed/running.json.

Written when an attempt starts and updated at each step that leaves something behind
(the agent's process group, a commit, a fast-forward, the record), so a daemon restarted
after `kill -9` knows what the dead one was doing and can say what really happened.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from domain import IterationPlan
from kernel.fsutil import atomic_write_text

STAGES = (
    "planned",
    "agent",
    "checked",
    "inspecting",
    "verifying",
    "committed",
    "landing",
    "landed",
    "recorded",
)
"""Stages in order; recovery reads the last one written."""


class Journal:
    """running.json for one iteration; every write is atomic."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.data: dict[str, Any] = {}
        self.lock = threading.RLock()
        """Candidates run in threads of their own: one write of the whole file at a time."""

    def begin(
        self, plan: IterationPlan, plan_file: Path, base: str, worktree: Path, backend: str = ""
    ) -> None:
        """Journal a new attempt (the plan is written beside it for an ABORTED record)."""
        atomic_write_text(plan_file, plan.model_dump_json(indent=2))
        self.data = {
            "iteration_id": plan.iteration_id,
            "stage": "planned",
            "started_at": datetime.now(UTC).isoformat(),
            "daemon_pid": os.getpid(),
            "plan_file": str(plan_file),
            "base": base,
            "worktree": str(worktree),
            "gap": plan.gap.key,
            "backend": backend,
        }
        self._write()

    def update(self, **values: Any) -> None:
        """Add facts (and perhaps a new stage) to the journal."""
        with self.lock:
            if not self.data:
                return
            self.data.update(values)
            self._write()

    def candidate(self, iteration_id: str, backend: str, worktree: Path) -> CandidateJournal:
        """The journal of one candidate run of this iteration (its own stage, process group
        and reservation, under "candidates"), so recovery settles each one."""
        entry = {"iteration_id": iteration_id, "stage": "planned", "backend": backend}
        entry["worktree"] = str(worktree)
        with self.lock:
            self.data.setdefault("candidates", {})[iteration_id] = entry
            self._write()
        return CandidateJournal(self, iteration_id)

    def end(self) -> None:
        """The iteration is over and cleaned up."""
        self.data = {}
        self.path.unlink(missing_ok=True)

    def _write(self) -> None:
        atomic_write_text(self.path, json.dumps(self.data, indent=2) + "\n")


class CandidateJournal(Journal):
    """One candidate's entry in its iteration's running.json; written with the whole file."""

    def __init__(self, parent: Journal, iteration_id: str) -> None:
        super().__init__(parent.path)
        self.parent = parent
        self.lock = parent.lock
        self.data = parent.data["candidates"][iteration_id]

    def update(self, **values: Any) -> None:
        """Add facts to this candidate's entry."""
        with self.lock:
            self.data.update(values)
            self.parent.update()

    def end(self) -> None:
        """The candidate is over; the iteration's journal goes on."""


def entries_of(journal: dict[str, Any]) -> list[dict[str, Any]]:
    """The runs a journal names: the iteration's own, then each candidate's."""
    found = cast(dict[str, Any], journal.get("candidates") or {})
    runs = [cast(dict[str, Any], v) for v in found.values() if isinstance(v, dict)]
    return [journal, *runs]


def read_journal(path: Path) -> dict[str, Any] | None:
    """What a dead daemon left in running.json (None when nothing; {} when unreadable)."""
    if not path.exists():
        return None
    with contextlib.suppress(OSError, ValueError):
        data = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(data, dict):
            return cast(dict[str, Any], data)
    return {}


def stage_at_least(journal: dict[str, Any], stage: str) -> bool:
    """Whether the journal got as far as this stage."""
    current = str(journal.get("stage", ""))
    if current not in STAGES:
        return False
    return STAGES.index(current) >= STAGES.index(stage)
