"""A model-only agent on another host reaches the kernel's model gateway through a relay.

Two ends, standard library only. The kernel's `Door` listens on TCP; each connection first
sends one line, its candidate's token, and a token the door holds open is piped to that
candidate's gateway socket; any other connection is closed unanswered, before a byte reaches
a gateway. A worker's `Relay` is a Unix socket (bound into the agent's sandbox as the gateway
socket) whose every connection goes to the door with the token first. The token lives in
the worker's process, never in the sandbox; the gateway still holds the keys, counts the
usage and holds the caps, so usage comes from the kernel, not from the worker.
"""

from __future__ import annotations

import contextlib
import hmac
import secrets
import socket
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

TOKEN_CHARS = 64
"""A token: 32 random bytes, as hex."""
_HELLO_S = 10.0
"""Seconds a connection has to send its token."""
_CHUNK = 64 * 1024


def new_token() -> str:
    """A fresh token for one candidate."""
    return secrets.token_hex(TOKEN_CHARS // 2)


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    """Copy until the source ends, then end the sink's writing side."""
    with contextlib.suppress(OSError):
        while chunk := source.recv(_CHUNK):
            sink.sendall(chunk)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)


def _join(a: socket.socket, b: socket.socket) -> None:
    """Both directions piped until both end; then both closed."""
    back = threading.Thread(target=_pipe, args=(b, a), daemon=True)
    back.start()
    _pipe(a, b)
    back.join()
    a.close()
    b.close()


def _serve(listener: socket.socket, handle: Callable[[socket.socket], None]) -> threading.Thread:
    """Accept in a thread of its own, each connection handled in another."""

    def loop() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return  # closed: the end is stopping
            threading.Thread(target=handle, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    return thread


class Door:
    """The kernel's end: TCP in, each known token's connection to its gateway socket."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self._open: dict[str, Path] = {}
        self._lock = threading.Lock()
        self._listener = socket.create_server((host, port))
        self.address: tuple[str, int] = self._listener.getsockname()[:2]
        _serve(self._listener, self._handle)

    def open(self, token: str, gateway: Path) -> None:
        """Let connections with this token through to this gateway socket."""
        with self._lock:
            self._open[token] = gateway

    def close(self, token: str) -> None:
        """The candidate is over: its token lets nothing through any more."""
        with self._lock:
            self._open.pop(token, None)

    def stop(self) -> None:
        """Stop listening (connections under way end as their ends close)."""
        with contextlib.suppress(OSError):
            self._listener.close()

    def _gateway(self, said: bytes) -> Path | None:
        """The gateway the token names ('' or a wrong one: none), compared in constant time."""
        with self._lock:
            known = list(self._open.items())
        found = None
        for token, gateway in known:
            if hmac.compare_digest(said, token.encode()):
                found = gateway
        return found

    def _handle(self, conn: socket.socket) -> None:
        conn.settimeout(_HELLO_S)
        line = b""
        with contextlib.suppress(OSError):
            while not line.endswith(b"\n") and len(line) <= TOKEN_CHARS:
                chunk = conn.recv(1)
                if not chunk:
                    break
                line += chunk
        gateway = self._gateway(line.strip()) if line.endswith(b"\n") else None
        if gateway is None:
            conn.close()  # unanswered: a wrong token learns nothing
            return
        conn.settimeout(None)
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            upstream.connect(str(gateway))
        except OSError:
            conn.close()
            upstream.close()
            return
        _join(conn, upstream)


class Relay:
    """A worker's end: a Unix socket whose connections go to the door, the token first."""

    def __init__(self, door: tuple[str, int], token: str) -> None:
        self._door, self._token = door, token
        # short: a Unix socket's path is at most 107 bytes
        self._folder = Path(tempfile.mkdtemp(prefix="seed-relay-"))
        self.socket = self._folder / "model.sock"
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(str(self.socket))
        self._listener.listen()
        _serve(self._listener, self._handle)

    def stop(self) -> None:
        """Stop listening and remove the socket."""
        with contextlib.suppress(OSError):
            self._listener.close()
        self.socket.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            self._folder.rmdir()

    def _handle(self, conn: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self._door, timeout=_HELLO_S)
            upstream.sendall(f"{self._token}\n".encode())
            upstream.settimeout(None)
        except OSError:
            conn.close()
            return
        _join(conn, upstream)


def parse(address: str) -> tuple[str, int]:
    """ "host:port" as the door's address (ValueError when it is not one)."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"not host:port: {address!r}")
    return host.strip("[]"), int(port)
