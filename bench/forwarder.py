"""What the model-only sandbox's forwarder adds: per request, per byte, and at an agent's start.

    .venv/bin/python -m bench.forwarder                 # 500 requests, 32 MiB, 20 starts

Against a stand-in gateway (HTTP on a Unix socket, as the kernel's serves it):
  direct     a new connection per request straight to the Unix socket;
  forwarded  the same through the forwarder on 127.0.0.1 (on the host: the relay alone);
and the throughput of one 32 MiB answer both ways; then the median start of a sandboxed
`/bin/true` with the network kept (today's agent profile) and model-only (its own network
namespace, the socket bound in, the forwarder's interpreter started first).
"""

from __future__ import annotations

import argparse
import http.client
import http.server
import os
import shutil
import socket
import socketserver
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kernel.config import GuardConfig
from kernel.isolation import jails
from kernel.isolation.paths import Paths

_FORWARDER = Path(jails.__file__).with_name("forwarder.py")
_BIG = b"x" * (32 << 20)


class _Gateway(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""

    def do_GET(self) -> None:
        body = _BIG if self.path == "/big" else b'{"ok": true}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _UnixHTTP(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


def _unix(path: str) -> http.client.HTTPConnection:
    class _Conn(http.client.HTTPConnection):
        def connect(self) -> None:
            self.sock = socket.socket(socket.AF_UNIX)
            self.sock.connect(path)

    return _Conn("gateway")


def _requests(make: Callable[[], http.client.HTTPConnection], count: int) -> tuple[float, float]:
    """(seconds per request, MB/s of one big answer)."""
    started = time.perf_counter()
    for _ in range(count):
        conn = make()
        conn.request("GET", "/")
        conn.getresponse().read()
        conn.close()
    each = (time.perf_counter() - started) / count
    conn = make()
    started = time.perf_counter()
    conn.request("GET", "/big")
    size = len(conn.getresponse().read())
    conn.close()
    return each, size / (time.perf_counter() - started) / 1e6


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _start(folder: Path, network: jails.Network, gateway: Path) -> float:
    """Seconds one sandboxed `/bin/true` takes from start to end."""
    run = jails.agent_sandbox(
        ["/bin/true"],
        paths=Paths(root=folder / "repo", common=folder / "repo" / ".git"),
        guard=GuardConfig(),
        writable=(folder / "work",),
        readonly=(),
        home=folder / "home",
        home_binds=(),
        cwd=folder / "work",
        network=network,
        gateway=gateway if network == "model-only" else None,
    )
    started = time.perf_counter()
    subprocess.run(run.argv, check=True, env={**os.environ, **run.env})
    return time.perf_counter() - started


def main() -> None:
    """Print the figures."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--starts", type=int, default=20)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="seed-fwd-", dir="/tmp"))
    try:
        for name in ("repo", "home", "work"):
            (folder / name).mkdir()
        sock = folder / "gw.sock"
        server = _UnixHTTP(str(sock), _Gateway)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        direct = _requests(lambda: _unix(str(sock)), args.requests)
        port = _free_port()
        argv = [sys.executable, str(_FORWARDER), "--listen", f"127.0.0.1:{port}"]
        relay = subprocess.Popen([*argv, "--to", str(sock), "--", "sleep", "600"])
        time.sleep(0.3)
        try:
            through = _requests(
                lambda: http.client.HTTPConnection("127.0.0.1", port), args.requests
            )
        finally:
            relay.terminate()
            relay.wait()
        print(f"requests: {args.requests}, one at a time, a new connection each")
        print(f"  direct     {direct[0] * 1e3:7.3f} ms each, {direct[1]:6.0f} MB/s")
        print(f"  forwarded  {through[0] * 1e3:7.3f} ms each, {through[1]:6.0f} MB/s")
        print(f"  added      {(through[0] - direct[0]) * 1e3:7.3f} ms per request")
        starts: dict[str, list[float]] = {"full": [], "model-only": []}
        for _ in range(args.starts):
            for network in ("full", "model-only"):
                starts[network].append(_start(folder, network, sock))
        full, model = (statistics.median(starts[n]) * 1e3 for n in ("full", "model-only"))
        print(f"sandboxed /bin/true, median of {args.starts}: full {full:.1f} ms, ", end="")
        print(f"model-only {model:.1f} ms (+{model - full:.1f} ms per agent start)")
        server.shutdown()
        server.server_close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
