"""A model-only agent on another host: its worker's relay reaches the kernel's gateway through
the kernel's door with the candidate's token; the door lets no other token through."""

from __future__ import annotations

import contextlib
import socket
import socketserver
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernel.isolation import relay, remote, worker
from kernel.isolation.paths import discover
from tests.support import git, make_repo

ANSWER = b"hello from the gateway"


class _Gateway(socketserver.ThreadingUnixStreamServer):
    """A stand-in for the kernel's gateway on its Unix socket: answers every request alike
    and counts the connections that reached it."""

    daemon_threads = True
    reached = 0


class _Answer(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        server = self.server
        assert isinstance(server, _Gateway)
        server.reached += 1
        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
            pass
        head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(ANSWER)}\r\nConnection: close\r\n\r\n"
        self.wfile.write(head.encode() + ANSWER)


@pytest.fixture
def gateway() -> Iterator[tuple[_Gateway, Path]]:
    folder = Path(tempfile.mkdtemp(prefix="seed-gw-"))
    server = _Gateway(str(folder / "gateway.sock"), _Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server, folder / "gateway.sock"
    server.shutdown()
    server.server_close()
    (folder / "gateway.sock").unlink(missing_ok=True)
    folder.rmdir()


def _ask(address: tuple[str, int], hello: bytes) -> bytes:
    with socket.create_connection(address, timeout=10) as conn:
        conn.sendall(hello + b"GET / HTTP/1.1\r\nHost: model\r\n\r\n")
        answer = b""
        # a refused connection is closed unanswered (reset: its request was never read)
        with contextlib.suppress(ConnectionResetError):
            while chunk := conn.recv(4096):
                answer += chunk
        return answer


def test_the_door_lets_only_an_open_token_through(gateway: tuple[_Gateway, Path]) -> None:
    server, path = gateway
    door = relay.Door()
    token = relay.new_token()
    try:
        door.open(token, path)
        assert _ask(door.address, b"0" * 64 + b"\n") == b""
        assert _ask(door.address, token[:-1].encode() + b"\n") == b""
        assert _ask(door.address, b"\n") == b""
        assert server.reached == 0
        assert _ask(door.address, token.encode() + b"\n").endswith(ANSWER)
        assert server.reached == 1
        door.close(token)  # the candidate is over
        assert _ask(door.address, token.encode() + b"\n") == b""
        assert server.reached == 1
    finally:
        door.stop()


def test_each_token_reaches_its_own_candidates_gateway_and_an_ended_ones_none(
    gateway: tuple[_Gateway, Path],
) -> None:
    """Two candidates at once: a token leads only to its own gateway; once its candidate has
    ended, its token (in another worker's hands, say) is refused while the other still passes."""
    first, first_path = gateway
    folder = Path(tempfile.mkdtemp(prefix="seed-gw-"))
    second = _Gateway(str(folder / "gateway.sock"), _Answer)
    threading.Thread(target=second.serve_forever, daemon=True).start()
    door, one, two = relay.Door(), relay.new_token(), relay.new_token()
    try:
        door.open(one, first_path)
        door.open(two, folder / "gateway.sock")
        assert _ask(door.address, two.encode() + b"\n").endswith(ANSWER)
        assert (first.reached, second.reached) == (0, 1)
        assert _ask(door.address, one.encode() + b"\n").endswith(ANSWER)
        assert (first.reached, second.reached) == (1, 1)
        door.close(one)
        assert _ask(door.address, one.encode() + b"\n") == b""
        assert _ask(door.address, two.encode() + b"\n").endswith(ANSWER)
        assert (first.reached, second.reached) == (1, 2)
    finally:
        door.stop()
        second.shutdown()
        second.server_close()
        (folder / "gateway.sock").unlink(missing_ok=True)
        folder.rmdir()


AGENT = r"""
import os, pathlib, sys, urllib.request
answer = urllib.request.urlopen(os.environ["SEED_MODEL_BASE_URL"] + "/v1/messages", timeout=20).read()
(pathlib.Path(sys.argv[1]) / "answer.txt").write_bytes(answer)
"""


def test_a_model_only_agent_on_a_worker_reaches_the_gateway_through_the_relay(
    gateway: tuple[_Gateway, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bwrap: None
) -> None:
    server, path = gateway
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    paths = discover(make_repo(tmp_path / "repo", {"a.txt": "a\n"}))
    base = git(paths.root, "rev-parse", "HEAD").strip()
    door, token = relay.Door(), relay.new_token()
    door.open(token, path)
    host, port = door.address
    job = remote.Job(
        repository="demo",
        candidate="c1",
        base=base,
        argv=(sys.executable, "-c", AGENT, "{worktree}"),
        timeout_s=60.0,
        network="model-only",
        relay=f"{host}:{port}",
        token=token,
        cache=str(tmp_path / "worker"),
    )
    try:
        got = worker.work(job, remote.bundle(paths, base, "t"))
        # the same job with a wrong token: the agent reaches nothing
        wrong = worker.work(
            remote.Job(**{**job.__dict__, "candidate": "c2", "token": relay.new_token()}), b""
        )
    finally:
        door.stop()
    assert got.exit_code == 0, got.log
    assert ANSWER in got.patch and server.reached == 1
    assert wrong.exit_code != 0 and b"answer.txt" not in wrong.patch
    assert token not in got.log + wrong.log
