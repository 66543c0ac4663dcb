"""The latency the model gateway adds per request, against the scripted model server.

    .venv/bin/python -m bench.gateway                      # loopback, the worst case
    .venv/bin/python -m bench.gateway --think-ms 200       # a model that takes 200 ms to answer
    .venv/bin/python -m bench.gateway --whole-run claude --pairs 5 --think-ms 200

For a non-streamed answer (chat completions, JSON) and a streamed one (Anthropic Messages,
SSE) it times, median of --requests requests in rotating order, each on a fresh connection:
  direct   the client straight to the scripted server;
  tcp      through the gateway on 127.0.0.1;
  unix     through the gateway on its Unix socket (as the sandbox's forwarder will reach it);
and prints the medians, the ratios to `direct` and the load average. The issue aims at 1.05
for a whole run; a loopback request that the server answers at once is the worst case (all
of it is overhead), --think-ms shows a request whose answer takes the model some time.

--whole-run BACKEND times whole runs of a real CLI (tests/agents_real, installed by
`python -m tests.agents_real.install`): `seed.py once` landing its fix, sandboxed, through
the gateway (network model-only) and straight to the scripted server (network full), in
--pairs interleaved pairs (the order alternating), and prints the medians of the agent's run
(the record's `execute`) and of the whole `seed.py once`, their ratios, the load average
and the bytes of model.jsonl per turn.
"""

from __future__ import annotations

import argparse
import http.client
import importlib
import json
import os
import shutil
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


def _thinking(model: ScriptedModel, think_ms: float) -> None:
    """The model takes think_ms before each answer."""
    if not think_ms:
        return
    answer = model.handle

    def slow(handler: BaseHTTPRequestHandler) -> None:
        time.sleep(think_ms / 1000)
        answer(handler)

    model.handle = slow


def _one_run(backend: str, network: str, think_ms: float) -> dict[str, float]:
    """One `seed.py once` of the real CLI landing its fix: seconds, and model.jsonl's bytes."""
    from tests.agents_real import harness
    from tests.support import records

    cli: harness.Cli = importlib.import_module(f"tests.agents_real.test_{backend}").CLI
    tmp = Path(tempfile.mkdtemp(prefix=f"seed-bench-run-{network}-"))
    model = ScriptedModel(cli.fix, text_only=cli.text_only, lifetime_s=900)
    _thinking(model, think_ms)
    model.start()
    try:
        agent = {"network": network, "keys": list(cli.keys())}
        started = time.perf_counter()
        repo, done = cli.run(tmp, cli.config(model, **agent))
        wall = time.perf_counter() - started
    finally:
        model.stop()
    [record] = records(repo)
    if (
        done.returncode != 0
        or record["outcome"] != "SUCCESS"
        or not record["network"].startswith(network)
    ):
        raise SystemExit(f"bench: {backend} {network}: {record['outcome']} {record['reason']}")
    recording = repo / "history" / record["iteration_id"] / "model.jsonl"
    turns = len(model.requests)
    size = recording.stat().st_size if recording.exists() else 0
    shutil.rmtree(tmp, ignore_errors=True)
    return {
        "wall_s": wall,
        "execute_s": float(record["durations"]["execute"]),
        "turns": turns,
        "bytes_per_turn": size / turns,
    }


def whole_run(backend: str, pairs: int, think_ms: float) -> dict[str, Any]:
    """Medians of `pairs` interleaved runs through the gateway and straight to the server."""
    runs: dict[str, list[dict[str, float]]] = {"model-only": [], "full": []}
    for n in range(pairs):
        order = ["model-only", "full"] if n % 2 == 0 else ["full", "model-only"]
        for network in order:
            runs[network].append(_one_run(backend, network, think_ms))
    figures: dict[str, Any] = {}
    for network, rows in runs.items():
        figures[network] = {
            key: statistics.median(row[key] for row in rows) for key in ("wall_s", "execute_s")
        }
        figures[network]["all_execute_s"] = [round(row["execute_s"], 2) for row in rows]
    gated, direct = figures["model-only"], figures["full"]
    figures["execute_ratio"] = gated["execute_s"] / direct["execute_s"]
    figures["wall_ratio"] = gated["wall_s"] / direct["wall_s"]
    figures["bytes_per_turn"] = statistics.median(r["bytes_per_turn"] for r in runs["model-only"])
    figures["all_bytes_per_turn"] = [round(r["bytes_per_turn"]) for r in runs["model-only"]]
    figures["turns"] = runs["model-only"][0]["turns"]
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--think-ms", type=float, default=0.0)
    parser.add_argument("--whole-run", default="", help="a real CLI's backend (claude, codex)")
    parser.add_argument("--pairs", type=int, default=5)
    args = parser.parse_args()
    load = os.getloadavg()[0]
    if args.whole_run:
        found = whole_run(args.whole_run, args.pairs, args.think_ms)
        print(
            f"{args.whole_run}: {args.pairs} pairs, model thinks {args.think_ms:g} ms, "
            f"{found['turns']} requests a run, load {load:.2f} at the start"
        )
        for network in ("model-only", "full"):
            row = found[network]
            print(
                f"  {network:10} agent run {row['execute_s']:6.2f} s  seed once "
                f"{row['wall_s']:6.2f} s  (runs {row['all_execute_s']})"
            )
        print(
            f"  ratio: agent run {found['execute_ratio']:.3f}, seed once {found['wall_ratio']:.3f};"
            f" model.jsonl {found['bytes_per_turn']:.0f} bytes a turn {found['all_bytes_per_turn']}"
        )
        print(f"load average at the end {os.getloadavg()[0]:.2f}")
        return
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
