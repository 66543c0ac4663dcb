"""Usage limits: read from the upstream's answer, and the pause they put the daemon in.

Only what the model's upstream answered decides (its status, its headers, its error body),
never anything the agent wrote: a 429 with a reset the headers name (`retry-after`, in seconds
or as an HTTP date; Anthropic's `anthropic-ratelimit-*-reset`; OpenAI's `x-ratelimit-reset-*`),
or a 429 whose body is Anthropic's, OpenAI's or Gemini's own limit error. An unknown error is
not a limit. The pause is history/limit.json, written by the kernel, so it outlasts a restart;
it lasts until the reset read (at most LIMIT_WAIT_MAX_S), or `[daemon] limit_backoff_s` when
the answer named none.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any, cast

from kernel.bounds import HALT_FILE_MAX, printable
from kernel.fsutil import atomic_write_text

LIMIT_FILE = "limit.json"
LIMIT_WAIT_MAX_S = 24 * 3600.0
"""The longest one limit pauses the daemon, whatever its answer said."""
LIMIT_STATUS = 429
_BODY_KINDS = frozenset(
    {
        "rate_limit_error",  # Anthropic
        "rate_limit_exceeded",  # OpenAI
        "insufficient_quota",
        "usage_limit_reached",  # OpenAI's ChatGPT backend (Codex on a login)
        "resource_exhausted",  # Gemini
    }
)
"""The limit errors of the vendors' own bodies (their `type`, `code` or `status`)."""
_DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)(ms|h|m|s))")
"""OpenAI's reset durations: 1s, 6m0s, 20ms, 1h2m3.5s."""
_READ_MAX = 64 * 1024
"""Bytes of an error body read for its kind."""


@dataclass(frozen=True)
class Limit:
    """A limit the upstream answered: why, and when it resets (None: it did not say)."""

    why: str
    until: datetime | None = None


def _seconds(value: str) -> float | None:
    """A duration: plain seconds, or OpenAI's 1h2m3.5s."""
    text = value.strip()
    try:
        return float(text)
    except ValueError:
        pass
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    return sum(float(n) * scale[u] for n, u in parts)


def _moment(value: str, now: datetime) -> datetime | None:
    """A reset: seconds from now (or epoch seconds), an RFC 3339 time, or an HTTP date."""
    seconds = _seconds(value)
    if seconds is not None:
        if seconds > 1e9:  # epoch seconds (anthropic-ratelimit-unified-reset)
            return datetime.fromtimestamp(seconds, UTC)
        return now + timedelta(seconds=max(seconds, 0.0))
    for parse in (datetime.fromisoformat, parsedate_to_datetime):
        try:
            moment = parse(value.strip())
        except (ValueError, TypeError, IndexError):
            continue
        return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return None


def reset_of(headers: Sequence[tuple[str, str]], now: datetime) -> datetime | None:
    """When the limit resets, from the answer's headers: `retry-after` first, else the latest
    of the exhausted rate limits' resets (every one when none says it is exhausted)."""
    named = {k.lower(): v for k, v in headers}
    if "retry-after" in named:
        found = _moment(named["retry-after"], now)
        if found is not None:
            return found
    resets: dict[str, datetime] = {}
    for name, value in named.items():
        if name.startswith("anthropic-ratelimit-") and name.endswith("-reset"):
            kind = name.removeprefix("anthropic-ratelimit-").removesuffix("-reset")
        elif name.startswith("x-ratelimit-reset-"):
            kind = name.removeprefix("x-ratelimit-reset-")
        else:
            continue
        moment = _moment(value, now)
        if moment is not None:
            resets[kind] = moment
    spent = [
        moment
        for kind, moment in resets.items()
        if named.get(f"anthropic-ratelimit-{kind}-remaining", "").strip() == "0"
        or named.get(f"x-ratelimit-remaining-{kind}", "").strip() == "0"
        or named.get(f"anthropic-ratelimit-{kind}-status", "").strip() == "rejected"
    ]
    chosen = spent or list(resets.values())
    return max(chosen) if chosen else None


def _body_kind(body: bytes) -> str:
    """The vendor's limit error kind its error body names ('' when it names none)."""
    try:
        doc = json.loads(body[:_READ_MAX])
    except (ValueError, RecursionError):
        return ""
    if isinstance(doc, list) and doc:  # Gemini answers a list of one error, streaming
        doc = cast(list[Any], doc)[0]
    if not isinstance(doc, dict):
        return ""
    error = cast(dict[str, Any], doc).get("error")
    if not isinstance(error, dict):
        return ""
    error = cast(dict[str, Any], error)
    for field in ("type", "code", "status"):
        value = error.get(field)
        if isinstance(value, str) and value.lower() in _BODY_KINDS:
            return value.lower()
    return ""


def of_answer(
    status: int, headers: Sequence[tuple[str, str]], body: bytes, now: datetime
) -> Limit | None:
    """The limit an upstream's answer reports, or None: a 429 with a reset in its headers or
    a vendor's limit error in its body. Nothing else is a limit."""
    if status != LIMIT_STATUS:
        return None
    until = reset_of(headers, now)
    kind = _body_kind(body)
    if until is None and not kind:
        return None
    said = f" ({kind})" if kind else ""
    return Limit(f"the model's upstream answered HTTP 429{said}", until)


@dataclass(frozen=True)
class Pause:
    """history/limit.json: the daemon starts no agent until `until`."""

    until: str
    reason: str
    iteration_id: str = ""
    at: str = ""

    def moment(self) -> datetime | None:
        """`until` as a time (None when it cannot be read)."""
        try:
            moment = datetime.fromisoformat(self.until)
        except ValueError:
            return None
        return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def bounded(limit: Limit, now: datetime, backoff_s: float) -> datetime:
    """When the pause ends: the reset read, else after the backoff; never past a day from now."""
    until = limit.until if limit.until is not None else now + timedelta(seconds=backoff_s)
    return min(max(until, now), now + timedelta(seconds=LIMIT_WAIT_MAX_S))


def pause(history: Path, until: datetime, reason: str, iteration_id: str) -> Pause:
    """Write the pause (a later reset than one already written wins)."""
    before = read(history)
    known = before.moment() if before is not None else None
    if known is not None and known > until:
        until = known
    state = Pause(
        until.astimezone(UTC).isoformat(),
        printable(reason, 500),
        iteration_id,
        datetime.now(UTC).isoformat(),
    )
    atomic_write_text(history / LIMIT_FILE, json.dumps(asdict(state), indent=2) + "\n")
    return state


def read(history: Path) -> Pause | None:
    """The pause written, or None (none, or a file that cannot be read: it pauses nothing)."""
    path = history / LIMIT_FILE
    try:
        with path.open("rb") as handle:
            raw = handle.read(HALT_FILE_MAX + 1)
        doc = json.loads(raw.decode("utf-8")) if len(raw) <= HALT_FILE_MAX else None
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(doc, dict):
        return None
    fields = cast(Mapping[str, Any], doc)
    return Pause(*(str(fields.get(n, "")) for n in ("until", "reason", "iteration_id", "at")))


def waiting(history: Path, now: datetime) -> Pause | None:
    """The pause in force now (None once its time has come, or with none), never past a day
    from when it was written."""
    found = read(history)
    moment = found.moment() if found is not None else None
    if found is None or moment is None or moment <= now:
        return None
    try:
        written = datetime.fromisoformat(found.at)
    except ValueError:
        written = now
    written = written if written.tzinfo else written.replace(tzinfo=UTC)
    if moment > written + timedelta(seconds=LIMIT_WAIT_MAX_S):
        return None  # a file no kernel wrote as it is: a day at most
    return found


def clear(history: Path) -> None:
    """The pause is over: its file goes."""
    (history / LIMIT_FILE).unlink(missing_ok=True)
