"""A scripted model server for the real agent CLIs: stdlib only, 127.0.0.1, a free port.

It speaks the four APIs the CLIs use: OpenAI Responses (`POST /v1/responses`, SSE; Codex),
Anthropic Messages (`POST /v1/messages`, SSE; Claude Code), Gemini (`POST
/v1beta/models/M:streamGenerateContent?alt=sse` and `:generateContent`; Gemini CLI) and OpenAI
chat completions (`POST /v1/chat/completions`, streaming or not; opencode, Aider, mini).

It plays a script: a list of turns, each a tool call or a final text. Which turn answers a
request is the number of the model's answers already in it (a resumed session carries the
earlier rounds'; text-only scripts, for Aider, whose prompt holds example answers, count the
requests answered before), so the CLIs' side calls (titles, routing, next-speaker checks)
never move the script on; a side call gets a short text (SIDE_TEXT). It can answer every request with one
HTTP error instead, or hold every request until it stops. It logs every request; it is bounded
(a number of requests, a lifetime) and stops itself at the end of its lifetime.

As the real APIs do: a chat completions stream carries its usage (in a last chunk of its own)
only when the request asks for it (`stream_options.include_usage`); an answer stops at the
output ceiling the request names (`max_tokens`, `max_completion_tokens`, `max_output_tokens`,
`generationConfig.maxOutputTokens`), hidden reasoning included; the token counting endpoints
(Anthropic's `count_tokens`, Gemini's `countTokens`) answer a count and bill nothing; a body
past the context window is refused (400); requests are served at once, each in a thread.
`billed` is what the server's usage says (or would say, where it was not asked) it served.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, cast

INPUT_TOKENS = 1000
OUTPUT_TOKENS = 50
CACHED_TOKENS = 200
"""What each answer reports as its usage (the cached part is inside the input)."""
SIDE_TEXT = "Earlier: a task to fix add() in calc.py."
"""The answer to a side call (a title, a summary of the conversation so far)."""


@dataclass(frozen=True)
class Turn:
    """One answer: a tool call (tool and args) or, without a tool, a final text."""

    tool: str = ""
    args: dict[str, Any] = field(default_factory=dict[str, Any])
    text: str = ""
    reasoning: int = 0
    """Output tokens the model spends thinking: in its usage, never in its text."""


def call(tool: str, **args: Any) -> Turn:
    """A turn that calls a tool."""
    return Turn(tool=tool, args=args)


def say(text: str, reasoning: int = 0) -> Turn:
    """A turn that ends with text (after `reasoning` hidden output tokens)."""
    return Turn(text=text, reasoning=reasoning)


@dataclass
class Request:
    """One request the server got."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    turn: int
    """The script's turn that answered it (-1 for a side call or an error)."""
    at: float = field(default_factory=time.time)
    """When it came (epoch seconds)."""


class ScriptedModel:
    """The server; use `serving(...)` to run one."""

    def __init__(
        self,
        turns: list[Turn],
        *,
        text_only: bool = False,
        error: tuple[int, str] | None = None,
        hold: bool = False,
        max_requests: int = 200,
        lifetime_s: float = 900.0,
        log: Path | None = None,
        gate: threading.Event | None = None,
        hold_from: int = 0,
        gather: tuple[int, float] = (0, 0.0),
        context_bytes: int = 8 * 1024 * 1024,
        error_headers: tuple[tuple[str, str], ...] = (),
        errors: int = 0,
        error_fields: dict[str, Any] | None = None,
    ) -> None:
        self.turns = turns
        self.gather = gather
        """(n, seconds): each stream's last event waits until n requests came, or seconds passed."""
        self.context_bytes = context_bytes
        """A body past this is refused as a prompt over the context window (400)."""
        self.billed = 0
        """Tokens served, as the usage of each answer says (or would say, where not asked)."""
        self._gathered = threading.Event()
        self.hold_from = hold_from
        """When given, the requests from this one on (counting from 1) are held, as `hold` does."""
        self.gate = gate
        """When given, event streams go out chunked, one event at a time, the last once it is set."""
        self.text_only = text_only
        self.error = error
        self.error_headers = error_headers
        """Headers the error answer carries besides its content type (a 429's retry-after)."""
        self.errors = errors
        self.error_fields = error_fields or {}
        """Fields the error object carries besides its own (Codex's `resets_at`, a `type`)."""
        """When given, only the first this many requests get `error`; the rest the script."""
        self.hold = hold
        self.max_requests = max_requests
        self.lifetime_s = lifetime_s
        self.requests: list[Request] = []
        self.log = log
        """A JSONL file every request is appended to (for reading a failed test)."""
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_GET(self) -> None:
                if self.headers.get("Upgrade", "").lower() == "websocket":
                    # codex on a ChatGPT login tries the Responses API over a WebSocket
                    # first: its error answers the handshake, else none is served here
                    if model.error is not None:
                        model.refuse_handshake(self, *model.error)
                    else:
                        model.answer_json(self, 404, {"error": {"message": "no websockets"}})
                    return
                # model listings and the like: an empty list is enough for every CLI here
                model.answer_json(self, 200, {"object": "list", "data": [], "models": []})

            def do_POST(self) -> None:
                model.handle(self)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.origin = f"http://127.0.0.1:{self.port}"

    # --- what the tests read

    @property
    def url(self) -> str:
        """The OpenAI-style base URL (…/v1)."""
        return f"{self.origin}/v1"

    def answered(self) -> list[Request]:
        """The requests a turn of the script answered (not side calls, not errors)."""
        return [r for r in self.requests if r.turn >= 0]

    # --- serving

    def handle(self, handler: BaseHTTPRequestHandler) -> None:
        """Read one request, log it, answer it in its API's format."""
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        try:
            body = cast(dict[str, Any], json.loads(raw)) if raw else {}
        except ValueError:
            body = {}
        path = handler.path
        api = _api_of(path)
        turn = self._turn_of(api, body)
        entry = Request(path, {k.lower(): v for k, v in handler.headers.items()}, body, turn)
        with self._lock:
            self.requests.append(entry)
            count = len(self.requests)
            if self.gather[0] and count >= self.gather[0]:
                self._gathered.set()
            if self.log is not None:
                with self.log.open("a", encoding="utf-8") as handle:
                    handle.write(json.dumps({"path": path, "turn": turn, "body": body}) + "\n")
        if count > self.max_requests:
            entry.turn = -1
            self.answer_json(handler, 500, {"error": {"message": "too many requests"}})
            return
        if self.hold or 0 < self.hold_from <= count:
            entry.turn = -1
            self._stopping.wait(self.lifetime_s)
            return
        if self.error is not None and (not self.errors or count <= self.errors):
            entry.turn = -1
            self.answer_error(handler, api, *self.error)
            return
        if len(raw) > self.context_bytes:
            entry.turn = -1
            self.answer_error(handler, api, 400, "prompt is too long for the context window")
            return
        if path.split("?", 1)[0].endswith(("/count_tokens", ":countTokens")):
            entry.turn = -1  # free: a count, and nothing billed
            counted = len(raw) // 4
            key = "totalTokens" if api == "gemini" else "input_tokens"
            self.answer_json(handler, 200, {key: counted})
            return
        answer = self.turns[turn] if turn >= 0 else say(SIDE_TEXT)
        answer = replace(answer, reasoning=_spent(answer, body))
        with self._lock:
            self.billed += INPUT_TOKENS + OUTPUT_TOKENS + answer.reasoning
        model = str(body.get("model") or _gemini_model(path) or "model")
        if api == "responses":
            self.answer_sse(handler, _responses(answer, count, model))
        elif api == "messages":
            self.answer_sse(handler, _messages(answer, count, model))
        elif api == "gemini":
            chunk = _gemini(answer, count, model, body)
            if "streamGenerateContent" in path:
                self.answer_sse(handler, [(None, chunk)])
            else:
                self.answer_json(handler, 200, chunk)
        elif body.get("stream"):
            chunks = _chat_chunks(answer, count, model)
            options = body.get("stream_options")
            if not (
                isinstance(options, dict) and cast(dict[str, Any], options).get("include_usage")
            ):
                chunks = chunks[:-1]  # the usage chunk comes only when asked for
            self.answer_sse(handler, chunks, done=True)
        else:
            self.answer_json(handler, 200, _chat(answer, count, model))

    def _turn_of(self, api: str, body: dict[str, Any]) -> int:
        """The script's turn for this request, or -1 for a side call."""
        if api == "gemini" and _wants_json(body):
            return -1  # gemini's next-speaker check asks for JSON
        if "summarize this partial conversation" in json.dumps(body.get("messages", ""))[:400]:
            return -1  # aider condensing a restored chat history
        if self.text_only:
            # aider's prompt holds example answers: count the answers given instead
            index = sum(1 for r in self.requests if r.turn >= 0)
        else:
            if api == "chat" and not body.get("tools"):
                return -1  # a title call
            # the answers already given (a resumed session carries its earlier rounds'); not
            # the tool results, which a resumed gemini session repeats
            index = _answers(api, body)
        return min(index, len(self.turns) - 1)

    def answer_json(
        self,
        handler: BaseHTTPRequestHandler,
        status: int,
        doc: Any,
        headers: tuple[tuple[str, str], ...] = (),
    ) -> None:
        """A JSON answer."""
        data = json.dumps(doc).encode()
        handler.send_response(status)
        for name, value in headers:
            handler.send_header(name, value)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    def answer_sse(
        self,
        handler: BaseHTTPRequestHandler,
        events: list[tuple[str | None, dict[str, Any]]],
        *,
        done: bool = False,
    ) -> None:
        """A server-sent event stream, closed at its end."""
        lines: list[str] = []
        for name, data in events:
            if name:
                lines.append(f"event: {name}")
            lines.append(f"data: {json.dumps(data)}")
            lines.append("")
        if done:
            lines += ["data: [DONE]", ""]
        payload = ("\n".join(lines) + "\n").encode()
        if self.gate is not None or self.gather[0]:
            self._trickle(handler, payload.split(b"\n\n"))
            return
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Cache-Control", "no-cache")
        handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        handler.wfile.write(payload)

    def _trickle(self, handler: BaseHTTPRequestHandler, events: list[bytes]) -> None:
        """An event stream in chunks, one event each; the last waits for the gate."""
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        pieces = [event + b"\n\n" for event in events if event.strip()]
        for n, piece in enumerate(pieces):
            if n == len(pieces) - 1 and self.gate is not None:
                self.gate.wait(self.lifetime_s)
            if n == len(pieces) - 1 and self.gather[0]:
                self._gathered.wait(self.gather[1])
            handler.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
        handler.wfile.write(b"0\r\n\r\n")

    def refuse_handshake(self, handler: BaseHTTPRequestHandler, status: int, message: str) -> None:
        """A WebSocket handshake answered with the error, in one write: codex reads the body
        of a refused handshake only as far as it came with the head."""
        data = json.dumps(self._error_doc("responses", status, message)).encode()
        head = [f"HTTP/1.1 {status} {handler.responses.get(status, ('Error',))[0]}"]
        head += [f"{name}: {value}" for name, value in self.error_headers]
        head += ["Content-Type: application/json", f"Content-Length: {len(data)}"]
        head += ["Connection: close", "", ""]
        handler.wfile.write("\r\n".join(head).encode() + data)
        handler.close_connection = True

    def answer_error(
        self, handler: BaseHTTPRequestHandler, api: str, status: int, message: str
    ) -> None:
        """An HTTP error in the API's own error format."""
        self.answer_json(handler, status, self._error_doc(api, status, message), self.error_headers)

    def _error_doc(self, api: str, status: int, message: str) -> dict[str, Any]:
        """The API's own error body."""
        limited = status == 429
        if api == "messages":
            kind = "authentication_error" if status == 401 else "invalid_request_error"
            kind = "rate_limit_error" if limited else kind
            doc: dict[str, Any] = {"type": "error", "error": {"type": kind, "message": message}}
        elif api == "gemini":
            state = "UNAUTHENTICATED" if status == 401 else "INVALID_ARGUMENT"
            doc = {"error": {"code": status, "message": message, "status": state}}
        else:
            kind = "invalid_api_key" if status == 401 else "invalid_request_error"
            kind = "rate_limit_exceeded" if limited else kind
            doc = {"error": {"message": message, "type": kind, "code": kind, "param": None}}
        doc["error"].update(self.error_fields)
        return doc

    def start(self) -> None:
        """Serve in a thread; stop by itself after the lifetime."""
        # a short poll: stop() returns at once (each test starts and stops its own server)
        threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        threading.Thread(target=self._expire, daemon=True).start()

    def _expire(self) -> None:
        if not self._stopping.wait(self.lifetime_s):
            self.stop()

    def stop(self) -> None:
        """Stop serving (held requests are let go)."""
        self._stopping.set()
        self.server.shutdown()
        self.server.server_close()


@contextmanager
def serving(turns: list[Turn], **options: Any) -> Iterator[ScriptedModel]:
    """A running scripted model, stopped at the end of the block."""
    model = ScriptedModel(turns, **options)
    model.start()
    try:
        yield model
    finally:
        model.stop()


def _api_of(path: str) -> str:
    if path.startswith("/v1/responses") or path.endswith("/responses"):
        return "responses"
    if "/messages" in path:
        return "messages"
    if "generateContent" in path or "GenerateContent" in path:
        return "gemini"
    return "chat"


def _gemini_model(path: str) -> str:
    marker = "/models/"
    if marker not in path:
        return ""
    return path.split(marker, 1)[1].split(":", 1)[0]


def _wants_json(body: dict[str, Any]) -> bool:
    config = body.get("generationConfig") or body.get("config") or {}
    return isinstance(config, dict) and "json" in str(
        cast(dict[str, Any], config).get("responseMimeType", "")
    )


def _items(value: object) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        return []
    return [cast(dict[str, Any], v) for v in cast(list[Any], value) if isinstance(v, dict)]


def _answers(api: str, body: dict[str, Any]) -> int:
    """How many answers of the model the request already carries (each one tool call or text)."""
    if api == "responses":
        return sum(
            1
            for i in _items(body.get("input"))
            if i.get("type") == "function_call"
            or (i.get("type") == "message" and i.get("role") == "assistant")
        )
    if api == "gemini":
        return sum(1 for c in _items(body.get("contents")) if c.get("role") == "model")
    return sum(1 for m in _items(body.get("messages")) if m.get("role") == "assistant")


def _spent(turn: Turn, body: dict[str, Any]) -> int:
    """The hidden reasoning tokens of an answer, within the output ceiling the request names."""
    config = body.get("generationConfig")
    named = [
        body.get("max_tokens"),
        body.get("max_completion_tokens"),
        body.get("max_output_tokens"),
        cast(dict[str, Any], config).get("maxOutputTokens") if isinstance(config, dict) else None,
    ]
    ceilings = [c for c in named if isinstance(c, int) and not isinstance(c, bool)]
    if not ceilings:
        return turn.reasoning
    return max(min(turn.reasoning, min(ceilings) - OUTPUT_TOKENS), 0)


def _usage_numbers(turn: Turn | None = None) -> tuple[int, int, int]:
    return INPUT_TOKENS, OUTPUT_TOKENS + (turn.reasoning if turn else 0), CACHED_TOKENS


def _responses(turn: Turn, n: int, model: str) -> list[tuple[str | None, dict[str, Any]]]:
    inputs, outputs, cached = _usage_numbers(turn)
    rid = f"resp_{n}"
    if turn.tool:
        item: dict[str, Any] = {
            "type": "function_call",
            "id": f"fc_{n}",
            "call_id": f"call_{n}",
            "name": turn.tool,
            "arguments": json.dumps(turn.args),
            "status": "completed",
        }
    else:
        item = {
            "type": "message",
            "id": f"msg_{n}",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": turn.text, "annotations": []}],
        }
    usage = {
        "input_tokens": inputs,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": outputs,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": inputs + outputs,
    }
    base = {"id": rid, "object": "response", "created_at": int(time.time()), "model": model}
    return [
        (
            "response.created",
            {"type": "response.created", "response": {**base, "status": "in_progress"}},
        ),
        (
            "response.output_item.done",
            {"type": "response.output_item.done", "output_index": 0, "item": item},
        ),
        (
            "response.completed",
            {
                "type": "response.completed",
                "response": {**base, "status": "completed", "output": [item], "usage": usage},
            },
        ),
    ]


def _messages(turn: Turn, n: int, model: str) -> list[tuple[str | None, dict[str, Any]]]:
    inputs, outputs, cached = _usage_numbers(turn)
    start_usage = {
        "input_tokens": inputs - cached,
        "cache_read_input_tokens": cached,
        "cache_creation_input_tokens": 0,
        "output_tokens": 1,
    }
    events: list[tuple[str | None, dict[str, Any]]] = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": f"msg_{n}",
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": start_usage,
                },
            },
        )
    ]
    if turn.tool:
        block: dict[str, Any] = {
            "type": "tool_use",
            "id": f"toolu_{n}",
            "name": turn.tool,
            "input": {},
        }
        delta: dict[str, Any] = {"type": "input_json_delta", "partial_json": json.dumps(turn.args)}
        stop = "tool_use"
    else:
        block = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": turn.text}
        stop = "end_turn"
    events += [
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": block},
        ),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": outputs},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return events


def _gemini(turn: Turn, n: int, model: str, body: dict[str, Any]) -> dict[str, Any]:
    inputs, outputs, cached = _usage_numbers(turn)
    if _wants_json(body):
        part: dict[str, Any] = {"text": json.dumps({"reasoning": "done", "next_speaker": "user"})}
    elif turn.tool:
        part = {"functionCall": {"name": turn.tool, "args": turn.args}}
    else:
        part = {"text": turn.text}
    return {
        "candidates": [
            {"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": {
            "promptTokenCount": inputs,
            "cachedContentTokenCount": cached,
            "candidatesTokenCount": outputs,
            "totalTokenCount": inputs + outputs,
        },
        "modelVersion": model,
        "responseId": f"gemini_{n}",
    }


def _chat_usage(turn: Turn | None = None) -> dict[str, Any]:
    inputs, outputs, cached = _usage_numbers(turn)
    return {
        "prompt_tokens": inputs,
        "completion_tokens": outputs,
        "total_tokens": inputs + outputs,
        "prompt_tokens_details": {"cached_tokens": cached},
    }


def _chat(turn: Turn, n: int, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
    if turn.tool:
        message["tool_calls"] = [
            {
                "id": f"call_{n}",
                "type": "function",
                "function": {"name": turn.tool, "arguments": json.dumps(turn.args)},
            }
        ]
    return {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if turn.tool else "stop",
            }
        ],
        "usage": _chat_usage(turn),
    }


def _chat_chunks(turn: Turn, n: int, model: str) -> list[tuple[str | None, dict[str, Any]]]:
    base = {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
    }
    if turn.tool:
        delta: dict[str, Any] = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "index": 0,
                    "id": f"call_{n}",
                    "type": "function",
                    "function": {"name": turn.tool, "arguments": json.dumps(turn.args)},
                }
            ],
        }
        finish = "tool_calls"
    else:
        delta = {"role": "assistant", "content": turn.text}
        finish = "stop"
    return [
        (None, {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}),
        (None, {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}),
        (None, {**base, "choices": [], "usage": _chat_usage(turn)}),
    ]
