"""The latency the model gateway adds per request, against the scripted model server.

    .venv/bin/python -m bench.gateway                      # loopback, the worst case
    .venv/bin/python -m bench.gateway --think-ms 200       # a model that takes 200 ms to answer

For a non-streamed answer (chat completions, JSON) and a streamed one (Anthropic Messages,
SSE) it times, median of --requests requests in rotating order, each on a fresh connection:
  direct   the client straight to the scripted server;
  tcp      through the gateway on 127.0.0.1;
  unix     through the gateway on its Unix socket (as the sandbox's forwarder will reach it);
and prints the medians, the ratios to `direct` and the load average. The issue aims at 1.05
for a whole run; a loopback request that the server answers at once is the worst case (all
of it is overhead), --think-ms shows a request whose answer takes the model some time.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import statistics
import tempfile
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from kernel.isolation.gateway import Gateway
from tests.agents_real.model import ScriptedModel, call, say

SCRIPT = [call("shell", cmd="true"), say("Done.")]
KINDS: dict[str, tuple[str, dict[str, Any], dict[str, str]]] = {
    "json": (
        "/v1/chat/completions",
        {"model": "m", "messages": [], "tools": [{}]},
        {"authorization": "Bearer placeholder", "content-type": "application/json"},
    ),
    "sse": (
        "/v1/messages",
        {"model": "m", "stream": True, "messages": [], "tools": [{}]},
        {"x-api-key": "placeholder", "content-type": "application/json"},
    ),
}


class _Unix(http.client.HTTPConnection):
    def __init__(self, path: str) -> None:
        super().__init__("localhost", timeout=30)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(self._path)
        self.sock = sock


def _tcp(origin: str) -> Callable[[], http.client.HTTPConnection]:
    host, port = origin.removeprefix("http://").split(":")
    return lambda: http.client.HTTPConnection(host, int(port), timeout=30)


def _once(connect: Callable[[], http.client.HTTPConnection], kind: str) -> float:
    path, doc, headers = KINDS[kind]
    body = json.dumps(doc).encode()
    started = time.perf_counter()
    connection = connect()
    connection.request("POST", path, body=body, headers=headers)
    answer = connection.getresponse()
    answer.read()
    connection.close()
    if answer.status != 200:
        raise SystemExit(f"bench: {kind} answered {answer.status}")
    return time.perf_counter() - started


def measure(requests: int, think_ms: float) -> dict[str, dict[str, float]]:
    """Median milliseconds per request of each way, per kind, and the ratios to direct."""
    model = ScriptedModel(SCRIPT, max_requests=10**9, lifetime_s=3600)
    if think_ms:
        answer = model.handle

        def slow(handler: BaseHTTPRequestHandler) -> None:
            time.sleep(think_ms / 1000)
            answer(handler)

        model.handle = slow
    model.start()
    folder = Path(tempfile.mkdtemp(prefix="seed-bench-gw-")) / "gw"
    by_tcp = Gateway(model.origin, {"authorization": "Bearer real", "x-api-key": "real"})
    by_unix = Gateway(model.origin, {"authorization": "Bearer real", "x-api-key": "real"})
    ways: dict[str, Callable[[], http.client.HTTPConnection]] = {
        "direct": _tcp(model.origin),
        "tcp": _tcp(by_tcp.start()),
    }
    unix_path = by_unix.start(folder)
    ways["unix"] = lambda: _Unix(unix_path)
    figures: dict[str, dict[str, float]] = {}
    try:
        for kind in KINDS:
            times: dict[str, list[float]] = {way: [] for way in ways}
            for way in ways:  # warm up: first connections, imports
                _once(ways[way], kind)
            order = list(ways)
            for n in range(requests):
                for way in order[n % 3 :] + order[: n % 3]:
                    times[way].append(_once(ways[way], kind))
            medians = {way: statistics.median(t) * 1000 for way, t in times.items()}
            figures[kind] = {
                **{f"{way}_ms": ms for way, ms in medians.items()},
                "tcp_ratio": medians["tcp"] / medians["direct"],
                "unix_ratio": medians["unix"] / medians["direct"],
            }
    finally:
        by_tcp.stop()
        by_unix.stop()
        model.stop()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--think-ms", type=float, default=0.0)
    args = parser.parse_args()
    load = os.getloadavg()[0]
    figures = measure(args.requests, args.think_ms)
    print(f"{args.requests} requests each way, model thinks {args.think_ms:g} ms, load {load:.2f}")
    for kind, row in figures.items():
        print(
            f"  {kind:5} direct {row['direct_ms']:7.2f} ms  tcp {row['tcp_ms']:7.2f} ms"
            f" ({row['tcp_ratio']:.3f})  unix {row['unix_ms']:7.2f} ms ({row['unix_ratio']:.3f})"
        )
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
