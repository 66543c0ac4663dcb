"""A command agent that spends what the kernel lets it, through the model gateway (stdlib only).

Usage: greedy_agent.py MODE N [SIZE] [BARRIER]
  stream N        N streamed chat completions one after another, usage never asked for
  ask N           N streamed chat completions one after another, as a careful client asks
                  (usage asked for, an output ceiling of 100 tokens)
  at-once N       N streamed chat completions sent at once (usage asked for)
  count N SIZE    N token counts (Anthropic's count_tokens and Gemini's countTokens in turn),
                  each of a SIZE-byte prompt
  hold N SIZE     N connections straight to the gateway's socket (past the forwarder), each
                  sending a SIZE-byte body but its last byte, held a while, then closed
  refused N SIZE  N distinct SIZE-byte prompts one after another (the upstream refuses them)
  report JSON     the result file holds JSON as given (a command agent's own figures)
Each mode then fixes add() in calc.py and exits 0; what the model answered is in the result
file's summary. BARRIER (a path) is created once the agent has started (for the tests' clocks).
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

SOCKET = "/run/seed/model.sock"
"""The gateway's socket in the sandbox (kernel/isolation/jails.py MODEL_SOCKET)."""
PAD = "You are a careful coding agent. " * 40
"""A system prompt, as every CLI sends one (about 1,300 bytes)."""


def _connection() -> http.client.HTTPConnection:
    parts = urlsplit(os.environ["SEED_MODEL_BASE_URL"])
    return http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=120)


def _post(path: str, doc: dict[str, object]) -> tuple[int, bytes]:
    connection = _connection()
    try:
        connection.request("POST", path, json.dumps(doc), {"content-type": "application/json"})
        answer = connection.getresponse()
        try:
            return answer.status, answer.read()
        except http.client.IncompleteRead as short:
            return answer.status, short.partial
    except OSError as error:
        return 0, str(error).encode()
    finally:
        connection.close()


def _chat(usage: bool, text: str = "go", ceiling: int = 0) -> dict[str, object]:
    doc: dict[str, object] = {
        "model": "scripted",
        "stream": True,
        "messages": [{"role": "system", "content": PAD}, {"role": "user", "content": text}],
        "tools": [{"type": "function", "function": {"name": "replace", "parameters": {}}}],
    }
    if usage:
        doc["stream_options"] = {"include_usage": True}
    if ceiling:
        doc["max_tokens"] = ceiling
    return doc


def _stream(n: int) -> list[int]:
    return [_post("/v1/chat/completions", _chat(False))[0] for _ in range(n)]


def _at_once(n: int) -> list[int]:
    statuses: list[int] = [0] * n

    def one(k: int) -> None:
        statuses[k] = _post("/v1/chat/completions", _chat(True))[0]

    threads = [threading.Thread(target=one, args=(k,)) for k in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return statuses


def _count(n: int, size: int) -> list[int]:
    statuses: list[int] = []
    for k in range(n):
        text = f"{k} " + "x" * size
        if k % 2 == 0:
            doc: dict[str, object] = {
                "model": "claude-x",
                "messages": [{"role": "user", "content": text}],
            }
            statuses.append(_post("/v1/messages/count_tokens", doc)[0])
        else:
            doc = {"contents": [{"role": "user", "parts": [{"text": text}]}]}
            statuses.append(_post("/v1beta/models/gemini-x:countTokens", doc)[0])
    return statuses


def _hold(n: int, size: int) -> list[int]:
    """N uploads straight to the gateway's socket, each held one byte short of its end."""
    sent: list[int] = [0] * n
    piece = b"x" * (1024 * 1024)
    held: list[socket.socket] = []
    lock = threading.Lock()

    def one(k: int) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(60)
        try:
            sock.connect(SOCKET)
            with lock:
                held.append(sock)
            head = (
                "POST /v1/chat/completions HTTP/1.1\r\nHost: m\r\n"
                f"Content-Type: application/json\r\nContent-Length: {size}\r\n\r\n"
            )
            sock.sendall(head.encode())
            left = size - 1
            while left > 0:
                sock.sendall(piece[: min(left, len(piece))])
                left -= min(left, len(piece))
                sent[k] = size - 1 - left
        except OSError:
            return

    threads = [threading.Thread(target=one, args=(k,)) for k in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(90)
    time.sleep(3)  # held, all of them at once
    with lock:
        for sock in held:
            sock.close()
    return sent


def _refused(n: int, size: int) -> list[int]:
    statuses: list[int] = []
    for k in range(n):
        doc = _chat(True, f"{k:08d}" + "y" * size)
        statuses.append(_post("/v1/chat/completions", doc)[0])
    return statuses


def main(argv: list[str]) -> int:
    mode = argv[1]
    if len(argv) > 4:
        Path(argv[4]).touch()
    done: object
    result: dict[str, object] = {}
    if mode == "report":
        result = json.loads(argv[2])
        done = "reported"
    else:
        n, size = int(argv[2]), int(argv[3]) if len(argv) > 3 else 0
        work = {
            "stream": lambda: _stream(n),
            "ask": lambda: [
                _post("/v1/chat/completions", _chat(True, ceiling=100))[0] for _ in range(n)
            ],
            "at-once": lambda: _at_once(n),
            "count": lambda: _count(n, size),
            "hold": lambda: _hold(n, size),
            "refused": lambda: _refused(n, size),
        }
        done = work[mode]()
    calc = Path("calc.py")
    calc.write_text(calc.read_text().replace("return a - b", "return a + b"))
    result.setdefault("summary", f"{mode}: {done}")
    Path(os.environ["SEED_RESULT_FILE"]).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
