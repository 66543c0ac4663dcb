"""One run's model gateway (kernel/loop/modelrun.py) against the scripted model: each answer in
the ledger as it ends, a stream cut at the cap ending with its API's own error event, and the
turns the report shows."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import pytest

from kernel.isolation.gateway import Api
from kernel.loop import modelrun
from kernel.records import budget, wire
from tests.agents_real.model import ScriptedModel, say, serving
from tests.support import wait_for

NO_CAPS = wire.Caps()
ANSWER = 1050
"""Tokens of each scripted answer (1,000 in, 200 of them cached, 50 out)."""
REQUESTS: dict[Api, tuple[str, dict[str, object]]] = {
    "anthropic": (
        "/v1/messages",
        {"model": "m", "stream": True, "max_tokens": 100, "messages": []},
    ),
    "openai-responses": (
        "/v1/responses",
        {"model": "m", "stream": True, "max_output_tokens": 100, "input": []},
    ),
    "openai-chat": (
        "/v1/chat/completions",
        {
            "model": "m",
            "stream": True,
            "stream_options": {"include_usage": True},
            "max_tokens": 100,
            "messages": [],
            "tools": [{"type": "function"}],
        },
    ),
    "gemini": (
        "/v1beta/models/m:streamGenerateContent?alt=sse",
        {"contents": [], "generationConfig": {"maxOutputTokens": 100}},
    ),
}
"""Each names an output ceiling of 100 tokens, as the CLIs do."""


def _reservation(api: Api) -> int:
    """What the gateway reserves for the request: its bytes and its ceiling."""
    return len(json.dumps(REQUESTS[api][1])) + 100


class _Unix(http.client.HTTPConnection):
    def __init__(self, path: Path) -> None:
        super().__init__("localhost", timeout=10)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(10)
        sock.connect(str(self._path))
        self.sock = sock


def _ask(
    run: modelrun.ModelRun, api: Api = "openai-chat", body: dict[str, object] | None = None
) -> tuple[int, bytes]:
    """One request through the run's gateway: the status and every byte of the answer."""
    path, body = REQUESTS[api][0], body or REQUESTS[api][1]
    connection = _Unix(run.socket)
    try:
        connection.request("POST", path, json.dumps(body).encode(), {"content-type": "json"})
        answer = connection.getresponse()
        try:
            data = answer.read()
        except http.client.IncompleteRead as short:
            data = short.partial
        return answer.status, data
    finally:
        connection.close()


@contextmanager
def _run(tmp: Path, model: ScriptedModel, caps: wire.Caps = NO_CAPS) -> Iterator[modelrun.ModelRun]:
    (tmp / "history").mkdir(exist_ok=True)
    run = modelrun.ModelRun(
        upstream=model.origin,
        keys={},
        folder=tmp / "history" / "it-1",
        state=tmp / "state",
        caps=caps,
        before=(0, 0.0),
        prices={},
        model="m",
        ledger=modelrun.Ledger(tmp / "history", "it-1", "command"),
    )
    try:
        yield run
    finally:
        run.stop()


def _ledger(tmp: Path) -> list[budget.LedgerEntry]:
    return list(reversed(list(budget.entries(tmp / "history"))))


def test_each_answer_is_in_the_ledger_as_it_ends_and_the_runs_line_adds_nothing(
    tmp_path: Path,
) -> None:
    with serving([say("one"), say("two"), say("three")]) as model, _run(tmp_path, model) as run:
        _ask(run)
        _ask(run)
        # before the run ends (a daemon killed here keeps these two); on_done runs once the
        # answer is sent, so the line may follow the client's read by a moment
        wait_for(lambda: len(_ledger(tmp_path)) == 2, 10, "two ledger lines")
        assert sorted((e.request, e.tokens_used) for e in _ledger(tmp_path)) == [
            (1, ANSWER),
            (2, ANSWER),
        ]
        _ask(run)
        used = run.stop()

    lines = _ledger(tmp_path)
    assert sorted(e.request for e in lines) == [1, 2, 3]  # in the order the answers ended
    assert sum(e.tokens_used for e in lines) == used.tokens == 3 * ANSWER
    assert sum(e.input_tokens for e in lines) == used.input == 3000
    assert {e.iteration_id for e in lines} == {"it-1"}
    entry = budget.LedgerEntry(at=datetime.now(UTC), iteration_id="it-1", backend="command")
    budget.append(tmp_path / "history", modelrun.on_the_wire(entry, used))
    assert sum(e.tokens_used for e in _ledger(tmp_path)) == 3 * ANSWER  # counted once
    assert budget.runs_of(tmp_path / "history", "it-1") == 1
    assert budget.day_spend(tmp_path / "history", budget.today()).runs == 1


def _error_event(api: Api, data: bytes) -> dict[str, object]:
    """The last event of a stream, as its SDK reads it (Gemini's: a bare JSON object)."""
    last = data.rstrip().rsplit(b"\n\n", 1)[-1]
    if api == "gemini":
        return json.loads(last)
    return json.loads(last.split(b"data: ", 1)[1])


@pytest.mark.parametrize("api", list(REQUESTS))
def test_a_stream_cut_at_the_cap_ends_with_its_apis_error_event(tmp_path: Path, api: Api) -> None:
    gate = threading.Event()
    gate.set()  # every event a chunk of its own, as a vendor streams
    # admitted (its reservation fits), then the answer says more than its reservation
    caps = wire.Caps(tokens=_reservation(api) + 5)
    with (
        serving([say("a long answer " * 20)], gate=gate) as model,
        _run(tmp_path, model, caps) as run,
    ):
        status, data = _ask(run, api)
        used = run.stop()

    assert status == 200
    last = _error_event(api, data)
    text = json.dumps(last)
    assert "BUDGET_EXCEEDED" in text and f"past its cap of {caps.tokens:,}" in text
    if api == "anthropic":
        assert last["type"] == "error"
    if api == "openai-responses":
        assert last["type"] == "response.failed"
    if api in ("openai-chat", "gemini"):
        assert "error" in last
    assert used.ended.startswith("this answer took the iteration to")
    [line] = _ledger(tmp_path)
    assert line.request == 1 and line.tokens_used == used.tokens > caps.tokens
    [turn] = used.turns
    assert turn.status == "cut"


def test_the_turns_say_tokens_cost_seconds_and_how_each_ended(tmp_path: Path) -> None:
    caps = wire.Caps(tokens=2 * ANSWER)
    with (
        serving([say("one"), say("two"), say("three")]) as model,
        _run(tmp_path, model, caps) as run,
    ):
        assert _ask(run)[0] == 200
        assert _ask(run)[0] == 200
        # the gateway counts an answer as it ends, which may be just after its last byte
        # reached us: the request after the cap is the one sent once the cap is counted
        deadline = time.monotonic() + 30
        while len(_ledger(tmp_path)) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _ask(run)[0] == wire.REFUSAL_STATUS
        used = run.stop()

    turns = used.turns
    assert [(t.seq, t.status) for t in turns] == [(1, "answered"), (2, "answered"), (3, "refused")]
    assert [(t.input, t.output, t.cached) for t in turns] == [(1000, 50, 200)] * 2 + [(0, 0, 0)]
    assert all(0 < t.seconds < 10 for t in turns[:2])
    assert len(_ledger(tmp_path)) == 2  # a refusal costs nothing and has no line


def test_a_killed_model_only_run_is_held_at_what_is_left_and_settled_at_what_the_wire_counted(
    tmp_path: Path,
) -> None:
    history = tmp_path / "history"
    history.mkdir()
    now = datetime.now(UTC)
    budget.append(
        history,
        budget.LedgerEntry(at=now, iteration_id="it-1", backend="c", cost_usd=0.25, request=1),
    )
    journal = {
        "iteration_id": "it-1",
        "stage": "agent",
        "backend": "c",
        "reserve_usd": 1.0,
        "ledger_runs": 0,
        "wire": True,
    }

    held = budget.unsettled(history, journal)

    assert held is not None and held.wire and held.usd == 0.75  # the rest of the reservation
    assert budget.unsettled(history, {**journal, "wire": False}) == budget.Held(1.0, "it-1", "c")


def test_a_request_under_way_holds_its_reservation_until_its_answer_ends(tmp_path: Path) -> None:
    """Two requests at once and room for one reservation: the second is refused while the
    first is under way, though nothing has been counted yet."""
    gate = threading.Event()
    # a prompt of 2,000 bytes: more than the 1,000 tokens the scripted model counts it
    body = {**REQUESTS["anthropic"][1], "system": "s" * 2000}
    caps = wire.Caps(tokens=(len(json.dumps(body)) + 100) * 3 // 2)
    got: list[tuple[int, bytes]] = []
    with serving([say("one")], gate=gate) as model, _run(tmp_path, model, caps) as run:
        first = threading.Thread(target=lambda: got.append(_ask(run, "anthropic", body)))
        first.start()
        wait_for(lambda: len(model.requests) == 1, 10, "the first request upstream")
        second = _ask(run, "anthropic", body)
        gate.set()
        first.join(10)
        used = run.stop()
    assert second[0] == wire.REFUSAL_STATUS
    assert b"held by requests under way" in second[1]
    assert len(model.requests) == 1 and got[0][0] == 200
    assert used.tokens == ANSWER  # the first counts its own usage once it has said it
