"""Usage read from the model's own answers, priced, and the iteration's caps held per request.

The gateway hands every request body and every piece of an answer here as it streams; the
numbers come from the upstream's answer (never from the agent), for four APIs: Anthropic
Messages (`message_start` and `message_delta` usage), OpenAI Responses (`response.completed`
usage), OpenAI chat completions (the usage of the last chunk, or of the JSON) and Gemini
(`usageMetadata`). A reader takes the answer in pieces cut anywhere and says the usage so
far; nothing an answer holds makes it raise: what it cannot read counts zero, and says so.

Before a request goes, `ask_of` reads from its bytes what it may cost (its reservation): the
prompt, counted as its size in bytes (no byte-level tokenizer makes more tokens of it), and the
output ceiling it names, or OUTPUT_CEILING when it names none. `charged` then says what an
answer counts: its own usage where the answer said its last word on it (these APIs always do),
else never less than the reservation (fail closed).
"""

from __future__ import annotations

import json
import math
import re
import threading
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, cast

from domain import AgentReport
from kernel.bounds import (
    OUTPUT_CEILING,
    REPORTED_MAX,
    REQUEST_CONTAINERS_MAX,
    REQUEST_STRINGS_MAX,
    WIRE_DECODED_MAX,
    WIRE_EVENT_MAX,
    printable,
)
from kernel.config import ModelPrice
from kernel.isolation.gateway import Refusal, error_body
from kernel.records import budget

ANTHROPIC = "anthropic"
RESPONSES = "openai-responses"
CHAT = "openai-chat"
GEMINI = "gemini"
APIS = (ANTHROPIC, RESPONSES, CHAT, GEMINI)
"""The APIs the gateway serves (its Exchange.api)."""
COUNT_MAX = REPORTED_MAX
"""A token count above this is no count (damage, or a hostile upstream)."""
_MODEL_MAX = 200
_CHARS_PER_TOKEN = 4
"""What a token of written text is taken to be, while a stream has not said its usage."""
_DEPTH_MAX = 32
_PIECE = 64 * 1024


@dataclass(frozen=True)
class Usage:
    """Tokens of one exchange: input includes cached (read from a cache), output includes
    reasoning; known is False while the answer has said none (all zero then)."""

    model: str = ""
    input: int = 0
    output: int = 0
    cached: int = 0
    known: bool = False

    @property
    def tokens(self) -> int:
        """Input and output."""
        return self.input + self.output


def usage_of(api: str, request: bytes, answer: bytes, path: str = "", encoding: str = "") -> Usage:
    """The usage of one whole answer (JSON or server-sent events, as sent)."""
    reader = UsageReader(api, request, path, encoding)
    reader.feed(answer)
    return reader.finish()


class UsageReader:
    """An answer read as it comes, in pieces cut at any byte: the usage so far."""

    def __init__(
        self, api: str, request: bytes = b"", path: str = "", encoding: str = "", model: str = ""
    ) -> None:
        self._api = api
        self._inflate, self._undecodable = _decoder(encoding)
        self._decoded = 0
        self._asked = model or _requested_model(request, path)
        self._counting = _counting(path)
        self.final = False
        """The answer said its last word on its usage (the API's closing usage, or a count)."""
        self._model = ""
        self._fields: dict[str, int] = {}
        self._written = 0
        self._mode = ""  # "json" or "sse", from the answer's first byte that is not space
        self._buffer = bytearray()
        self._scanned = 0
        self._data: list[bytes] = []
        self._data_size = 0
        self._skipping = False
        self.skipped = 0
        """Events (or a whole JSON answer) set aside unread: over the bound, or not JSON."""

    def feed(self, chunk: bytes) -> Usage:
        """Take the next piece of the answer (as sent: its Content-Encoding is undone here);
        the usage so far."""
        if self._undecodable:
            return self.usage
        if self._inflate is None:
            return self._plain(chunk)
        try:
            data = self._inflate.decompress(chunk, _PIECE)
            while data:
                self._decoded += len(data)
                if self._decoded > WIRE_DECODED_MAX:
                    raise zlib.error("over the bound")
                self._plain(data)
                data = self._inflate.decompress(self._inflate.unconsumed_tail, _PIECE)
        except zlib.error:
            self._undecodable = True
            self.skipped += 1
        return self.usage

    def _plain(self, chunk: bytes) -> Usage:
        if not self._mode:
            head = bytes(chunk).lstrip()
            if not head:
                return self.usage
            self._mode = "json" if head[:1] in (b"{", b"[") else "sse"
        if self._mode == "json":
            if len(self._buffer) + len(chunk) > WIRE_EVENT_MAX:
                self._skipping = True
            else:
                self._buffer += chunk
            return self.usage
        self._buffer += chunk
        self._lines()
        return self.usage

    def finish(self) -> Usage:
        """The answer has ended: its usage."""
        if self._inflate is not None and not self._undecodable:
            try:
                self._plain(self._inflate.flush())
            except zlib.error:
                self._undecodable = True
        if self._undecodable:
            return self.usage
        if self._mode == "json":
            if self._skipping:
                self.skipped += 1
            else:
                self._take(bytes(self._buffer))
            self._buffer.clear()
        elif self._mode == "sse":
            if self._buffer and not self._skipping:
                self._line(bytes(self._buffer))
            self._buffer.clear()
            self._dispatch()
        return self.usage

    @property
    def usage(self) -> Usage:
        """What the answer has said so far."""
        model = self._model or self._asked
        if not self._fields:
            return Usage(model)
        inputs, output, cached = (min(n, COUNT_MAX) for n in _counts(self._api, self._fields))
        return Usage(model, inputs, output, min(cached, inputs), True)

    @property
    def streaming(self) -> bool:
        """The answer is server-sent events (known from its first byte that is not space)."""
        return self._mode == "sse"

    @property
    def estimate(self) -> Usage:
        """The usage so far, with output at least what the text written so far suggests (a
        stream says its output tokens only at its end)."""
        usage = self.usage
        written = math.ceil(self._written / _CHARS_PER_TOKEN)
        return replace(usage, output=max(usage.output, min(written, COUNT_MAX)))

    # -- server-sent events: lines, data lines gathered, dispatched at a blank line

    def _lines(self) -> None:
        while True:
            end = self._buffer.find(b"\n", self._scanned)
            if end < 0:
                self._scanned = len(self._buffer)  # a long line is not searched again
                if len(self._buffer) > WIRE_EVENT_MAX:
                    self._buffer.clear()
                    self._scanned = 0
                    self._skipping = True  # the rest of this line is set aside
                return
            line = bytes(self._buffer[:end])
            del self._buffer[: end + 1]
            self._scanned = 0
            if self._skipping:
                self._skipping = False
                self._data, self._data_size = [], WIRE_EVENT_MAX + 1
                continue
            self._line(line)

    def _line(self, line: bytes) -> None:
        line = line.removesuffix(b"\r")
        if len(line) > WIRE_EVENT_MAX:
            # as when it came in pieces: the event is set aside
            self._data, self._data_size = [], WIRE_EVENT_MAX + 1
        elif not line:
            self._dispatch()
        elif line.startswith(b"data:"):
            value = line[5:].removeprefix(b" ")
            self._data_size += len(value) + 1
            # an event of endless data lines is not held: only its size is counted
            if self._data_size <= WIRE_EVENT_MAX:
                self._data.append(value)
            else:
                self._data.clear()

    def _dispatch(self) -> None:
        data, size = self._data, self._data_size
        self._data, self._data_size = [], 0
        if size > WIRE_EVENT_MAX:
            self.skipped += 1
        elif data:
            self._take(b"\n".join(data))

    # -- one JSON document: an event, or a whole answer

    def _take(self, raw: bytes) -> None:
        if raw.strip() == b"[DONE]":
            return
        try:
            doc: object = json.loads(raw)
        except (ValueError, RecursionError):
            self.skipped += 1
            return
        docs = cast(list[object], doc) if isinstance(doc, list) else [doc]
        for one in docs:
            if isinstance(one, dict):
                self._event(cast(dict[str, Any], one))

    def _event(self, doc: dict[str, Any]) -> None:
        if self._counting:  # {"input_tokens": N} or {"totalTokens": N}: the prompt's tokens
            found = _fields({k: v for k, v in doc.items() if k in _COUNTED})
            if found:
                self._fields, self.final = {"count": max(found.values())}, True
            return
        carrier = _carrier(self._api, doc)
        model = carrier.get("modelVersion" if self._api == GEMINI else "model")
        if isinstance(model, str) and model:
            self._model = _clean_model(model)
        usage = carrier.get("usageMetadata" if self._api == GEMINI else "usage")
        if isinstance(usage, dict):
            found = _fields(cast(dict[str, object], usage))
            if found:
                self._fields.update(found)
                self.final = self.final or _closing(self._api, doc, carrier)
                return
        self._written = min(self._written + _written(doc), COUNT_MAX)


def _decoder(encoding: str) -> tuple[Any, bool]:
    """A decompressor for a Content-Encoding (None: none needed), and whether it is one this
    reader cannot undo (br, zstd: usage unknown, said)."""
    name = encoding.strip().lower()
    if name in ("", "identity"):
        return None, False
    if name in ("gzip", "x-gzip"):
        return zlib.decompressobj(16 + zlib.MAX_WBITS), False
    if name == "deflate":
        return zlib.decompressobj(), False
    return None, True


_COUNTED = ("input_tokens", "totalTokens")
"""What Anthropic's count_tokens and Gemini's countTokens answer."""


def _counting(path: str) -> bool:
    return path.split("?", 1)[0].rstrip("/").endswith(("/count_tokens", ":countTokens"))


def _closing(api: str, doc: dict[str, Any], carrier: dict[str, Any]) -> bool:
    """Whether the usage an event carries is the answer's last word on it: Anthropic's
    `message_delta` (or a whole message), a Responses answer completed, any chat usage (the
    last chunk's, or the JSON's), a Gemini piece that finished its candidates."""
    if api == ANTHROPIC:
        return doc.get("type") == "message_delta" or doc.get("stop_reason") is not None
    if api == RESPONSES:
        return carrier.get("status") in ("completed", "incomplete")
    key = "finishReason" if api == GEMINI else "finish_reason"
    if api == CHAT and doc.get("object") == "chat.completion":
        return True  # a whole answer, not a chunk
    choices = doc.get("candidates" if api == GEMINI else "choices")
    if not isinstance(choices, list) or not choices:
        return True  # chat's usage chunk (choices: []), or a Gemini prompt refused whole
    items = cast(list[object], choices)
    return all(isinstance(c, dict) and cast(dict[str, Any], c).get(key) for c in items)


def _carrier(api: str, doc: dict[str, Any]) -> dict[str, Any]:
    """The object of an event that carries the model and usage."""
    key = {ANTHROPIC: "message", RESPONSES: "response"}.get(api)
    inner = doc.get(key) if key else None
    if isinstance(inner, dict) and ("usage" in inner or "model" in inner):
        return cast(dict[str, Any], inner)
    return doc


def _fields(usage: dict[str, object], prefix: str = "") -> dict[str, int]:
    """The counts of a usage object, flattened ("input_tokens_details.cached_tokens")."""
    found: dict[str, int] = {}
    for key, value in usage.items():
        if isinstance(value, dict):
            if not prefix:
                found.update(_fields(cast(dict[str, object], value), f"{key}."))
            continue
        count = _count(value)
        if count is not None:
            found[prefix + key] = count
    return found


def _count(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and 0 <= value <= COUNT_MAX:
        return value
    return None


def _counts(api: str, fields: Mapping[str, int]) -> tuple[int, int, int]:
    """(input with cached, output with reasoning, cached) from one API's usage fields."""
    get = fields.get
    if "count" in fields:  # a token count's answer: the prompt's tokens
        return get("count", 0), 0, 0
    if api == ANTHROPIC:
        cached = get("cache_read_input_tokens", 0)
        inputs = get("input_tokens", 0) + cached + get("cache_creation_input_tokens", 0)
        return inputs, get("output_tokens", 0), cached
    if api == RESPONSES:
        return (
            get("input_tokens", 0),
            get("output_tokens", 0),
            get("input_tokens_details.cached_tokens", 0),
        )
    if api == GEMINI:
        inputs = get("promptTokenCount", 0) + get("toolUsePromptTokenCount", 0)
        output = get("candidatesTokenCount", 0) + get("thoughtsTokenCount", 0)
        return inputs, output, get("cachedContentTokenCount", 0)
    return (
        get("prompt_tokens", 0),
        get("completion_tokens", 0),
        get("prompt_tokens_details.cached_tokens", 0),
    )


def _written(doc: object, depth: int = 0, inside: bool = False) -> int:
    """Characters of text a streamed event writes (under "delta", or Gemini's "parts")."""
    if depth > _DEPTH_MAX:
        return 0
    if isinstance(doc, str):
        return len(doc) if inside else 0
    if isinstance(doc, list):
        return sum(_written(v, depth + 1, inside) for v in cast(list[object], doc))
    if isinstance(doc, dict):
        items = cast(dict[str, object], doc).items()
        return sum(
            _written(v, depth + 1, inside or k in ("delta", "parts"))
            for k, v in items
            if k not in ("type", "role", "id", "index")
        )
    return 0


def _requested_model(request: bytes, path: str) -> str:
    """The model the request names: its body's "model", or Gemini's path."""
    if len(request) <= WIRE_EVENT_MAX:
        try:
            doc: object = json.loads(request)
        except (ValueError, RecursionError):
            doc = None
        if isinstance(doc, dict):
            model = cast(dict[str, object], doc).get("model")
            if isinstance(model, str) and model:
                return _clean_model(model)
    if "/models/" in path:
        return _clean_model(path.split("/models/", 1)[1].split(":", 1)[0].split("?", 1)[0])
    return ""


def _clean_model(model: str) -> str:
    return printable(model, _MODEL_MAX)


# -- what a request may cost, before it goes


@dataclass(frozen=True)
class Ask:
    """What a request may cost, read from its bytes before it goes: its reservation."""

    model: str = ""
    prompt: int = 0
    """Prompt tokens, at most: the body's size in bytes."""
    output: int = 0
    """Output tokens it may be given: its ceiling (OUTPUT_CEILING where it names none), times
    the choices it asks for."""

    @property
    def usage(self) -> Usage:
        """The reservation as a usage (input the prompt, output the ceiling): what an answer
        that never said its usage counts."""
        return Usage(self.model, self.prompt, self.output)


_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"(\s*:)?', re.DOTALL)
"""A JSON string, and the colon after it when it is a key."""
_KEPT = 256
"""Bytes of a string value kept when a body is read for its cost (a key is kept whole)."""
_PARSE = threading.Lock()
"""One body read at a time: the daemon's memory holds one parse, whatever runs at once."""
_CEILINGS = {
    ANTHROPIC: ("max_tokens",),
    RESPONSES: ("max_output_tokens",),
    CHAT: ("max_tokens", "max_completion_tokens"),
}
_TWICE = object()
"""A key the body gives twice, with values that cannot be told apart by size."""


def ask_of(api: str, method: str, path: str, body: bytes) -> Ask | str:
    """What the request may cost, or why its bytes do not say (it is then refused: the gateway
    forwards nothing it cannot reserve for)."""
    if method != "POST":
        return Ask(prompt=len(body))  # a listing: no model runs
    doc = _request_doc(body)
    if isinstance(doc, str):
        return f"the gateway reads a request for what it may cost, and {doc}"
    named = doc.get("model")
    model = _clean_model(named) if isinstance(named, str) else _requested_model(b"", path)
    if _counting(path):
        return Ask(model, len(body), 0)
    ceiling = _ceiling(api, doc)
    if isinstance(ceiling, str):
        return f"the gateway reads a request's output ceiling to reserve it: {ceiling}"
    return Ask(model, len(body), min(ceiling, COUNT_MAX))


def _request_doc(body: bytes) -> dict[str, Any] | str:
    """The body as JSON with its long string values read as empty (small to hold), or what
    it is instead."""
    if body.count(b'"') > 2 * REQUEST_STRINGS_MAX:
        return f"this body has more than {REQUEST_STRINGS_MAX:,} strings"
    with _PARSE:
        shown = _STRING.sub(lambda m: m[0] if m[1] or len(m[0]) <= _KEPT else b'""', body)
        if shown.count(b"{") + shown.count(b"[") > REQUEST_CONTAINERS_MAX:
            return f"this body has more than {REQUEST_CONTAINERS_MAX:,} objects and arrays"
        try:
            doc: object = json.loads(shown.decode("utf-8"), object_pairs_hook=_pairs)
        except (ValueError, RecursionError):
            return "this body is not UTF-8 JSON"
    if not isinstance(doc, dict):
        return "this body is not a JSON object"
    return cast(dict[str, Any], doc)


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object; a key given twice keeps the larger value (the upstream may read either)."""
    doc: dict[str, Any] = {}
    for key, value in pairs:
        doc[key] = _larger(doc[key], value) if key in doc else value
    return doc


def _larger(one: Any, other: Any) -> Any:
    if isinstance(one, dict) and isinstance(other, dict):
        return _pairs([*cast(dict[str, Any], one).items(), *cast(dict[str, Any], other).items()])
    first, second = _number(one), _number(other)
    if isinstance(first, int) and isinstance(second, int):
        return max(first, second)
    return _TWICE


def _number(value: Any) -> int | str | None:
    """A count as the upstream reads one (an integer, an integral float, a string of digits);
    None when absent or null; else what it is."""
    if value is None:
        return None
    if isinstance(value, bool) or value is _TWICE:
        return f"{value!r}"[:80] if value is not _TWICE else "given twice"
    if isinstance(value, float) and value.is_integer() and value >= 0:
        value = int(value)
    if isinstance(value, str) and value.strip().isdigit() and len(value) < 20:
        value = int(value.strip())
    if isinstance(value, int) and value >= 0:
        return value
    return f"{value!r}"[:80]


def _ceiling(api: str, doc: dict[str, Any]) -> int | str:
    """The output tokens a request may be given, all choices, or what it names that is no count."""
    choices: int | str | None = None
    if api == GEMINI:
        config = _either(doc, "generationConfig", "generation_config")
        config = cast(dict[str, Any], config) if isinstance(config, dict) else {}
        found = [_number(_either(config, "maxOutputTokens", "max_output_tokens"))]
        thinking = _either(config, "thinkingConfig", "thinking_config")
        if isinstance(thinking, dict):
            budget = _number(
                _either(cast(dict[str, Any], thinking), "thinkingBudget", "thinking_budget")
            )
            if budget is not None and not (isinstance(budget, str) and budget == "-1"):
                found.append(budget)
        choices = _number(_either(config, "candidateCount", "candidate_count"))
    else:
        found = [_number(doc.get(name)) for name in _CEILINGS.get(api, _CEILINGS[CHAT])]
        choices = _number(doc.get("n")) if api == CHAT else None
    wrong = [f for f in (*found, choices) if isinstance(f, str)]
    if wrong:
        return f"{wrong[0]} is no count"
    named = [f for f in found if isinstance(f, int)]
    ceiling = max(named) if named else OUTPUT_CEILING
    return ceiling * max(choices if isinstance(choices, int) else 1, 1)


def _either(doc: dict[str, Any], camel: str, snake: str) -> Any:
    """A field Google's JSON reads under either spelling (both given: the larger)."""
    if camel in doc and snake in doc:
        return _larger(doc[camel], doc[snake])
    return doc.get(camel, doc.get(snake))


def charged(ask: Ask, reader: UsageReader, status: int) -> Usage:
    """What an ended answer counts (its reader finished): its own usage where it said its last
    word on it, or where the upstream answered an error before serving (`status` is the head's;
    0 when none came); else the larger of its usage so far and its reservation (fail closed:
    what was served is not known, and never taken as zero)."""
    usage = reader.usage
    if reader.final or status >= 400:
        return usage
    return max(
        usage,
        reader.estimate,
        replace(ask.usage, model=usage.model or ask.model),
        key=lambda u: u.tokens,
    )


# -- prices


def cost_of(
    usage: Usage, prices: Mapping[str, ModelPrice], configured_model: str = ""
) -> tuple[float, str]:
    """USD for one exchange from [agent.prices] (budget's lookup and rates), and the basis."""
    price = budget.find_price(prices, usage.model, configured_model)
    if price is None:
        return 0.0, budget.NONE
    report = AgentReport(
        success=True,
        tokens_used=usage.tokens,
        input_tokens=usage.input,
        output_tokens=usage.output,
        cached_tokens=usage.cached,
        model=usage.model,
    )
    return budget.tokens_cost(report, price), budget.PRICES


# -- the iteration's caps


@dataclass(frozen=True)
class Caps:
    """The iteration's caps (0: none)."""

    tokens: int = 0
    usd: float = 0.0


def refused(caps: Caps, tokens: int, usd: float, ask: int = 0, ask_usd: float = 0.0) -> str:
    """Why the next request is refused ('' if it is not), given what the iteration used and
    holds for the requests under way (`tokens`, `usd`) and this request's reservation (`ask`,
    `ask_usd`): it must fit in what is left of each cap."""
    if caps.tokens and tokens >= caps.tokens:
        return f"the iteration used {tokens:,} tokens of its cap of {caps.tokens:,} tokens"
    if caps.usd and usd >= caps.usd:
        return f"the iteration spent ${usd:.2f} of its cap of ${caps.usd:.2f}"
    if caps.tokens and tokens + ask > caps.tokens:
        return (
            f"this request may use up to {ask:,} tokens, and {caps.tokens - tokens:,} are left "
            f"of the iteration's cap of {caps.tokens:,} (used, and held by requests under way)"
        )
    if caps.usd and usd + ask_usd > caps.usd:
        return (
            f"this request may cost up to ${ask_usd:.4f}, and ${caps.usd - usd:.4f} is left of "
            f"the iteration's cap of ${caps.usd:.2f} (spent, and held by requests under way)"
        )
    return ""


def cut(caps: Caps, tokens: int, usd: float, running: Usage, running_usd: float = 0.0) -> str:
    """Why a stream under way must be cut: what came before it and its running usage (use
    UsageReader.estimate) pass a cap ('' while they do not)."""
    total, spent = tokens + running.tokens, usd + running_usd
    if caps.tokens and total > caps.tokens:
        return (
            f"this answer took the iteration to {total:,} tokens, past its cap of {caps.tokens:,}"
        )
    if caps.usd and spent > caps.usd:
        return f"this answer took the iteration to ${spent:.2f}, past its cap of ${caps.usd:.2f}"
    return ""


# -- refusals, in each vendor's error shape

REFUSAL_STATUS = 403
"""A status every CLI here gives up on at once, read from their sources: Claude Code retries
401, 408, 409, 429 and 5xx (529 included), and 403 only when it says a login was revoked;
Gemini CLI 429, 499, 5xx; Codex 429, 5xx (codex-client/src/retry.rs); opencode (the AI
SDK) 408, 409, 429, 5xx; Aider retries by litellm's exception class, and not a
PermissionDeniedError. 400 would do for all but mini-swe-agent, which retries a
BadRequestError ten times over minutes and gives up only on 401, 403, 404 and a full
context window."""
_NO_RETRY = (("x-should-retry", "false"),)
"""The Stainless SDKs (Anthropic, OpenAI) ask this header before any status."""


def _error(api: str, reason: str, category: str = "BUDGET_EXCEEDED") -> bytes:
    """The vendor's error body for the cap (the gateway's shapes, at REFUSAL_STATUS)."""
    message = f"seed: {reason}; the run ends here ({category})"
    return error_body(api if api in APIS else CHAT, REFUSAL_STATUS, message)


def refusal(api: str, reason: str, category: str = "BUDGET_EXCEEDED") -> Refusal:
    """A refused request's answer, in the API's error format, saying not to retry."""
    return Refusal(REFUSAL_STATUS, _error(api, reason, category), _NO_RETRY)


def stream_error(api: str, reason: str) -> bytes:
    """The event that ends a stream the cap cut, in the API's format (the connection is
    closed after it), as each SDK reads an error in a stream: Anthropic's `error` event (its
    SDKs throw an APIError), a `response.failed` with the code Codex takes as quota (not
    retried), an error chunk for chat (the OpenAI SDKs throw on a chunk with `error`), and for
    Gemini the error object alone, not an SSE event: @google/genai (Gemini CLI) throws an
    ApiError with its code only for a piece that parses whole as JSON with `error` in it. A
    CLI that retries a broken stream meets the refusal: the cap is passed."""
    body = _error(api, reason)
    if api == ANTHROPIC:
        return b"event: error\ndata: " + body + b"\n\n"
    if api == RESPONSES:
        message = str(cast(dict[str, Any], json.loads(body))["error"]["message"])
        error = {"code": "insufficient_quota", "message": message}
        failed = {"type": "response.failed", "response": {"status": "failed", "error": error}}
        return b"event: response.failed\ndata: " + json.dumps(failed).encode() + b"\n\n"
    if api == GEMINI:
        return body + b"\n\n"
    return b"data: " + body + b"\n\n"
