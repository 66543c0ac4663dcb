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
from collections.abc import Collection, Mapping, Sequence
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
    """history/limit.json: the daemon starts no agent until `until` (with `[daemon]
    limit_scope = "backend"`, no agent of `backend`, from its own entry in `backends`)."""

    until: str
    reason: str
    iteration_id: str = ""
    at: str = ""
    backend: str = ""
    """The backend whose run met the limit ('' in a file written before it was kept)."""

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


def _later(before: Pause | None, state: Pause) -> Pause:
    """The pause that ends later (a later reset than one already written wins)."""
    known = before.moment() if before is not None else None
    moment = state.moment()
    return before if before is not None and known and moment and known > moment else state


def pause(
    history: Path, until: datetime, reason: str, iteration_id: str, backend: str = ""
) -> Pause:
    """Write the pause: the whole one, and the backend's own in `backends` (in each, a later
    reset than one already written wins)."""
    state = Pause(
        until.astimezone(UTC).isoformat(),
        printable(reason, 500),
        iteration_id,
        datetime.now(UTC).isoformat(),
        backend,
    )
    whole = _later(read(history), state)
    each = {**_backends(history)}
    each[backend] = _later(each.get(backend), state)
    doc = {**asdict(whole), "backends": {name: asdict(p) for name, p in each.items()}}
    atomic_write_text(history / LIMIT_FILE, json.dumps(doc, indent=2) + "\n")
    return whole


_FIELDS = ("until", "reason", "iteration_id", "at", "backend")


def _document(history: Path) -> Mapping[str, Any] | None:
    path = history / LIMIT_FILE
    try:
        with path.open("rb") as handle:
            raw = handle.read(HALT_FILE_MAX + 1)
        doc = json.loads(raw.decode("utf-8")) if len(raw) <= HALT_FILE_MAX else None
    except (OSError, ValueError, RecursionError):
        return None
    return cast(Mapping[str, Any], doc) if isinstance(doc, dict) else None


def _pause_of(fields: Any) -> Pause | None:
    if not isinstance(fields, dict):
        return None
    fields = cast(Mapping[str, Any], fields)
    return Pause(*(str(fields.get(n, "")) for n in _FIELDS))


def read(history: Path) -> Pause | None:
    """The pause written, or None (none, or a file that cannot be read: it pauses nothing)."""
    return _pause_of(_document(history))


def _backends(history: Path) -> dict[str, Pause]:
    """Each backend's own pause, as written."""
    doc = _document(history)
    each = doc.get("backends") if doc is not None else None
    if not isinstance(each, dict):
        return {}
    found = {str(k): _pause_of(v) for k, v in cast(Mapping[str, Any], each).items()}
    return {k: p for k, p in found.items() if p is not None}


def _in_force(found: Pause | None, now: datetime) -> Pause | None:
    """The pause if it holds now: before its time, and never past a day from when written."""
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


def waiting(history: Path, now: datetime) -> Pause | None:
    """The pause in force now (None once its time has come, or with none), never past a day
    from when it was written."""
    return _in_force(read(history), now)


def paused_backends(history: Path, now: datetime) -> dict[str, Pause]:
    """The backends whose own pause holds now (a file of no backends: none)."""
    each = {k: _in_force(p, now) for k, p in _backends(history).items() if k}
    return {k: p for k, p in each.items() if p is not None}


def holding(history: Path, now: datetime, scope: str, backends: Collection[str]) -> Pause | None:
    """The pause that holds every agent now: with scope "all", the whole one; with
    "backend", the one that ends first once every backend the daemon could send is paused
    (None while one is free: it runs meanwhile). A pause that names no backend holds all."""
    whole = waiting(history, now)
    if whole is None or scope == "all" or not whole.backend:
        return whole
    each = paused_backends(history, now)
    if not backends or any(b not in each for b in backends):
        return None
    return min((each[b] for b in backends), key=lambda p: p.moment() or now)


def clear(history: Path) -> None:
    """The pause is over: its file goes."""
    (history / LIMIT_FILE).unlink(missing_ok=True)


def shown(
    history: Path, now: datetime, scope: str, backends: Collection[str]
) -> tuple[Pause | None, str]:
    """The pause to show, and the backends it holds while the others run ('' when it holds
    every agent, or none)."""
    whole = waiting(history, now)
    held = holding(history, now, scope, backends)
    if whole is None or held is not None:
        return held, ""
    return whole, ", ".join(sorted(paused_backends(history, now)))
