"""A minimal Chrome DevTools Protocol client over a local websocket, stdlib only (for tests).

Starts a headless Chromium on a free local port, talks to one page target, and ends the
browser's whole process group when done. Enough to navigate, evaluate and read the DOM.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import socket
import struct
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any, Self

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)


class _Socket:
    """Client side of a websocket (RFC 6455): masked text frames out, frames in."""

    def __init__(self, host: str, port: int, path: str, timeout: float) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(
            (
                f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                "Sec-WebSocket-Version: 13\r\n\r\n"
            ).encode()
        )
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("the browser closed the websocket handshake")
            head += chunk
        status = head.split(b"\r\n", 1)[0]
        if b" 101 " not in status:
            raise ConnectionError(f"websocket refused: {status!r}")
        self.pending = head.split(b"\r\n\r\n", 1)[1]

    def _read(self, n: int) -> bytes:
        while len(self.pending) < n:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("the browser closed the websocket")
            self.pending += chunk
        data, self.pending = self.pending[:n], self.pending[n:]
        return data

    def send(self, text: str) -> None:
        payload = text.encode()
        mask = os.urandom(4)
        size = len(payload)
        if size < 126:
            header = struct.pack("!BB", 0x81, 0x80 | size)
        elif size < 1 << 16:
            header = struct.pack("!BBH", 0x81, 0x80 | 126, size)
        else:
            header = struct.pack("!BBQ", 0x81, 0x80 | 127, size)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(header + mask + masked)

    def receive(self) -> str:
        message = b""
        while True:
            first, second = self._read(2)
            size = second & 0x7F
            if size == 126:
                (size,) = struct.unpack("!H", self._read(2))
            elif size == 127:
                (size,) = struct.unpack("!Q", self._read(8))
            body = self._read(size)
            opcode = first & 0x0F
            if opcode == 0x8:
                raise ConnectionError("the browser closed the websocket")
            if opcode in (0x9, 0xA):  # ping, pong: not part of a message
                continue
            message += body
            if first & 0x80:
                return message.decode()

    def close(self) -> None:
        self.sock.close()


class Browser:
    """One headless Chromium with one page, driven over the DevTools protocol."""

    def __init__(self, executable: str, profile: Path, timeout: float = 60.0) -> None:
        self.timeout = timeout
        profile.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [
                executable,
                *FLAGS,
                f"--user-data-dir={profile}",
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + timeout
        while not (port_file.exists() and port_file.read_text().strip()):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.close()
                raise RuntimeError("chromium did not open its DevTools port")
            time.sleep(0.05)
        self.port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/json/list", timeout=10) as r:
            targets: list[dict[str, Any]] = json.loads(r.read())
        page = next(t for t in targets if t.get("type") == "page")
        path = str(page["webSocketDebuggerUrl"]).split(str(self.port), 1)[1]
        self.ws = _Socket("127.0.0.1", self.port, path, timeout)
        self.next_id = 1
        self.events: list[dict[str, Any]] = []

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """Send one command and return its result (events met meanwhile are kept)."""
        ident = self.next_id
        self.next_id += 1
        self.ws.send(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            message: dict[str, Any] = json.loads(self.ws.receive())
            if message.get("id") == ident:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return dict(message.get("result") or {})
            self.events.append(message)

    def wait_event(self, method: str) -> dict[str, Any]:
        """The next event of this kind (or one already received)."""
        for event in self.events:
            if event.get("method") == method:
                self.events.remove(event)
                return event
        while True:
            message: dict[str, Any] = json.loads(self.ws.receive())
            if message.get("method") == method:
                return message
            self.events.append(message)

    def open(self, url: str) -> None:
        """Navigate and wait for the load event."""
        self.call("Page.enable")
        self.call("Page.navigate", url=url)
        self.wait_event("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def html(self) -> str:
        """The document's outer HTML, read through the DOM domain (works with script off)."""
        root = self.call("DOM.getDocument", depth=-1)["root"]
        return str(self.call("DOM.getOuterHTML", nodeId=root["nodeId"])["outerHTML"])

    def screenshot(self) -> bytes:
        """A PNG of the viewport."""
        return base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"])

    def close(self) -> None:
        """End the browser and everything it started."""
        ws = getattr(self, "ws", None)
        if ws is not None:
            ws.close()
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
