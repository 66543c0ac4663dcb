"""Bounds, in one place (docs/bounds.md): on what people and agents hand the kernel, on
what it reads back from history/ and its state, and on the lines it writes down.

Every input gets a limit where it enters; what is past it is set aside or left out, and
the count of what was left out is said, never loaded into memory whole. The bounds on
history/ are well above anything the kernel writes (the writers cut their own lines to fit),
so only damage or a hostile hand meets them. Evidence and report lines are capped here too,
so one runaway list (100,000 new tags) cannot become one huge line.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

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
NOTICE_LINE_MAX = 64 * KIB
"""One line of history/notifications.jsonl (a notification queued, or one send of it)."""
NOTICE_SCAN_LINES = 4096
"""Latest lines of history/notifications.jsonl a starting daemon reads for what is unsent."""
NOTICE_MESSAGE_MAX = 1000
"""Characters of one notification's message (each quoted piece is capped shorter)."""
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
MODEL_LINE_MAX = 1 * MIB
"""One line of history/<id>/model.jsonl (one model exchange; big bodies are kept by hash)."""
MODEL_LINES_MAX = 100_000
"""Exchanges read from one model.jsonl."""
MODEL_BODY_INLINE = 16 * KIB
"""A request or answer body up to this size is kept in its model.jsonl line; a bigger one
(or one that is not UTF-8) once under history/<id>/bodies/, named by its sha256."""
MODEL_BODY_MAX = 64 * MIB
"""Bytes of one body kept; the rest is cut (and said in its line)."""
MODEL_TURNS_KEPT = 500
"""Model requests of one iteration summed up in its record's per-turn table (the rest are
counted in its wire totals and read from model.jsonl)."""
WIRE_EVENT_MAX = 8 * MIB
"""One server-sent event, or a whole JSON answer, read for its usage (a bigger one is skipped)."""
WIRE_DECODED_MAX = 256 * MIB
"""Bytes of one compressed answer undone for its usage (a bomb stops there, usage unknown)."""

# -- what people and agents hand the kernel, and the lines it writes down --

INBOX_MAX_BYTES = 256 * 1024
"""Largest inbox task file."""
INBOX_NAME_MAX_BYTES = 200
"""Longest inbox file name (UTF-8 bytes): room for `.N` and `.reason.txt` within the
255 bytes a file name may have."""
INBOX_MAX_QUEUED = 500
"""Most inbox tasks read at one look (oldest first); the rest wait for a later look."""
INBOX_MAX_QUEUED_BYTES = 32 * 1024 * 1024
"""Most bytes of inbox tasks read at one look."""
FRONT_MATTER_MAX_BYTES = 16 * 1024
"""Largest front matter block of an inbox task."""
FRONT_LIST_MAX = 50
"""Most entries of one front matter list (acceptance, allowed, forbidden)."""
FRONT_STRING_MAX = 1000
"""Longest front matter string (characters)."""
ROADMAP_MAX_BYTES = 1024 * 1024
"""ROADMAP.md bytes read; the rest is left out (and counted)."""
ROADMAP_MAX_ITEMS = 1000
"""Unchecked ROADMAP.md items taken; the rest are left out (and counted)."""
CONFIG_MAX_BYTES = 1024 * 1024
"""Largest seed.toml."""
REMOTE_PATCH_MAX = 256 * MIB
"""Largest patch a Ray worker sends back (a file over it is named, never sent or read)."""
GATEWAY_REQUEST_MAX = 64 * MIB
"""Largest request body through the model gateway: a bigger one is refused before it is read."""
GATEWAY_CONNECTIONS_MAX = 8
"""Connections one run's gateway serves at once (the number open, never a total): another
waits for one to close. Held by the gateway itself, kernel side: the sandbox cannot lift it."""
GATEWAY_HELD_MAX = 128 * MIB
"""Request bytes one run's gateway holds in the daemon's memory at once (read in pieces, never
by what a client says it will send); past it the run ends RUN_LIMIT."""
RUN_RECORDED_MAX = 512 * MIB
"""Bytes one run writes under history/<id>/ in its model recording (lines, seals and bodies,
failed and refused requests included); past it the run ends RUN_LIMIT."""
OUTPUT_CEILING = 65_536
"""Output tokens reserved for a model request that names no ceiling of its own."""
REQUEST_STRINGS_MAX = 250_000
REQUEST_CONTAINERS_MAX = 100_000
"""Strings, and JSON objects and arrays, of one request body read for what it may cost (the
parse stays small: longer strings are read as empty); past either, the request is refused."""
REPORTED_MAX = 10**12
"""The largest count or dollar figure a run's report or an answer's usage may say: a figure
over it, or not finite, is no figure (an adapter's report with one is AGENT_ERROR)."""
EVIDENCE_MAX_LINES = 50
"""Evidence and checkout-change lines kept in a record, its report and the daemon log."""
LINE_MAX_CHARS = 2000
"""Longest evidence, reason or report line."""

_UNSAFE = ("Cc", "Cs", "Zl", "Zp")
"""Unicode categories never shown raw: controls, lone surrogates (undecodable bytes), line breaks."""


def cap_line(text: str, width: int = LINE_MAX_CHARS) -> str:
    """One line of at most `width` characters, saying how many were left out."""
    if len(text) <= width:
        return text
    cut = max(width - 40, width // 2)
    return f"{text[:cut]}... ({len(text) - cut:,} more characters)"


def cap_lines(
    lines: Sequence[str], limit: int = EVIDENCE_MAX_LINES, width: int = LINE_MAX_CHARS
) -> list[str]:
    """At most `limit` lines, each capped, the last saying how many more there were."""
    if len(lines) <= limit:
        return [cap_line(line, width) for line in lines]
    kept = [cap_line(line, width) for line in lines[: max(limit - 1, 0)]]
    return [*kept, f"... and {len(lines) - len(kept):,} more"]


_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
"""The characters that reorder what a screen shows after them (marks, embeddings, overrides,
isolates): text that reads one way and is another."""
_UNSHOWN = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff{_BIDI}]")
"""What text from another hand never brings to a person's screen: every control character
but newline and tab (ESC, so every escape sequence; BEL; CR; the C1 controls), the Unicode
line breaks, lone surrogates (undecodable bytes) and the bidirectional controls."""


def _shown(found: re.Match[str]) -> str:
    code = ord(found.group())
    if found.group() in "\u2028\u2029":
        return "\n"
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8 (surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    if 0xD800 <= code <= 0xDFFF:
        return f"\\u{code:04x}"
    return f"<U+{code:04X}>" if code > 0x9F else ""


def clean(text: str) -> str:
    """Text another hand wrote (an agent, a tool, the tree, an old record) as a person is
    shown it, cleaned once: control characters but newline and tab removed (what is left of an
    escape sequence is inert text), bidirectional controls shown as <U+202E>, undecodable
    bytes as \\xNN. The one cleaning: the terminal's sink, the module answers the kernel
    shows, the commit message and `printable` all use it."""
    return _UNSHOWN.sub(_shown, text)


def json_shown(text: str) -> str:
    """JSON text whose strings hold what `clean` would change, those characters escaped as
    JSON escapes them (\\u001b): the same JSON, inert on a terminal."""
    return _UNSHOWN.sub(lambda found: f"\\u{ord(found.group()):04x}", text)


def printable(text: str, width: int = LINE_MAX_CHARS) -> str:
    """`clean` on one line, capped: controls, line breaks and undecodable bytes escaped
    (\\n, \\x1b, \\xff) rather than removed, so a name reads as it is."""
    try:
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raw = text.encode("utf-8", "backslashreplace")
    shown = raw.decode("utf-8", "backslashreplace")
    safe = "".join(
        c.encode("unicode_escape").decode("ascii") if unicodedata.category(c) in _UNSAFE else c
        for c in shown
    )
    return cap_line(clean(safe), width)


def unsafe_char(text: str) -> bool:
    """Whether text holds a control character, a line break or an undecodable byte."""
    return any(unicodedata.category(c) in _UNSAFE for c in text)


RECENT_RECORDS = 50
"""Latest records read for every plan (halts and reports look at these)."""
PER_GAP_RECORDS = 5
"""Latest records of each gap in the report read for every plan (quarantine, the planner's streaks)."""
KEPT_INPUT_MAX = 4 * 1024 * 1024
"""Bytes (xz) of one iteration's planning inputs kept for `seed.py fitness`; a bigger one is
not kept (that case replays its gap alone)."""
CORPUS_MAX = 256 * 1024 * 1024
"""Bytes of a fitness corpus once decompressed (the shipped or the held-back one)."""
GENERATION_LINE_MAX = 256 * 1024
"""Bytes of one line of history/generations.jsonl the dashboard reads (a longer one is left out)."""
FITNESS_HISTORY_CASES = 64
"""The latest iterations of the project's history a fitness replay takes as cases (each is a
checkout and a plan, twice for every change to seed's modules: an overnight daemon's
thousand iterations would make each such change wait for hours)."""
FITNESS_REQUEST_S = 60.0
"""Seconds one request of a fitness replay may take (a plan takes well under one)."""
