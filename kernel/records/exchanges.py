"""history/<id>/model.jsonl: every exchange with the model, one line each, sealed.

A line holds the sequence number, the API, method and path (query values redacted but for
an allow-list: Gemini can carry its key as `?key=`), the request's headers (values kept
only for an allow-list of harmless ones: a header this file does not know may hold a key),
when it started and how long it took, the status, the usage read from the wire, and both
bodies: inline when small UTF-8, else stored once under history/<id>/bodies/ named by their
sha256 (the line names the hash, so the seal covers them too). What one run writes is bounded
(`limit`, RUN_RECORDED_MAX for the gateway's): a body past it is left out, its line naming its
hash and size (`cut`), and a line past it is not written but counted (`over` says why).

The seal is a sidecar, model.jsonl.seal, one HMAC (isolation/seal.py, the kernel's key) per
line, each over the line and the seal before it (the first over the iteration's id): a
line edited, taken out, added or moved, or a recording moved to another iteration, breaks
the chain at the first line that differs, and `read` refuses the recording naming it. A
sidecar keeps model.jsonl itself plain JSON lines for anything that reads it.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import parse_qsl, quote

from pydantic import BaseModel, ConfigDict, ValidationError

from kernel.bounds import (
    LINE_MAX_CHARS,
    MIB,
    MODEL_BODY_INLINE,
    MODEL_BODY_MAX,
    MODEL_LINE_MAX,
    MODEL_LINES_MAX,
    printable,
)
from kernel.fsutil import append_line, atomic_write_bytes
from kernel.isolation import readback, seal
from kernel.records import jsonl
from kernel.records.wire import Usage

MODEL_FILE = "model.jsonl"
SEAL_FILE = "model.jsonl.seal"
BODIES = "bodies"
REDACTED = "[redacted]"
_SHOWN_HEADERS = frozenset(
    {
        "accept",
        "accept-encoding",
        "anthropic-beta",
        "anthropic-version",
        "cache-control",
        "content-encoding",
        "content-length",
        "content-type",
        "openai-beta",
        "user-agent",
        "x-goog-api-client",
    }
)
_SHOWN_PREFIXES = ("x-stainless-",)
"""Headers whose values are kept: the SDKs' own descriptions of themselves. Any other
header's value is redacted (authorization, x-api-key, x-goog-api-key, cookies, and any a
CLI or proxy invents next)."""
_SHOWN_QUERY = frozenset({"alt", "api-version", "beta"})
_HEADERS_MAX = 100
_HEADER_MAX = 500
_SHA = re.compile(r"[0-9a-f]{64}")
_SEAL_LINE_MAX = 128


class RecordingRefused(Exception):
    """A recording this kernel did not write as it stands (line 0: a body it names)."""

    def __init__(self, line: int, reason: str) -> None:
        super().__init__(f"model.jsonl line {line}: {reason}" if line else reason)
        self.line = line
        self.reason = reason


@dataclass(frozen=True)
class Exchanged:
    """What the gateway saw of one exchange, handed to the recording when it ends."""

    seq: int
    api: str
    method: str
    path: str
    headers: Mapping[str, str] | Sequence[tuple[str, str]]
    """As a mapping, or as the gateway's Exchange holds them (pairs)."""
    request: bytes
    answer: bytes
    status: int
    started: float
    """Unix time the request came in."""
    seconds: float
    usage: Usage = field(default_factory=Usage)
    answer_headers: Mapping[str, str] | Sequence[tuple[str, str]] = ()
    """The upstream's answer headers (content type and encoding: a replay answers alike)."""
    cost_usd: float = 0.0
    note: str = ""
    """Why the kernel refused the request or cut its answer ('' when it did neither)."""


class Body(BaseModel):
    """A body: its text inline, or the sha256 it is stored under; its size; bytes cut off."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    text: str | None = None
    sha256: str = ""
    size: int = 0
    cut: int = 0
    """Bytes past MODEL_BODY_MAX left out (a recording with a cut body does not replay whole)."""


class ExchangeLine(BaseModel):
    """One line of model.jsonl."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    seq: int
    api: str
    method: str
    path: str
    started: datetime
    seconds: float
    status: int
    usage: Usage
    cost_usd: float = 0.0
    note: str = ""
    headers: dict[str, str]
    answer_headers: dict[str, str] = {}
    request: Body
    answer: Body


def sha256(data: bytes) -> str:
    """The hex sha256 a body is stored under."""
    return hashlib.sha256(data).hexdigest()


def redact_headers(headers: Mapping[str, str] | Sequence[tuple[str, str]]) -> dict[str, str]:
    """Header names lowercased; values kept only for the allow-list (bounded, printable)."""
    shown: dict[str, str] = {}
    pairs = list(headers.items()) if isinstance(headers, Mapping) else list(headers)
    for name, value in pairs[:_HEADERS_MAX]:
        key = printable(name.lower(), _HEADER_MAX)
        keep = key in _SHOWN_HEADERS or key.startswith(_SHOWN_PREFIXES)
        shown[key] = printable(value, _HEADER_MAX) if keep else REDACTED
    return shown


def redact_path(path: str) -> str:
    """The path with every query value redacted but the allow-list's."""
    base, _, query = path.partition("?")
    if not query:
        return printable(base, LINE_MAX_CHARS)
    pairs = [
        f"{quote(k, safe='')}={quote(v, safe='') if k in _SHOWN_QUERY else REDACTED}"
        for k, v in parse_qsl(query, keep_blank_values=True)
    ]
    return printable(f"{base}?{'&'.join(pairs)}", LINE_MAX_CHARS)


class Recording:
    """The writer of one iteration's model.jsonl (thread-safe: answers end in any order)."""

    def __init__(self, folder: Path, state: Path, limit: int = 0) -> None:
        """`limit`: the bytes this writer may add under `folder` (0: no bound)."""
        self._folder = folder
        self._state = state
        self._lock = threading.Lock()
        self._last = _last_seal(folder)
        self._limit = limit
        self._written = 0
        self.over = ""
        """Why something was left out past the bound ('' while nothing was)."""
        self.unwritten = 0
        """Lines not written past the bound."""

    def fits(self, size: int) -> bool:
        """Whether `size` more bytes fit in the bound."""
        with self._lock:
            return not self._limit or self._written + size <= self._limit

    def full(self, size: int = 0) -> str:
        """The bound's reason, as the run's."""
        return (
            f"the run's model recording reached its bound of {self._limit // MIB} MiB under "
            f"history/{self._folder.name}/"
            + (f" (a body of {size:,} bytes left out)" if size else "")
        )

    def _take(self, size: int) -> bool:
        with self._lock:
            if self._limit and self._written + size > self._limit:
                return False
            self._written += size
            return True

    def append(self, exchange: Exchanged) -> ExchangeLine:
        """Record one exchange (its big bodies stored first, within the bound) and seal its
        line (past the bound: counted in `unwritten`, not written)."""
        line = ExchangeLine(
            seq=exchange.seq,
            api=printable(exchange.api, 40),
            method=printable(exchange.method, 20),
            path=redact_path(exchange.path),
            started=datetime.fromtimestamp(exchange.started, UTC),
            seconds=round(exchange.seconds, 6),
            status=exchange.status,
            usage=exchange.usage,
            cost_usd=exchange.cost_usd,
            note=printable(exchange.note),
            headers=redact_headers(exchange.headers),
            answer_headers=redact_headers(exchange.answer_headers),
            request=self._body(exchange.request),
            answer=self._body(exchange.answer),
        )
        data = line.model_dump_json().encode()
        if not self._take(len(data) + _SEAL_LINE_MAX):
            self.over, self.unwritten = self.over or self.full(), self.unwritten + 1
            return line
        with self._lock:
            mac = seal.seal(self._state, _chained(self._last, data))
            append_line(self._folder / MODEL_FILE, data.decode())
            append_line(self._folder / SEAL_FILE, mac)
            self._last = mac
        return line

    def _body(self, data: bytes) -> Body:
        cut = max(len(data) - MODEL_BODY_MAX, 0)
        data = data[:MODEL_BODY_MAX]
        if len(data) <= MODEL_BODY_INLINE:
            try:
                return Body(text=data.decode("utf-8"), size=len(data), cut=cut)
            except UnicodeDecodeError:
                pass
        digest = sha256(data)
        path = self._folder / BODIES / digest
        if not path.is_file():
            if not self._take(len(data)):  # named, not kept: the run's bound is reached
                self.over = self.over or self.full(len(data))
                return Body(sha256=digest, size=0, cut=cut + len(data))
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(path, data)
        return Body(sha256=digest, size=len(data), cut=cut)


def _chained(last: str, data: bytes) -> bytes:
    return last.encode() + b"\n" + data


def _last_seal(folder: Path) -> str:
    """The seal the next line chains to: the sidecar's last, else the iteration's id."""
    path = folder / SEAL_FILE
    if path.is_file():
        for line in jsonl.lines_backwards(path, _SEAL_LINE_MAX):
            if line.data and line.data.strip():
                return line.data.strip().decode("ascii", "replace")
    return folder.name


def _seals(folder: Path) -> list[bytes]:
    """The sidecar's seals as written (bytes: a damaged one compares unequal, never raises)."""
    path = folder / SEAL_FILE
    if not path.is_file():
        return []
    found: list[bytes] = []
    for line in jsonl.lines(path, _SEAL_LINE_MAX):
        if len(found) > MODEL_LINES_MAX:
            break
        found.append((line.data or b"").strip())
    return found


def read(folder: Path, state: Path) -> list[ExchangeLine]:
    """Every exchange of a recording this kernel sealed, in order; RecordingRefused names the
    first line that differs from its seal (edited, missing, added, over the bounds)."""
    seals = _seals(folder)
    path = folder / MODEL_FILE
    if not path.is_file():
        if seals:
            raise RecordingRefused(1, "sealed but missing")
        return []
    last = folder.name
    read_back: list[ExchangeLine] = []
    for number, line in enumerate(jsonl.lines(path, MODEL_LINE_MAX), 1):
        if number > MODEL_LINES_MAX:
            raise RecordingRefused(number, f"more than {MODEL_LINES_MAX:,} exchanges")
        if line.data is None:
            raise RecordingRefused(number, f"{line.size:,} bytes, over {MODEL_LINE_MAX:,}")
        if number > len(seals):
            raise RecordingRefused(number, "not sealed")
        data = line.data.removesuffix(b"\n")
        expected = seal.seal(state, _chained(last, data))
        if not line.ended or not hmac.compare_digest(expected.encode(), seals[number - 1]):
            raise RecordingRefused(number, "differs from its seal")
        last = expected
        try:
            read_back.append(ExchangeLine.model_validate_json(data))
        except (ValidationError, ValueError):
            raise RecordingRefused(number, "sealed, but no exchange this kernel reads") from None
    if len(seals) > len(read_back):
        raise RecordingRefused(len(read_back) + 1, "sealed but missing")
    return read_back


def body(folder: Path, ref: Body) -> bytes:
    """A body's bytes; a stored one is refused unless it has the hash its sealed line names."""
    if ref.text is not None:
        return ref.text.encode("utf-8")
    if not _SHA.fullmatch(ref.sha256):
        raise RecordingRefused(0, f"a body named {ref.sha256[:80]!r}")
    got = readback.read(Path(BODIES) / ref.sha256, MODEL_BODY_MAX, within=folder)
    if not got.ok or got.truncated or sha256(got.data) != ref.sha256:
        why = got.problem or "its hash differs"
        raise RecordingRefused(0, f"body {ref.sha256[:12]} of {folder.name}: {why}")
    return got.data
