"""The model gateway: the kernel's HTTP reverse proxy for one agent run's model API.

The agent talks to its model through a socket the kernel owns (a Unix socket in a kernel
folder; 127.0.0.1 for tests). Each request is forwarded to the upstream (the vendor's
endpoint or a self-hosted one) with the agent's placeholder key replaced by the real one, and
the answer streams back piece by piece as it arrives. Hooks see each request before it goes
(and may refuse it), each piece of the answer and its end, so the records room can record and
the budget can decide without this room importing them.

Standard library only (http.server, http.client): one run's gateway serves one agent, a few
requests at a time, and both modules stream (http.client's read1 hands back what arrived,
chunked or not); a third-party client would add a dependency to the kernel for nothing here.

Its bounds are its own, kernel side (the forwarder in the sandbox is the agent's to bypass):
GATEWAY_CONNECTIONS_MAX connections served at once (another waits for one to close), bodies
read in pieces against GATEWAY_HELD_MAX bytes held at once, a body over GATEWAY_REQUEST_MAX
refused before it is read. Past a bound, `limit` ends the run's use of the gateway: the open
connections are closed, and every later request is refused unread (`on_limit` says how).
"""

from __future__ import annotations

import contextlib
import http.client
import itertools
import json
import os
import re
import socket
import socketserver
import ssl
import stat
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qsl, urlencode, urlsplit

from kernel.bounds import (
    GATEWAY_CONNECTIONS_MAX,
    GATEWAY_HELD_MAX,
    GATEWAY_REQUEST_MAX,
    KIB,
    MIB,
)

Api = Literal["anthropic", "openai-responses", "openai-chat", "gemini"]

SOCKET_NAME = "gateway.sock"
UPSTREAM_TIMEOUT_S = 600.0
"""The longest the upstream may stay silent (connecting, or between two pieces of an answer)."""
_PIECE = 64 * KIB
_LINE_MAX = 64 * KIB
_IDLE_MAX = 4
"""Upstream connections kept alive between requests (an agent sends a few at a time)."""
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)
"""A kept-alive connection the upstream had closed: the request got no answer at all."""
_QUICKACK: int | None = getattr(socket, "TCP_QUICKACK", None)
_SOCKET_PATH_MAX = 107
"""AF_UNIX paths are 108 bytes with the terminating NUL."""
REDACTED = "[redacted]"

_CREDENTIALS = frozenset(
    {"authorization", "proxy-authorization", "x-api-key", "x-goog-api-key", "api-key", "cookie"}
)
"""Headers that carry a credential: never forwarded from the agent, redacted when recorded."""
_SECRET_WORDS = ("key", "auth", "token", "secret", "cookie", "session", "signature", "password")
"""A recorded header whose name holds one of these is redacted too (a CLI's own credential)."""
_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
        "accept-encoding",
    }
)
"""Headers of one connection, not of the message (plus those the gateway sets itself)."""
_VERSION = r"(?:/v1(?:beta|alpha)?)?"
_CALLS: tuple[tuple[Api, re.Pattern[str]], ...] = (
    ("anthropic", re.compile(_VERSION + r"/messages(?:/count_tokens)?/?")),
    ("openai-responses", re.compile(_VERSION + r"/responses/?")),
    ("openai-chat", re.compile(_VERSION + r"/chat/completions/?")),
    (
        "gemini",
        re.compile(
            _VERSION + r"/models/[A-Za-z0-9][A-Za-z0-9._-]*"
            r":(?:generateContent|streamGenerateContent|countTokens)"
        ),
    ),
)
"""The model calls forwarded, by whole path (the API's version segment optional)."""
_LISTING = re.compile(_VERSION + r"/models(?:/[A-Za-z0-9][A-Za-z0-9._-]*)?/?")


@dataclass(frozen=True)
class Exchange:
    """One request through the gateway, as the hooks see it (secrets already redacted)."""

    api: Api
    method: str
    path: str
    """The path and query the agent asked for (a `key` in the query redacted)."""
    headers: tuple[tuple[str, str], ...]
    """The agent's headers, names lower-cased, credentials redacted, hop-by-hop ones left out."""
    body: bytes
    seq: int
    """1 for the run's first request, then 2, 3, ..."""


@dataclass(frozen=True)
class Refusal:
    """An answer the gateway gives instead of forwarding: a status, a vendor-shaped body and
    any headers beside its content type (the cap's refusal says not to retry)."""

    status: int
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, api: Api, status: int, message: str) -> Refusal:
        """A refusal in the API's own error shape, so the CLI reads it as its vendor's."""
        return cls(status, error_body(api, status, message))


@dataclass(frozen=True)
class Answer:
    """An answer given from elsewhere than the upstream (a replay's recording): its status,
    headers and body, sent piece by piece; with a Content-Length when `framed`, else chunked."""

    status: int
    headers: tuple[tuple[str, str], ...]
    pieces: tuple[bytes, ...]
    framed: bool = False


OnRequest = Callable[[Exchange], "Refusal | None"]
OnChunk = Callable[[Exchange, bytes], "bool | bytes | None"]
"""Returning False cuts the answer there (the piece is not sent; both connections close);
returning bytes cuts it too, with them sent last (the API's error event, so the client reads
an error and not a short clean answer)."""
OnDone = Callable[[Exchange, int, float], None]
"""The upstream's status (502 when it failed, before or during the answer) and the seconds."""
AnswerFrom = Callable[[Exchange], "Answer | Refusal"]
"""In place of the upstream: each request answered by the kernel (a replay); no network."""
OnHead = Callable[[Exchange, int, "tuple[tuple[str, str], ...]"], None]
"""The answer's status and headers as the agent gets them (a Content-Length when framed)."""
OnLimit = Callable[[Api, str], Refusal]
"""A bound was passed (the first call ends the run) or is past: the refusal to answer with."""


def error_body(api: Api, status: int, message: str) -> bytes:
    """The JSON error body each vendor sends, for this status."""
    doc: dict[str, Any]
    if api == "anthropic":
        kinds = {
            400: "invalid_request_error",
            401: "authentication_error",
            403: "permission_error",
            404: "not_found_error",
            413: "request_too_large",
            429: "rate_limit_error",
            529: "overloaded_error",
        }
        doc = {
            "type": "error",
            "error": {"type": kinds.get(status, "api_error"), "message": message},
        }
    elif api == "gemini":
        states = {
            400: "INVALID_ARGUMENT",
            401: "UNAUTHENTICATED",
            403: "PERMISSION_DENIED",
            404: "NOT_FOUND",
            413: "INVALID_ARGUMENT",
            429: "RESOURCE_EXHAUSTED",
            502: "UNAVAILABLE",
            503: "UNAVAILABLE",
        }
        doc = {
            "error": {"code": status, "message": message, "status": states.get(status, "INTERNAL")}
        }
    else:
        kinds = {401: "invalid_api_key", 403: "permission_error", 429: "insufficient_quota"}
        kind = kinds.get(status, "server_error" if status >= 500 else "invalid_request_error")
        doc = {"error": {"message": message, "type": kind, "code": kind, "param": None}}
    return json.dumps(doc).encode()


def api_of(method: str, path: str, headers: Mapping[str, str] | None = None) -> Api | None:
    """The API a request speaks, from its path; None for what the gateway does not forward.

    An allow-list of whole paths: model calls, token counts and model listings only, so the
    real key cannot reach the vendor's other endpoints (files, batches, assistants' threads,
    the account), nor through dot segments or escapes the upstream would resolve.
    """
    route = path.split("?", 1)[0]
    if method == "POST":
        for api, pattern in _CALLS:
            if pattern.fullmatch(route):
                return api
        return None
    if method == "GET" and _LISTING.fullmatch(route):
        # a listing looks alike for every vendor: its headers tell them apart
        names = {k.lower() for k in (headers or {})}
        if "x-api-key" in names or "anthropic-version" in names:
            return "anthropic"
        if "x-goog-api-key" in names or route.startswith("/v1beta/") or "key=" in path:
            return "gemini"
        return "openai-chat"
    return None


def _secret(name: str) -> bool:
    return name in _CREDENTIALS or any(word in name for word in _SECRET_WORDS)


def _split(path: str) -> tuple[str, list[tuple[str, str]]]:
    route, _, query = path.partition("?")
    return route, parse_qsl(query, keep_blank_values=True)


def _joined(route: str, query: list[tuple[str, str]]) -> str:
    return f"{route}?{urlencode(query)}" if query else route


def _recorded_path(path: str) -> str:
    route, query = _split(path)
    if not any(name == "key" for name, _ in query):
        return path
    return _joined(route, [(n, REDACTED if n == "key" else v) for n, v in query])


def _connection_names(headers: Mapping[str, str]) -> frozenset[str]:
    """Headers named in Connection, hop-by-hop for this connection only."""
    named = ",".join(v for k, v in headers.items() if k.lower() == "connection")
    return frozenset(n.strip().lower() for n in named.split(",") if n.strip())


class Gateway:
    """One agent run's gateway: start, serve in threads, stop."""

    def __init__(
        self,
        upstream: str,
        keys: Mapping[str, str],
        on_request: OnRequest | None = None,
        on_chunk: OnChunk | None = None,
        on_done: OnDone | None = None,
        answer_from: AnswerFrom | None = None,
        on_head: OnHead | None = None,
        on_limit: OnLimit | None = None,
    ) -> None:
        """`keys`: header name to the whole value sent upstream, replacing the agent's own.

        For example {"x-api-key": KEY} (Anthropic), {"authorization": f"Bearer {KEY}"} (OpenAI)
        or {"x-goog-api-key": KEY} (Gemini). A `key` in the query is never forwarded.
        With `answer_from` there is no upstream (pass ""): every request is answered by it.
        """
        parts = urlsplit(upstream)
        if answer_from is None and (parts.scheme not in ("http", "https") or not parts.hostname):
            raise ValueError(f"the model upstream must be an http or https URL: {upstream!r}")
        self._answer_from = answer_from
        self._https = parts.scheme == "https"
        self._host = parts.hostname or ""
        self._port = parts.port or (443 if self._https else 80)
        self._prefix = parts.path.rstrip("/")
        self._keys = {name.lower(): value for name, value in keys.items()}
        self._on_request = on_request
        self._on_chunk = on_chunk
        self._on_done = on_done
        self._on_head = on_head
        self._on_limit = on_limit
        self._seq = itertools.count(1)
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._clients: set[socket.socket] = set()
        self._mine = threading.local()
        """The connection this handler thread serves (`limit` closes the others)."""
        self._held = 0
        """Request bytes read and not yet let go, all connections (GATEWAY_HELD_MAX)."""
        self.limited = ""
        """Why the run passed a bound ('' while it has not): every request is refused unread."""
        self._idle: list[http.client.HTTPConnection] = []
        self._server: socketserver.BaseServer | None = None
        self._socket_path: Path | None = None
        self._thread: threading.Thread | None = None

    # --- life

    def start(self, folder: Path | None = None) -> str:
        """Serve; returns the Unix socket's path in `folder`, or http://127.0.0.1:PORT without one."""
        gateway = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                sock: socket.socket = self.connection
                if sock.family == socket.AF_INET:
                    # each piece of a stream goes out at once, not held for an ACK
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                gateway._track(sock, True, client=True)
                gateway._mine.sock = sock

            def finish(self) -> None:
                gateway._track(self.connection, False, client=True)
                super().finish()

            def log_message(self, format: str, *args: Any) -> None:
                return

            def handle_one_request(self) -> None:
                try:
                    super().handle_one_request()
                except OSError:
                    self.close_connection = True

            def do_POST(self) -> None:
                gateway._serve(self)

            do_GET = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = do_POST

        server: socketserver.BaseServer
        if folder is None:
            server = _TcpServer(("127.0.0.1", 0), Handler)
            where = f"http://127.0.0.1:{server.server_address[1]}"
        else:
            path = _socket_in(folder)
            server = _UnixServer(str(path), Handler)
            os.chmod(path, 0o600)
            self._socket_path = path
            where = str(path)
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return where

    def stop(self) -> None:
        """Stop serving: open connections (a stream under way included) are closed, threads joined."""
        server = self._server
        if server is None:
            return
        self._server = None
        server.shutdown()
        with self._lock:
            for sock in self._open:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
        server.server_close()  # joins the handler threads
        with self._lock:
            idle, self._idle = self._idle, []
        for upstream in idle:
            self._close(upstream)
        if self._thread is not None:
            self._thread.join()
        if self._socket_path is not None:
            self._socket_path.unlink(missing_ok=True)

    def _track(self, sock: socket.socket, opened: bool, client: bool = False) -> None:
        with self._lock:
            if not opened:
                self._open.discard(sock)
                self._clients.discard(sock)
            elif self._server is not None:
                self._open.add(sock)
                if client:
                    self._clients.add(sock)
            else:
                # opened while stop() runs (a request between its hooks): ended at once, so
                # that stop() never waits for a stream that began after it
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    # --- one request

    def _serve(self, handler: BaseHTTPRequestHandler) -> None:
        started = time.monotonic()
        headers = {k.lower(): v for k, v in handler.headers.items()}
        api = api_of(handler.command, handler.path, headers)
        if api is None:
            route = handler.path.split("?", 1)[0]
            message = f"the model gateway does not forward {handler.command} {route}"
            self._answer(handler, Refusal.of("openai-chat", 404, message))
            return
        held = [0]
        try:
            body = self._body(handler, api, held) if not self.limited else self._refused(api)
            if isinstance(body, Refusal):
                handler.close_connection = True  # the rest of the body is unread
                self._answer(handler, body)
                return
            self._exchange(handler, api, headers, body, started)
        finally:
            self._let_go(held[0])

    def _exchange(
        self,
        handler: BaseHTTPRequestHandler,
        api: Api,
        headers: dict[str, str],
        body: bytes,
        started: float,
    ) -> None:
        """One request read whole: the hooks, then the upstream (or the replay's answer)."""
        hop = _HOP_BY_HOP | _connection_names(headers)
        exchange = Exchange(
            api=api,
            method=handler.command,
            path=_recorded_path(handler.path),
            headers=tuple(
                (k, REDACTED if _secret(k) else v) for k, v in headers.items() if k not in hop
            ),
            body=body,
            seq=next(self._seq),
        )
        if self._on_request is not None:
            try:
                refusal = self._on_request(exchange)
            except Exception as error:  # a failing hook refuses: nothing goes out
                refusal = Refusal.of(api, 500, f"the kernel's gateway failed: {error!r}")
            if refusal is not None:
                self._answer(handler, refusal)
                return
        if self._answer_from is not None:  # a replay: answered here, nothing goes anywhere
            status = self._give(handler, exchange, self._answer_from)
            if self._on_done is not None:
                self._on_done(exchange, status, time.monotonic() - started)
            return
        route, query = _split(handler.path)
        # Gemini's key in the query: the real one goes in a header, and no API sends the agent's
        query = [(n, v) for n, v in query if n != "key"]
        # holding no key, the gateway forwards the agent's own login (visible to it anyway)
        own = _CREDENTIALS if self._keys else frozenset[str]()
        out = {k: v for k, v in headers.items() if k not in hop and k not in own}
        out.update(self._keys)
        # identity: the hooks read the answer's bytes (usage) as the vendor wrote them
        out["accept-encoding"] = "identity"
        target = self._prefix + _joined(route, query)
        status = self._forward(handler, exchange, target, out)
        if self._on_done is not None:
            self._on_done(exchange, status, time.monotonic() - started)

    def limit(self, api: Api, reason: str) -> Refusal:
        """A bound is passed: the run's use of the gateway ends (the open connections are
        closed, but the one that passed it, which gets the refusal) and every later request
        is refused unread."""
        with self._lock:
            first, self.limited = not self.limited, self.limited or reason
            mine = getattr(self._mine, "sock", None)
            others = [sock for sock in self._clients if sock is not mine]
        if first:
            for sock in others:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
        return self._refused(api, reason)

    def _refused(self, api: Api, reason: str = "") -> Refusal:
        reason = reason or self.limited
        if self._on_limit is not None:
            return self._on_limit(api, reason)
        return Refusal.of(api, 413, f"the model gateway ends the run: {reason}")

    def _hold(self, size: int) -> bool:
        """Whether `size` more request bytes fit in GATEWAY_HELD_MAX (taken if they do)."""
        with self._lock:
            if self._held + size > GATEWAY_HELD_MAX:
                return False
            self._held += size
            return True

    def _over_held(self) -> str:
        return (
            f"request bytes held in the daemon's memory at once past the gateway's bound of "
            f"{GATEWAY_HELD_MAX // MIB} MiB ({len(self._clients)} connections open)"
        )

    def _let_go(self, size: int) -> None:
        with self._lock:
            self._held -= size

    def _body(self, handler: BaseHTTPRequestHandler, api: Api, held: list[int]) -> bytes | Refusal:
        """The request's body, read in pieces within the bounds (by length or in chunks);
        `held` counts what it holds of GATEWAY_HELD_MAX, let go by the caller."""
        coding = (handler.headers.get("Transfer-Encoding") or "").strip().lower()
        encoded = (handler.headers.get("Content-Encoding") or "identity").strip().lower()
        if encoded != "identity":  # its bytes would not be the prompt the gateway counts
            return Refusal.of(api, 415, f"a request body in {encoded!r} is not forwarded")
        if coding and coding != "chunked":
            return Refusal.of(api, 400, f"unsupported transfer encoding {coding!r}")
        text = (handler.headers.get("Content-Length") or "0").strip()
        if not coding and not text.isdigit():
            return Refusal.of(api, 400, "the request's Content-Length is not a number")
        if not coding and int(text) > GATEWAY_REQUEST_MAX:
            return self.limit(api, _too_big())
        parts: list[bytes] = []
        pieces = _chunks(handler) if coding else _pieces(handler, int(text))
        for piece in pieces:
            if isinstance(piece, Refusal):
                return piece
            if held[0] + len(piece) > GATEWAY_REQUEST_MAX:
                return self.limit(api, _too_big())
            if not self._hold(len(piece)):
                return self.limit(api, self._over_held())
            held[0] += len(piece)
            parts.append(piece)
        if len(parts) < 2:
            return parts[0] if parts else b""
        if not self._hold(held[0]):  # the joined copy, while the pieces still exist
            return self.limit(api, self._over_held())
        body = b"".join(parts)
        parts.clear()
        self._let_go(held[0])
        return body

    def _connect(self) -> http.client.HTTPConnection:
        if self._https:
            return http.client.HTTPSConnection(
                self._host,
                self._port,
                timeout=UPSTREAM_TIMEOUT_S,
                context=ssl.create_default_context(),
            )
        return http.client.HTTPConnection(self._host, self._port, timeout=UPSTREAM_TIMEOUT_S)

    def _take(self) -> tuple[http.client.HTTPConnection, bool]:
        """An idle upstream connection (kept alive: no new TLS handshake), or a new one."""
        with self._lock:
            if self._idle:
                return self._idle.pop(), True
        return self._connect(), False

    def _give_back(self, upstream: http.client.HTTPConnection) -> None:
        with self._lock:
            if self._server is not None and len(self._idle) < _IDLE_MAX:
                self._idle.append(upstream)
                return
        self._close(upstream)

    def _close(self, upstream: http.client.HTTPConnection) -> None:
        if upstream.sock is not None:
            self._track(upstream.sock, False)
        upstream.close()

    def _send(
        self,
        upstream: http.client.HTTPConnection,
        exchange: Exchange,
        target: str,
        headers: dict[str, str],
    ) -> http.client.HTTPResponse:
        if upstream.sock is None:
            upstream.connect()
            if upstream.sock is not None:
                self._track(upstream.sock, True)
        body = exchange.body if exchange.body or exchange.method != "GET" else None
        upstream.request(exchange.method, target, body=body, headers=headers)
        if upstream.sock is not None and _QUICKACK is not None:
            # on a kept-alive connection Linux delays its ACKs, and an upstream that writes its
            # head and body apart (Nagle) would wait 40 ms for one: acknowledge at once
            upstream.sock.setsockopt(socket.IPPROTO_TCP, _QUICKACK, 1)
        return upstream.getresponse()

    def _forward(
        self,
        handler: BaseHTTPRequestHandler,
        exchange: Exchange,
        target: str,
        headers: dict[str, str],
    ) -> int:
        """Send the request upstream and stream its answer back; the status the hooks see."""
        upstream, reused = self._take()
        finished = False
        try:
            try:
                try:
                    answer = self._send(upstream, exchange, target, headers)
                except _STALE:
                    if not reused:
                        raise
                    # the upstream closed the idle connection: no answer came, so once more
                    self._close(upstream)
                    upstream = self._connect()
                    answer = self._send(upstream, exchange, target, headers)
            except ValueError as error:  # a header or path http.client will not send
                self._answer(handler, Refusal.of(exchange.api, 400, f"not forwarded: {error}"))
                return 400
            except (OSError, http.client.HTTPException) as error:
                message = f"the model upstream failed: {type(error).__name__}: {error}"
                self._answer(handler, Refusal.of(exchange.api, 502, message))
                return 502
            status, finished = self._relay(handler, exchange, answer)
            finished = finished and not answer.will_close
            return status
        finally:
            if finished:
                self._give_back(upstream)
            else:
                self._close(upstream)

    def _relay(
        self, handler: BaseHTTPRequestHandler, exchange: Exchange, answer: http.client.HTTPResponse
    ) -> tuple[int, bool]:
        """The upstream's answer to the agent, each piece as it arrives; whether it all came."""
        hop = _HOP_BY_HOP | _connection_names(dict(answer.getheaders()))
        handler.send_response_only(answer.status, answer.reason)
        sent = [(n, v) for n, v in answer.getheaders() if n.lower() not in hop]
        for name, value in sent:
            handler.send_header(name, value)
        bodiless = exchange.method == "HEAD" or answer.status in (204, 304) or answer.status < 200
        length = answer.getheader("Content-Length")
        framed = not answer.chunked and length is not None and length.strip().isdigit()
        if bodiless:
            handler.send_header("Content-Length", "0")
        elif framed:
            handler.send_header("Content-Length", str(length).strip())
            sent.append(("content-length", str(length).strip()))
        else:
            handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        if self._on_head is not None:
            self._on_head(exchange, answer.status, tuple(sent))
        if bodiless:
            answer.read()
            return answer.status, True
        while True:
            try:
                piece = answer.read1(_PIECE)
            except (OSError, http.client.HTTPException):
                handler.close_connection = True  # the answer broke off: so does the agent's
                return 502, False
            if not piece:
                if framed and answer.length:  # the upstream hung up before its length
                    handler.close_connection = True
                    return 502, False
                answer.close()  # read to its end: the connection may carry the next request
                break
            verdict = self._on_chunk(exchange, piece) if self._on_chunk is not None else None
            if verdict is False or isinstance(verdict, bytes):
                room = (answer.length or 0) + len(piece) if framed else None
                _cut(handler, verdict or b"", room)
                return answer.status, False
            try:
                handler.wfile.write(piece if framed else b"%x\r\n%s\r\n" % (len(piece), piece))
            except OSError:
                handler.close_connection = True  # the agent hung up: the rest is not read
                return answer.status, False
        if not framed:
            handler.wfile.write(b"0\r\n\r\n")
        return answer.status, True

    def _give(
        self, handler: BaseHTTPRequestHandler, exchange: Exchange, answer_from: AnswerFrom
    ) -> int:
        """An answer from `answer_from` sent as the upstream's would be, piece by piece."""
        try:
            answer = answer_from(exchange)
        except Exception as error:  # a failing hook answers an error: nothing else goes out
            answer = Refusal.of(exchange.api, 500, f"the kernel's gateway failed: {error!r}")
        if isinstance(answer, Refusal):
            self._answer(handler, answer)
            return answer.status
        handler.send_response_only(answer.status)
        sent = [(n, v) for n, v in answer.headers if n.lower() not in _HOP_BY_HOP]
        for name, value in sent:
            handler.send_header(name, value)
        if answer.framed:
            handler.send_header("Content-Length", str(sum(map(len, answer.pieces))))
            sent.append(("content-length", str(sum(map(len, answer.pieces)))))
        else:
            handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        if self._on_head is not None:
            self._on_head(exchange, answer.status, tuple(sent))
        sent = 0
        for piece in filter(None, answer.pieces):  # an empty chunk would end the answer
            verdict = self._on_chunk(exchange, piece) if self._on_chunk is not None else None
            if verdict is False or isinstance(verdict, bytes):
                room = sum(map(len, answer.pieces)) - sent if answer.framed else None
                _cut(handler, verdict or b"", room)
                return answer.status
            sent += len(piece)
            try:
                handler.wfile.write(
                    piece if answer.framed else b"%x\r\n%s\r\n" % (len(piece), piece)
                )
            except OSError:
                handler.close_connection = True  # the agent hung up
                return answer.status
        if not answer.framed:
            handler.wfile.write(b"0\r\n\r\n")
        return answer.status

    def _answer(self, handler: BaseHTTPRequestHandler, refusal: Refusal) -> None:
        handler.send_response_only(refusal.status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(refusal.body)))
        for name, value in refusal.headers:
            handler.send_header(name, value)
        if handler.close_connection:
            handler.send_header("Connection", "close")
        handler.end_headers()
        handler.wfile.write(refusal.body)


def _cut(handler: BaseHTTPRequestHandler, last: bytes, room: int | None) -> None:
    """End an answer the hooks cut, with `last` as its last piece. Chunked (`room` None), the
    answer ends whole after it and the connection stays open: a client that retries on it
    gets the next request's answer (the cap's refusal), not a reset. Framed, `last` goes only
    if it fits the length already promised, and the connection closes (the answer is short)."""
    if last and room is None:
        try:
            handler.wfile.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(last), last))
            return
        except OSError:
            pass  # the agent hung up
    handler.close_connection = True
    if last and room is not None and len(last) <= room:
        with contextlib.suppress(OSError):
            handler.wfile.write(last)


def _too_big() -> str:
    return f"a request body over the gateway's bound of {GATEWAY_REQUEST_MAX // MIB} MiB"


def _pieces(handler: BaseHTTPRequestHandler, length: int) -> Iterator[bytes | Refusal]:
    """A body of a Content-Length, in pieces as they come (never a buffer of its size)."""
    while length > 0:
        piece = handler.rfile.read1(min(length, _PIECE))  # what came, never waiting for more
        if not piece:
            yield Refusal(400, b'{"error": {"message": "the request ended before its length"}}')
            return
        length -= len(piece)
        yield piece


def _chunks(handler: BaseHTTPRequestHandler) -> Iterator[bytes | Refusal]:
    """A chunked body, in pieces of at most _PIECE bytes as they come."""
    while True:
        line = handler.rfile.readline(_LINE_MAX)
        try:
            length = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            yield Refusal(400, b'{"error": {"message": "a malformed chunk"}}')
            return
        if length == 0:
            break
        yield from _pieces(handler, length)
        handler.rfile.readline(_LINE_MAX)
    while handler.rfile.readline(_LINE_MAX) not in (b"\r\n", b"\n", b""):
        pass  # trailers: nothing forwards them


def _socket_in(folder: Path) -> Path:
    """The socket's path in a folder only this user can enter (made if missing)."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = folder.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise PermissionError(f"the gateway's folder must be this user's alone (0700): {folder}")
    path = folder / SOCKET_NAME
    if len(os.fsencode(path)) > _SOCKET_PATH_MAX:
        raise ValueError(f"the gateway's socket path is too long for a Unix socket: {path}")
    path.unlink(missing_ok=True)  # left by a killed run; the folder is the kernel's
    return path


class _Bounded(socketserver.BaseServer):
    """At most GATEWAY_CONNECTIONS_MAX connections served at once: the next is not accepted
    until one closes (it waits in the listen backlog, in the operating system's keeping)."""

    daemon_threads = False
    block_on_close = True
    request_queue_size = 4 * GATEWAY_CONNECTIONS_MAX
    _slots: threading.BoundedSemaphore

    def get_request(self) -> Any:
        if not self._slots.acquire(timeout=0.05):
            raise OSError("every connection slot is taken")  # serve_forever polls again
        try:
            return super().get_request()  # type: ignore[misc]
        except BaseException:
            self._slots.release()
            raise

    def shutdown_request(self, request: Any) -> None:
        try:
            super().shutdown_request(request)
        finally:
            self._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        return  # a connection the agent or stop() closed mid-answer is no error of the kernel's


class _TcpServer(_Bounded, ThreadingHTTPServer):
    def __init__(self, *args: Any) -> None:
        self._slots = threading.BoundedSemaphore(GATEWAY_CONNECTIONS_MAX)
        super().__init__(*args)


class _UnixServer(_Bounded, socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    def __init__(self, *args: Any) -> None:
        self._slots = threading.BoundedSemaphore(GATEWAY_CONNECTIONS_MAX)
        super().__init__(*args)
