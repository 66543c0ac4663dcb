"""Size bounds on what the kernel reads back from history/ and its state (README: Bounds).

Each bound is well above anything the kernel writes (the writers cut their own lines to fit),
so only damage or a hostile hand meets it; what goes over is set aside with a reason, never
loaded into memory whole.
"""

from __future__ import annotations

KIB = 1024
MIB = 1024 * KIB

RECORD_LINE_MAX = 16 * MIB
"""One line of history/records.jsonl (one iteration's record, plan included)."""
EVENT_LINE_MAX = 1 * MIB
"""One line of history/events.jsonl (a halt, resume, recovery or repair)."""
LEDGER_LINE_MAX = 64 * KIB
"""One line of history/ledger.jsonl (what one agent run spent)."""
STATUS_FILE_MAX = 4 * MIB
"""history/status.json (the live phase and the head of the latest ranking)."""
HALT_FILE_MAX = 64 * KIB
"""history/halt.json (the persisted halt and its reason)."""
HALT_REASON_MAX = 8000
"""Characters of a halt's reason written to history/halt.json (the rest is cut, and said)."""
SEQUENCE_FILE_MAX = 64
"""The high-water mark of iteration numbers in the kernel's state (<git-common-dir>/seed/)."""
SEQUENCE_DIGITS_MAX = 18
"""Digits of an iteration number (iter-NNNN-...): more is not one the kernel gave out."""
SALVAGE_WORK = 16
"""Salvaging whole objects out of one damaged line reads at most this many times its length
(plus SALVAGE_SLACK bytes) before the rest of the line is set aside unread."""
SALVAGE_SLACK = 1 * MIB
SALVAGE_TRIES = 100_000
"""Object starts tried in one damaged line, at most."""
