"""The scripted model server itself: each API's answer shape, the script's turn chosen from the
request, errors, and its bounds. Fast; needs no agent CLI."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any

import pytest

from tests.agents_real.model import SIDE_TEXT, ScriptedModel, call, say, serving

SCRIPT = [call("shell", cmd="true"), say("Done.")]


def _post(url: str, body: dict[str, Any]) -> tuple[int, str]:
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def _events(text: str) -> list[dict[str, Any]]:
    return [
        json.loads(line[6:])
        for line in text.splitlines()
        if line.startswith("data: ") and line != "data: [DONE]"
    ]


def test_each_api_answers_the_turn_its_history_has_reached() -> None:
    with serving(SCRIPT) as model:
        _, text = _post(f"{model.url}/responses", {"stream": True, "input": []})
        item = _events(text)[1]["item"]
        assert (item["type"], item["name"], json.loads(item["arguments"])) == (
            "function_call",
            "shell",
            {"cmd": "true"},
        )
        done = [{"type": "function_call"}, {"type": "function_call_output"}]
        _, text = _post(f"{model.url}/responses", {"stream": True, "input": done})
        assert _events(text)[1]["item"]["content"][0]["text"] == "Done."
        assert _events(text)[-1]["response"]["usage"]["input_tokens"] == 1000

        _, text = _post(f"{model.origin}/v1/messages?beta=true", {"messages": [], "tools": [{}]})
        assert _events(text)[1]["content_block"]["type"] == "tool_use"
        history = [{"role": "assistant", "content": [{"type": "tool_use"}]}]
        _, text = _post(f"{model.origin}/v1/messages", {"messages": history})
        assert _events(text)[2]["delta"] == {"type": "text_delta", "text": "Done."}

        gemini = f"{model.origin}/v1beta/models/m:streamGenerateContent?alt=sse"
        _, text = _post(gemini, {"contents": [{"role": "user", "parts": [{"text": "go"}]}]})
        [chunk] = _events(text)
        assert chunk["candidates"][0]["content"]["parts"][0]["functionCall"]["name"] == "shell"

        tools = {"tools": [{"type": "function"}]}
        chat = {**tools, "stream": True, "messages": []}
        _, text = _post(f"{model.url}/chat/completions", chat)
        chunks = _events(text)
        assert chunks[0]["choices"][0]["delta"]["tool_calls"][0]["function"]["name"] == "shell"
        # as OpenAI's API: a stream carries usage only when the request asks for it
        assert all("usage" not in chunk for chunk in chunks)
        asked = {**chat, "stream_options": {"include_usage": True}}
        _, text = _post(f"{model.url}/chat/completions", asked)
        chunks = _events(text)
        assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["prompt_tokens"] == 1000
        answered = [{"role": "assistant", "tool_calls": [{}]}, {"role": "tool"}]
        _, text = _post(f"{model.url}/chat/completions", {**tools, "messages": answered})
        assert json.loads(text)["choices"][0]["message"]["content"] == "Done."
        # a side call (no tools: a title) does not move the script on
        _, text = _post(f"{model.url}/chat/completions", {"messages": []})
        assert json.loads(text)["choices"][0]["message"]["content"] == SIDE_TEXT
    assert [r.turn for r in model.requests] == [0, 1, 0, 1, 0, 0, 0, 1, -1]


def test_a_text_only_script_counts_the_answers_it_gave() -> None:
    with serving([say("first"), say("second")], text_only=True) as model:
        # aider's prompt holds example answers: they do not count
        examples = {"messages": [{"role": "assistant", "content": "example"}]}
        replies = [
            json.loads(_post(f"{model.url}/chat/completions", examples)[1]) for _ in range(3)
        ]
    assert [r["choices"][0]["message"]["content"] for r in replies] == ["first", "second", "second"]


def test_an_error_is_in_each_apis_own_format() -> None:
    with serving(SCRIPT, error=(401, "no such key")) as model:
        status, text = _post(f"{model.origin}/v1/messages", {"messages": []})
        assert status == 401 and json.loads(text)["error"]["type"] == "authentication_error"
        status, text = _post(f"{model.origin}/v1beta/models/m:generateContent", {})
        assert json.loads(text)["error"]["status"] == "UNAUTHENTICATED"
        status, text = _post(f"{model.url}/chat/completions", {})
        assert status == 401 and json.loads(text)["error"]["message"] == "no such key"
    assert len(model.requests) == 3 and all(r.turn == -1 for r in model.requests)


def test_it_is_bounded_and_stops_itself() -> None:
    model = ScriptedModel(SCRIPT, max_requests=1, lifetime_s=1.0)
    model.start()
    assert _post(f"{model.url}/chat/completions", {"tools": [{}]})[0] == 200
    assert _post(f"{model.url}/chat/completions", {"tools": [{}]})[0] == 500
    assert model.origin.startswith("http://127.0.0.1:")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # its lifetime ends: it stops by itself
        try:
            urllib.request.urlopen(f"{model.url}/models", timeout=2).close()
        except OSError:  # refused, or reset as it shuts down (URLError is an OSError)
            break
        time.sleep(0.2)
    else:
        pytest.fail("the server was still answering a minute after its lifetime")
