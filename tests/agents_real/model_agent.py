"""A command agent that works through its model: it asks the model at SEED_MODEL_BASE_URL
(OpenAI chat completions, streamed; a broken answer asked once more) for its next step until
the model stops calling tools, applies `replace` calls to the checkout, then looks everywhere it can for the real key and
tries to reach the host named by its second argument. It writes what it found to
SEED_RESULT_FILE's summary; exit 0 when the model said it was done. It reports the tokens of
its first answer only, as a CLI that under-reports (side calls, retries) would.

argv: KEY_REVERSED PROBE_URL [ROUNDS] (the model is asked at most ROUNDS times, 5 unless
given; a PROBE_URL of "-" looks nowhere after the work; the key reversed: its value is never in this process's argv);
`--probe KEY_REVERSED PROBE_URL` only looks around and prints what it found.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import urllib.error
import urllib.request
from pathlib import Path

_READ_MAX = 4 * 1024 * 1024
_USED: list[int] = []
"""The tokens each answer said it used, in order."""


def _ask(base: str, messages: list[dict[str, object]]) -> dict[str, object]:
    """One streamed chat completion, its usage asked for and its output bounded (as a careful
    client does): the assistant message it carried."""
    body = {
        "model": "scripted",
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": 100,
        "messages": messages,
        "tools": [{"type": "function", "function": {"name": "replace", "parameters": {}}}],
    }
    request = urllib.request.Request(
        f"{base}/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={
            "content-type": "application/json",
            "authorization": f"Bearer {os.environ.get('SEED_TEST_KEY', '')}",
        },
    )
    message: dict[str, object] = {"role": "assistant", "content": ""}
    calls: list[dict[str, object]] = []
    ended = False
    with urllib.request.urlopen(request, timeout=30) as answer:
        for raw in answer:
            line = raw.decode().strip()
            ended = ended or line == "data: [DONE]"
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            for choice in json.loads(line[6:]).get("choices", []):
                delta = choice.get("delta", {})
                message["content"] = str(message["content"]) + (delta.get("content") or "")
                calls += delta.get("tool_calls") or []
            usage = json.loads(line[6:]).get("usage") or {}
            if usage.get("total_tokens"):
                _USED.append(int(usage["total_tokens"]))
    if not ended:  # a stream cut before its end (urllib says nothing)
        raise ConnectionError("the answer broke off")
    if calls:
        message["tool_calls"] = calls
    return message


def _work(base: str, rounds: int) -> None:
    """Ask, apply, ask again, until the model answers with text (at most `rounds` times)."""
    messages: list[dict[str, object]] = [{"role": "user", "content": "fix calc.py"}]
    for _ in range(rounds):
        try:
            message = _ask(base, messages)
        except Exception:  # a broken stream: once more, as the CLIs retry
            message = _ask(base, messages)
        messages.append(message)
        calls = message.get("tool_calls")
        if not isinstance(calls, list):
            return
        for call in calls:
            args = json.loads(call["function"]["arguments"])
            path = Path(args["path"])
            text = path.read_text()
            if args["old"] in text:  # as the CLIs' edit tools, no write when nothing matches
                path.write_text(text.replace(args["old"], args["new"]))
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": "done"})


def _holders(key: bytes) -> list[str]:
    """Every place this process can read that holds the key."""
    found = [f"env {k}" for k, v in os.environ.items() if key in v.encode()]
    places = [Path("/proc").glob("*/environ"), Path("/proc").glob("*/cmdline")]
    roots = [os.getcwd(), os.environ.get("HOME", "/"), "/tmp", os.environ.get("SEED_RUN_DIR", "/")]
    for root in roots:
        places.append(p for p in Path(root).rglob("*") if ".git" not in p.parts)
    for group in places:
        for path in group:
            try:
                if path.is_file() and key in path.read_bytes()[:_READ_MAX]:
                    found.append(str(path))
            except OSError:
                continue
    return found


def _reach(url: str) -> str:
    """What the host at url answered (http, then raw tcp), or why nothing did."""
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            http = answer.read().decode()
    except (OSError, urllib.error.URLError) as error:
        http = f"unreachable ({type(error).__name__})"
    host, port = url.split("//")[1].split("/")[0].split(":")
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
        tcp = "connected"
    except OSError as error:
        tcp = f"unreachable ({type(error).__name__})"
    try:
        socket.getaddrinfo("pypi.org", 443)
        dns = "resolved"
    except OSError as error:
        dns = f"unresolved ({type(error).__name__})"
    return f"http {http}; tcp {tcp}; dns {dns}"


def main() -> int:
    if sys.argv[1] == "--probe":  # a real CLI's shell tool runs it: it only looks around
        key, probe = sys.argv[2][::-1].encode(), sys.argv[3]
        print(f"key found in: {_holders(key) or 'nowhere'}; other host: {_reach(probe)}")
        return 0
    key, probe = sys.argv[1][::-1].encode(), sys.argv[2]
    base = os.environ["SEED_MODEL_BASE_URL"]
    print(f"working in {Path.cwd()}", flush=True)  # as a CLI tells its model where it works
    done = True
    try:
        _work(base, int(sys.argv[3]) if len(sys.argv) > 3 else 5)
    except Exception as error:  # a refused or cut answer: say it, then look around anyway
        print(f"the model failed: {error}", flush=True)
        done = False
    if probe == "-":  # only the work: no looking around
        summary = "worked" if done else "the model failed"
    else:
        holders = _holders(key)
        summary = f"key found in: {holders or 'nowhere'}; other host: {_reach(probe)}"
    print(summary, flush=True)
    reported = {"summary": summary, "tokens_used": _USED[0] if _USED else 0}
    Path(os.environ["SEED_RESULT_FILE"]).write_text(json.dumps(reported))
    return 0 if done else 1


if __name__ == "__main__":
    sys.exit(main())
