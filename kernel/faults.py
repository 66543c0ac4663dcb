"""Deterministic crash tests: `SEED_FAULT_AT=<point>` makes the kernel SIGKILL itself there.

Nothing is cleaned up and no handler runs, exactly as with `kill -9` from outside; a
restarted daemon must recover from whatever is left. Unset (the normal case) every call
here is a dictionary lookup.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

ENV = "SEED_FAULT_AT"

POINTS: dict[str, str] = {
    "prepare": "the iteration's worktree exists, nothing is measured yet",
    "analysis": "the baseline is measured and ranked, no plan yet",
    "plan": "the plan is accepted and journalled, the agent has not started",
    "agent-run": "the agent's process group is running (and outlives the daemon)",
    "inspect": "the agent is done; its diff is staged, the guard has not looked",
    "verification": "the guard passed; the changed tree is about to be measured",
    "commit": "the change is committed on seed/<iteration>, the user's branch untouched",
    "fast-forward": "the user's branch was fast-forwarded; no record written yet",
    "record-write": "half of the record's line is in records.jsonl (a torn line)",
    "record-written": "the record is written; report, inbox fate and halts are not",
    "notice-queued": "a notification is queued in history/notifications.jsonl, none sent",
    "cleanup": "everything is recorded; the worktree and branch are still there",
}
"""Every named point, in the order an iteration passes them."""


def armed(point: str) -> bool:
    """Whether the kernel is asked to die at this point."""
    if point not in POINTS:
        raise ValueError(f"unknown fault point {point!r}")
    return os.environ.get(ENV, "") == point


def die() -> None:
    """SIGKILL this process: no cleanup, no finally, no atexit."""
    os.kill(os.getpid(), signal.SIGKILL)


def fault(point: str) -> None:
    """Die here if SEED_FAULT_AT names this point."""
    if armed(point):
        die()


def torn_append(path: Path, line: str) -> None:
    """At the record-write point: append half of the line (no newline), fsync, and die."""
    if not armed("record-write"):
        return
    data = line.encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data[: max(len(data) // 2, 1)])
        os.fsync(fd)
    finally:
        os.close(fd)
    die()
