"""The model gateway with real sockets, in front of the scripted model server: each API's
answer streams through byte for byte, the upstream sees the real key and never the agent's,
refusals come back in the vendor's shape with nothing sent upstream, and a Unix socket works."""

from __future__ import annotations

import contextlib
import gzip
import http.client
import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from kernel.isolation import gateway as gateway_module
from kernel.isolation.gateway import Api, Exchange, Gateway, Refusal
from kernel.records import wire
from tests.agents_real.model import ScriptedModel, call, say, serving

SCRIPT = [call("shell", cmd="true"), say("Done.")]
REAL = "sk-real-0123456789"
PLACEHOLDER = "sk-placeholder-agent"
KEYS: dict[Api, dict[str, str]] = {
    "anthropic": {"x-api-key": REAL},
    "openai-responses": {"authorization": f"Bearer {REAL}"},
    "openai-chat": {"authorization": f"Bearer {REAL}"},
    "gemini": {"x-goog-api-key": REAL},
}
GEMINI = "/v1beta/models/gemini-x"
CASES: dict[str, tuple[Api, str, dict[str, Any], dict[str, str]]] = {
    "anthropic-sse": (
        "anthropic",
        "/v1/messages?beta=true",
        {"model": "claude-x", "stream": True, "messages": [], "tools": [{}]},
        {"x-api-key": PLACEHOLDER, "anthropic-version": "2023-06-01"},
    ),
    "responses-sse": (
        "openai-responses",
        "/v1/responses",
        {"model": "gpt-x", "stream": True, "input": []},
        {"authorization": f"Bearer {PLACEHOLDER}"},
    ),
    "chat-sse": (
        "openai-chat",
        "/v1/chat/completions",
        {"model": "gpt-x", "stream": True, "messages": [], "tools": [{}]},
        {"authorization": f"Bearer {PLACEHOLDER}"},
    ),
    "chat-json": (
        "openai-chat",
        "/v1/chat/completions",
        {"model": "gpt-x", "messages": [], "tools": [{}]},
        {"authorization": f"Bearer {PLACEHOLDER}"},
    ),
    "gemini-sse": (
        "gemini",
        f"{GEMINI}:streamGenerateContent?alt=sse&key={PLACEHOLDER}",
        {"contents": [{"role": "user", "parts": [{"text": "go"}]}]},
        {},
    ),
    "gemini-json": (
        "gemini",
        f"{GEMINI}:generateContent",
        {"contents": [{"role": "user", "parts": [{"text": "go"}]}]},
        {"x-goog-api-key": PLACEHOLDER},
    ),
}


class _Answer:
    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body


class _UnixConnection(http.client.HTTPConnection):
    """http.client over AF_UNIX, as the sandbox's forwarder will speak to the gateway."""

    def __init__(self, path: str) -> None:
        super().__init__("localhost", timeout=10)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(10)
        sock.connect(self._path)
        self.sock = sock


def _connection(where: str) -> http.client.HTTPConnection:
    if where.startswith("http://"):
        host, port = where.removeprefix("http://").split(":")
        return http.client.HTTPConnection(host, int(port), timeout=10)
    return _UnixConnection(where)


def _post(
    where: str, path: str, body: bytes, headers: dict[str, str], method: str = "POST"
) -> _Answer:
    connection = _connection(where)
    try:
        connection.request(method, path, body=body, headers=headers)
        answer = connection.getresponse()
        return _Answer(answer.status, {k.lower(): v for k, v in answer.getheaders()}, answer.read())
    finally:
        connection.close()


def _steady(body: bytes) -> bytes:
    """The answer without its clock (the scripted server stamps each answer)."""
    return re.sub(rb'"(created|created_at)": \d+', rb'"\1": 0', body)


@contextmanager
def _through(
    model: ScriptedModel, api: Api, folder: Path | None = None, **hooks: Any
) -> Iterator[str]:
    gate = Gateway(model.origin, KEYS[api], **hooks)
    where = gate.start(folder)
    try:
        yield where
    finally:
        gate.stop()


def _shape(doc: Any) -> Any:
    """A JSON document's keys, nested, without its values."""
    if isinstance(doc, dict):
        return {k: _shape(v) for k, v in doc.items()}  # pyright: ignore[reportUnknownVariableType]
    return type(doc).__name__


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_api_answers_through_the_gateway_with_the_bytes_of_a_direct_answer(case: str) -> None:
    api, path, doc, headers = CASES[case]
    body = json.dumps(doc).encode()
    headers = {"content-type": "application/json", **headers}
    seen: list[Exchange] = []
    done: list[tuple[int, int]] = []
    with serving(SCRIPT) as direct, serving(SCRIPT) as upstream:
        expected = _post(direct.origin, path, body, headers)
        with _through(
            upstream,
            api,
            on_request=lambda e: seen.append(e),
            on_done=lambda e, status, seconds: done.append((e.seq, status)),
        ) as where:
            got = _post(where, path, body, headers)
        assert expected.status == got.status == 200
        assert _steady(got.body) == _steady(expected.body)
        assert got.headers["content-type"] == expected.headers["content-type"]
        [request] = upstream.requests
    # the upstream got the real key, in the API's own header, and never the agent's
    sent = json.dumps([request.path, request.headers])
    assert PLACEHOLDER not in sent
    [(name, value)] = KEYS[api].items()
    assert request.headers[name] == value
    assert request.body == doc
    # the hooks saw the request with its secrets redacted, and its end
    [exchange] = seen
    assert (exchange.api, exchange.method, exchange.body, exchange.seq) == (api, "POST", body, 1)
    assert PLACEHOLDER not in json.dumps([exchange.path, exchange.headers])
    assert done == [(1, 200)]


def test_a_request_without_a_credential_gets_the_real_one_and_the_base_path_is_kept() -> None:
    with serving(SCRIPT) as model:
        gate = Gateway(f"{model.origin}/v1", {"authorization": f"Bearer {REAL}"})
        where = gate.start()
        try:
            body = json.dumps({"model": "m", "messages": [], "tools": [{}]}).encode()
            answer = _post(where, "/chat/completions", body, {"content-type": "application/json"})
        finally:
            gate.stop()
        assert answer.status == 200
        [request] = model.requests
        assert (request.path, request.headers["authorization"]) == (
            "/v1/chat/completions",
            f"Bearer {REAL}",
        )


@pytest.mark.parametrize("case", ["anthropic-sse", "responses-sse", "gemini-sse"])
def test_a_refusal_reaches_the_client_in_the_vendors_error_shape_and_nothing_goes_upstream(
    case: str,
) -> None:
    api, path, doc, headers = CASES[case]
    body = json.dumps(doc).encode()
    done: list[int] = []
    with serving(SCRIPT, error=(429, "vendor says no")) as vendor, serving(SCRIPT) as upstream:
        theirs = _post(vendor.origin, path, body, headers)
        with _through(
            upstream,
            api,
            on_request=lambda e: Refusal.of(e.api, 429, "the iteration's token cap is reached"),
            on_done=lambda e, status, seconds: done.append(status),
        ) as where:
            ours = _post(where, path, body, headers)
        assert upstream.requests == []
    assert ours.status == theirs.status == 429
    assert ours.headers["content-type"] == "application/json"
    assert _shape(json.loads(ours.body)) == _shape(json.loads(theirs.body))
    assert "token cap" in ours.body.decode()
    assert done == []


def test_the_caps_refusal_reaches_the_client_with_its_no_retry_header() -> None:
    """The wire core's refusal (records/wire.py) goes out through the gateway whole: its
    status, the vendor's body and `x-should-retry: false`."""
    api, path, doc, headers = CASES["anthropic-sse"]
    with serving(SCRIPT) as upstream:
        with _through(
            upstream, api, on_request=lambda e: wire.refusal(e.api, "the cap of 10 tokens")
        ) as where:
            ours = _post(where, path, json.dumps(doc).encode(), headers)
        assert upstream.requests == []
    assert ours.status == wire.REFUSAL_STATUS
    assert ours.headers["x-should-retry"] == "false"
    assert json.loads(ours.body)["error"]["type"] == "permission_error"
    assert "cap of 10 tokens" in ours.body.decode()


def test_on_chunk_sees_the_stream_in_order_before_it_ends() -> None:
    api, path, doc, headers = CASES["anthropic-sse"]
    release = threading.Event()
    pieces: list[bytes] = []
    ends: list[int] = []
    with (
        serving(SCRIPT, gate=release, lifetime_s=30) as model,
        _through(
            model,
            api,
            on_chunk=lambda e, piece: pieces.append(piece),
            on_done=lambda e, status, seconds: ends.append(status),
        ) as where,
    ):
        connection = _connection(where)
        connection.request("POST", path, body=json.dumps(doc).encode(), headers=headers)
        answer = connection.getresponse()
        assert answer.getheader("transfer-encoding") == "chunked"
        first = answer.read1(65536)
        # the model holds its last event: the first already reached both hook and client
        assert first.startswith(b"event: message_start")
        assert b"message_stop" not in b"".join(pieces)
        assert pieces and first.startswith(pieces[0])
        assert ends == []
        release.set()
        rest = answer.read()
        connection.close()
        deadline = time.monotonic() + 5
        while not ends and time.monotonic() < deadline:
            time.sleep(0.01)
    assert b"".join(pieces) == first + rest
    assert (first + rest).rstrip().endswith(b'data: {"type": "message_stop"}')
    assert ends == [200]


def test_a_unix_socket_in_the_kernels_folder_serves_and_is_the_users_alone(tmp_path: Path) -> None:
    folder = tmp_path / "gw"
    api, path, doc, headers = CASES["responses-sse"]
    with serving(SCRIPT) as model:
        gate = Gateway(model.origin, KEYS[api])
        where = gate.start(folder)
        try:
            assert Path(where) == folder / gateway_module.SOCKET_NAME
            assert Path(where).stat().st_mode & 0o777 == 0o600
            assert folder.stat().st_mode & 0o777 == 0o700
            answer = _post(where, path, json.dumps(doc).encode(), headers)
            assert answer.status == 200 and b"response.completed" in answer.body
        finally:
            gate.stop()
        assert not Path(where).exists()
        assert model.requests[0].headers["authorization"] == f"Bearer {REAL}"
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    with pytest.raises(PermissionError):
        Gateway("http://127.0.0.1:1", {}).start(shared)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("case", ["anthropic-sse", "chat-json", "gemini-json"])
def test_an_upstream_that_fails_gives_the_client_a_502_in_the_apis_shape(case: str) -> None:
    api, path, doc, headers = CASES[case]
    done: list[int] = []
    gate = Gateway(
        f"http://127.0.0.1:{_closed_port()}",
        KEYS[api],
        on_done=lambda e, status, seconds: done.append(status),
    )
    where = gate.start()
    try:
        answer = _post(where, path, json.dumps(doc).encode(), headers)
    finally:
        gate.stop()
    assert answer.status == 502
    error = json.loads(answer.body)
    assert error == json.loads(gateway_module.error_body(api, 502, error_message(error)))
    assert "the model upstream failed" in answer.body.decode()
    assert done == [502]


def error_message(doc: dict[str, Any]) -> str:
    return str(doc["error"]["message"])


def test_what_the_gateway_does_not_forward_is_refused_before_the_upstream(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(gateway_module, "GATEWAY_REQUEST_MAX", 1000)
    seen: list[Exchange] = []
    with serving(SCRIPT) as model, _through(model, "openai-chat", on_request=seen.append) as where:
        # other endpoints of the vendor, which the real key would open (files, threads), by
        # name, through dot segments or escapes the upstream would resolve
        others = [
            _post(where, path, b"{}", {"content-type": "application/json"}).status
            for path in (
                "/v1/files",
                "/v1/threads/t1/messages",
                "/v1/files/../messages",
                "/v1/files/..%2F..%2Fv1/chat/completions",
                "/v1beta/models/x/../../files:generateContent",
            )
        ]
        # a chunked request within the bound goes through whole
        small = json.dumps({"model": "m", "messages": [], "tools": [{}]}).encode()
        connection = _connection(where)
        connection.request(
            "POST", "/v1/chat/completions", body=iter([small[:5], small[5:]]), encode_chunked=True
        )
        fine = connection.getresponse()
        fine_status = fine.status
        fine.read()
        connection.close()
        # a request past the bound, in chunks; then by length: the run is over, it is refused unread
        big = json.dumps({"messages": [], "pad": "x" * 2000}).encode()
        connection = _connection(where)
        connection.request(
            "POST", "/v1/chat/completions", body=iter([big[:900], big[900:]]), encode_chunked=True
        )
        chunked = connection.getresponse()
        chunked_status = chunked.status
        connection.close()
        long = _post(where, "/v1/chat/completions", small, {"content-type": "application/json"})
        forwarded = [r.body for r in model.requests]
    assert others == [404] * 5
    assert (long.status, chunked_status, fine_status) == (413, 413, 200)
    assert forwarded == [json.loads(small)]
    assert [e.body for e in seen] == [small]


def test_stop_ends_a_stream_under_way_and_leaves_no_thread() -> None:
    api, path, doc, headers = CASES["chat-sse"]
    before = threading.active_count()
    release = threading.Event()
    with serving(SCRIPT, gate=release, lifetime_s=30) as model:
        gate = Gateway(model.origin, KEYS[api])
        where = gate.start()
        connection = _connection(where)
        connection.request("POST", path, body=json.dumps(doc).encode(), headers=headers)
        answer = connection.getresponse()
        assert answer.read1(65536)
        started = time.monotonic()
        gate.stop()
        assert time.monotonic() - started < 5
        connection.close()
        release.set()
    deadline = time.monotonic() + 5
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert threading.active_count() <= before


def test_on_chunk_can_cut_an_answer_and_a_failing_hook_sends_nothing_upstream() -> None:
    api, path, doc, headers = CASES["responses-sse"]
    body = json.dumps(doc).encode()
    release = threading.Event()
    release.set()
    with serving(SCRIPT, gate=release) as model:
        # the budget's cut: the piece that passes the cap is not sent, the stream ends there
        with _through(model, api, on_chunk=lambda e, piece: b"completed" not in piece) as where:
            connection = _connection(where)
            connection.request("POST", path, body=body, headers=headers)
            answer = connection.getresponse()
            with pytest.raises(http.client.IncompleteRead) as cut:
                answer.read()
            connection.close()
        assert b"response.created" in cut.value.partial
        assert b"response.completed" not in cut.value.partial

        def broken(exchange: Exchange) -> Refusal | None:
            raise RuntimeError("the recorder's disk is full")

        with _through(model, api, on_request=broken) as where:
            failed = _post(where, path, body, headers)
        assert len(model.requests) == 1
    assert failed.status == 500
    assert "disk is full" in json.loads(failed.body)["error"]["message"]


def test_no_credential_of_the_agent_reaches_the_upstream_whatever_header_carries_it() -> None:
    api, path, doc, _ = CASES["chat-json"]
    carried = {
        name: f"Bearer {PLACEHOLDER}"
        for name in ("authorization", "x-api-key", "x-goog-api-key", "api-key", "cookie")
    }
    with serving(SCRIPT) as model, _through(model, api) as where:
        answer = _post(where, f"{path}?key={PLACEHOLDER}", json.dumps(doc).encode(), carried)
        [request] = model.requests
    assert answer.status == 200
    assert request.headers["authorization"] == f"Bearer {REAL}"
    assert PLACEHOLDER not in json.dumps([request.path, request.headers])


class _RawUpstream:
    """An upstream that counts its connections and, if asked, closes each after one answer
    without saying so (as a vendor's idle timeout does to a kept-alive connection)."""

    def __init__(
        self, hang_up: bool, answer: bytes = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"
    ) -> None:
        self.hang_up = hang_up
        self.answer = answer
        self.connections = 0
        self.requests = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.origin = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._answer, args=(sock,), daemon=True).start()

    def _answer(self, sock: socket.socket) -> None:
        with sock, sock.makefile("rb") as reader:
            while True:
                head = [reader.readline()]
                while head[-1] not in (b"\r\n", b""):
                    head.append(reader.readline())
                if head[-1] == b"":
                    return
                length = next(
                    int(line.split(b":")[1])
                    for line in head
                    if line.lower().startswith(b"content-length")
                )
                reader.read(length)
                self.requests += 1
                sock.sendall(self.answer)
                if self.hang_up:
                    time.sleep(0.05)  # the answer is read and the connection idle before it goes
                    return

    def close(self) -> None:
        self._listener.close()


@pytest.mark.parametrize("hang_up", [False, True])
def test_the_upstream_connection_is_kept_alive_and_a_stale_one_is_replaced(hang_up: bool) -> None:
    api, path, doc, headers = CASES["chat-json"]
    upstream = _RawUpstream(hang_up)
    gate = Gateway(upstream.origin, KEYS[api])
    where = gate.start()
    try:
        answers = []
        for _ in range(3):
            answers.append(_post(where, path, json.dumps(doc).encode(), headers).status)
            time.sleep(0.1)
    finally:
        gate.stop()
        upstream.close()
    assert answers == [200, 200, 200]
    # each request answered once: a retry happens only where no answer came
    assert upstream.requests == 3
    assert upstream.connections == (3 if hang_up else 1)


def test_an_upstream_that_hangs_up_mid_answer_cuts_the_agents_answer_and_says_502() -> None:
    api, path, doc, headers = CASES["chat-json"]
    upstream = _RawUpstream(True, b'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"id"')
    done: list[int] = []
    gate = Gateway(upstream.origin, KEYS[api], on_done=lambda e, status, s: done.append(status))
    where = gate.start()
    try:
        connection = _connection(where)
        connection.request("POST", path, body=json.dumps(doc).encode(), headers=headers)
        answer = connection.getresponse()
        with pytest.raises(http.client.IncompleteRead):
            answer.read()
        connection.close()
    finally:
        gate.stop()
        upstream.close()
    assert done == [502]


def test_a_kept_alive_upstream_connection_does_not_wait_for_a_delayed_ack() -> None:
    # the scripted server writes its head and body apart without TCP_NODELAY, as many a
    # self-hosted upstream does: on a kept-alive connection that stalled each answer 40 ms
    api, path, doc, headers = CASES["chat-json"]
    body = json.dumps(doc).encode()
    with serving(SCRIPT) as model, _through(model, api) as where:
        _post(where, path, body, headers)
        times: list[float] = []
        for _ in range(7):
            started = time.monotonic()
            assert _post(where, path, body, headers).status == 200
            times.append(time.monotonic() - started)
    assert sorted(times)[3] < 0.03, times


def test_hop_by_hop_headers_stay_on_their_own_connection() -> None:
    api, path, doc, _ = CASES["chat-json"]
    headers = {
        "connection": "keep-alive, x-hop",
        "x-hop": "1",
        "keep-alive": "timeout=5",
        "te": "trailers",
        "upgrade": "h2c",
        "x-stainless-lang": "js",
    }
    answer_head = b"HTTP/1.1 200 OK\r\nConnection: x-drop\r\nX-Drop: 1\r\nX-Kept: 1\r\n"
    upstream = _RawUpstream(False, answer_head + b"Content-Length: 2\r\n\r\n{}")
    with serving(SCRIPT) as model, _through(model, api) as where:
        _post(where, path, json.dumps(doc).encode(), headers)
        [request] = model.requests
    gate = Gateway(upstream.origin, KEYS[api])
    try:
        answer = _post(gate.start(), path, json.dumps(doc).encode(), {})
    finally:
        gate.stop()
        upstream.close()
    assert not {"x-hop", "keep-alive", "te", "upgrade"} & set(request.headers)
    assert request.headers["x-stainless-lang"] == "js"
    assert "x-drop" not in answer.headers and answer.headers["x-kept"] == "1"


def _raw_upload(where: str, size: int, sent: int) -> socket.socket:
    """A connection to the gateway's socket sending the head of a `size`-byte body and `sent`
    bytes of it (then held open)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(where)  # blocking, as the forwarder's: a full backlog waits
    sock.settimeout(10)
    head = f"POST /v1/chat/completions HTTP/1.1\r\nHost: m\r\nContent-Length: {size}\r\n\r\n"
    sock.sendall(head.encode() + b"x" * sent)
    return sock


def _read_to_end(sock: socket.socket) -> bytes:
    got = b""
    with contextlib.suppress(ConnectionResetError):  # closed with its body unread
        while piece := sock.recv(65536):
            got += piece
    return got


def test_the_gateway_serves_eight_connections_at_once_and_the_next_waits(tmp_path: Path) -> None:
    """Its own bound, kernel side: eight connections held open take every slot; a ninth gets
    its answer only once one of them closes."""
    api, path, doc, headers = CASES["chat-json"]
    with serving(SCRIPT) as model, _through(model, api, tmp_path / "gw") as where:
        held = [_raw_upload(where, 100, 10) for _ in range(8)]
        answers: list[int] = []
        waiting = threading.Thread(
            target=lambda: answers.append(
                _post(where, path, json.dumps(doc).encode(), headers).status
            )
        )
        waiting.start()
        time.sleep(1.0)
        before = list(answers)
        held.pop().close()
        waiting.join(10)
        for sock in held:
            sock.close()
    assert before == []  # no slot: not served
    assert answers == [200]


def test_request_bytes_held_past_the_bound_end_the_run_and_free_the_daemons_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Uploads held open take the gateway's bound of request bytes in memory: the one that
    passes it ends the run (`on_limit`), every open connection is closed, and each later
    request is refused before its body is read."""
    monkeypatch.setattr(gateway_module, "GATEWAY_HELD_MAX", 300 * 1024)
    api = CASES["chat-json"][0]
    limits: list[str] = []

    def on_limit(api: Api, reason: str) -> Refusal:
        limits.append(reason)
        return wire.refusal(api, reason, "RUN_LIMIT")

    with (
        serving(SCRIPT) as model,
        _through(model, api, tmp_path / "gw", on_limit=on_limit) as where,
    ):
        held = [_raw_upload(where, 200 * 1024, 100 * 1024) for _ in range(2)]
        time.sleep(0.5)
        third = _raw_upload(where, 200 * 1024, 150 * 1024)
        answer = _read_to_end(third)
        closed = [sock.recv(1) for sock in held]  # severed: the end of their stream
        with _raw_upload(where, 10, 10) as after:
            later = _read_to_end(after)
        third.close()
        for sock in held:
            sock.close()
        assert model.requests == []
    assert answer.startswith(b"HTTP/1.1 403") and b"RUN_LIMIT" in answer
    assert closed == [b"", b""]
    assert later.startswith(b"HTTP/1.1 403") and b"RUN_LIMIT" in later
    assert len(limits) == 2 and "300 KiB" not in limits[0] and "held in the daemon" in limits[0]


def test_a_compressed_request_body_is_not_forwarded() -> None:
    """The gateway counts a prompt from the bytes it read: a compressed body's bytes are not
    its prompt."""
    api, path, doc, headers = CASES["chat-json"]
    with serving(SCRIPT) as model, _through(model, api) as where:
        body = gzip.compress(json.dumps(doc).encode())
        answer = _post(where, path, body, {**headers, "content-encoding": "gzip"})
        assert model.requests == []
    assert answer.status == 415 and "gzip" in answer.body.decode()
