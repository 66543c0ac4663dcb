"""Usage, prices, caps and the model exchange's recording, read from real answers of the
scripted model server (all four APIs, streaming and not)."""

from __future__ import annotations

import gzip
import json
import random
import urllib.request
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernel.config import ModelPrice
from kernel.records import budget, exchanges, wire
from kernel.records.wire import Caps, Usage
from tests.agents_real.model import CACHED_TOKENS, INPUT_TOKENS, OUTPUT_TOKENS, call, serving

_TOOLS = [{"name": "edit"}]
_CASES: list[tuple[str, str, dict[str, object]]] = [
    ("anthropic", "/v1/messages", {"model": "claude-x", "stream": True, "messages": []}),
    ("openai-responses", "/v1/responses", {"model": "gpt-r", "stream": True, "input": []}),
    (
        "openai-chat",
        "/v1/chat/completions",
        {
            "model": "gpt-c",
            "stream": True,
            "stream_options": {"include_usage": True},
            "messages": [],
            "tools": _TOOLS,
        },
    ),
    ("openai-chat", "/v1/chat/completions", {"model": "gpt-c", "messages": [], "tools": _TOOLS}),
    ("gemini", "/v1beta/models/gem-1:streamGenerateContent?alt=sse", {"contents": []}),
    ("gemini", "/v1beta/models/gem-1:generateContent", {"contents": []}),
]
_MODELS = {"anthropic": "claude-x", "openai-responses": "gpt-r", "openai-chat": "gpt-c"}
_WHOLE = Usage("", INPUT_TOKENS, OUTPUT_TOKENS, CACHED_TOKENS, True)


@pytest.fixture(scope="module")
def answers() -> Iterator[list[tuple[str, str, bytes, bytes]]]:
    """(api, path, request body, answer bytes) for every case, from the real server."""
    got: list[tuple[str, str, bytes, bytes]] = []
    with serving([call("edit", path="calc.py")]) as model:
        for api, path, body in _CASES:
            data = json.dumps(body).encode()
            request = urllib.request.Request(
                model.origin + path, data, {"Content-Type": "application/json"}
            )
            with urllib.request.urlopen(request, timeout=10) as answer:
                got.append((api, path, data, answer.read()))
    yield got


def _expected(api: str) -> Usage:
    return Usage(_MODELS.get(api, "gem-1"), INPUT_TOKENS, OUTPUT_TOKENS, CACHED_TOKENS, True)


def test_usage_is_read_from_each_apis_answer_json_and_stream(
    answers: list[tuple[str, str, bytes, bytes]],
) -> None:
    for api, path, request, answer in answers:
        assert wire.usage_of(api, request, answer, path) == _expected(api), (api, path)


def test_the_running_reader_gives_the_same_usage_split_at_every_byte(
    answers: list[tuple[str, str, bytes, bytes]],
) -> None:
    for api, path, request, answer in answers:
        for cut in range(len(answer) + 1):
            reader = wire.UsageReader(api, request, path)
            first = reader.feed(answer[:cut])
            second = reader.feed(answer[cut:])
            assert first.tokens <= second.tokens <= _expected(api).tokens, (api, cut)
            assert reader.finish() == _expected(api), (api, path, cut)
        reader = wire.UsageReader(api, request, path)
        seen = [reader.feed(answer[i : i + 1]) for i in range(len(answer))]
        assert [u.tokens for u in seen] == sorted(u.tokens for u in seen)
        assert reader.finish() == _expected(api)
        assert wire.usage_of(api, request, answer.rstrip(b"\n"), path) == _expected(api)


def test_a_compressed_answer_is_read_as_sent_split_at_every_byte(
    answers: list[tuple[str, str, bytes, bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    api, path, request, answer = answers[0]
    packed = gzip.compress(answer)
    for cut in range(len(packed) + 1):
        reader = wire.UsageReader(api, request, path, "gzip")
        reader.feed(packed[:cut])
        reader.feed(packed[cut:])
        assert reader.finish() == _expected(api), cut
    deflated = zlib.compress(answer)
    assert wire.usage_of(api, request, deflated, path, "deflate") == _expected(api)
    assert not wire.usage_of(api, request, answer, path, "br").known
    assert not wire.usage_of(api, request, answer, path, "gzip").known  # not gzip at all
    monkeypatch.setattr(wire, "WIRE_DECODED_MAX", 64 * 1024)
    bomb = gzip.compress(b"\n" * 1024 * 1024 + answer)  # decoding stops before the usage
    assert not wire.usage_of(api, request, bomb, path, "gzip").known


def test_a_stream_says_its_usage_before_it_ends() -> None:
    events = [
        {"type": "message_start", "message": {"model": "m", "usage": {"input_tokens": 900}}},
        {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "x" * 4000}},
    ]
    stream = b"".join(b"event: e\r\ndata: " + json.dumps(e).encode() + b"\r\n\r\n" for e in events)
    reader = wire.UsageReader("anthropic", b"{}")
    reader.feed(stream)
    assert reader.usage == Usage("m", 900, 0, 0, True)
    assert reader.estimate.output == 1000  # 4000 characters written, no usage yet
    chat = b'data: {"choices":[{"delta":{"content":"' + b"y" * 400 + b'"}}]}\n\n'
    running = wire.UsageReader("openai-chat", b'{"model": "c"}')
    running.feed(chat * 3)
    assert running.estimate == Usage("c", 0, 300, 0, False)


def test_malformed_answers_never_raise_and_say_usage_is_unknown(
    answers: list[tuple[str, str, bytes, bytes]],
) -> None:
    bad: list[bytes] = [
        b"",
        b"\xff\xfe\x00garbage",
        b"{not json",
        b"[1, 2, 3]",
        b'{"usage": "lots"}',
        b'{"usage": {"prompt_tokens": -5, "completion_tokens": 1e400}}',
        b'{"usage": {"input_tokens": true, "output_tokens": [1]}}',
        b'{"usageMetadata": {"promptTokenCount": 99999999999999999999}}',
        b"data: {" + b"[" * 100_000 + b"\n\n",
        b'data: {"type": "message_start", "message": "x"}\n\n',
        b"data: [DONE]\n\n",
    ]
    for api in wire.APIS:
        for answer in bad:
            usage = wire.usage_of(api, b"\xff", answer, "/models/\xff")
            assert not usage.known and usage.tokens == 0, (api, answer[:40])
    rng = random.Random(27)
    for api, path, _request, answer in answers:
        for _ in range(200):
            broken = bytearray(answer)
            for _ in range(rng.randint(1, 8)):
                broken[rng.randrange(len(broken))] = rng.randrange(256)
            usage = wire.usage_of(api, bytes(broken), bytes(broken), path)
            assert 0 <= usage.cached <= usage.input <= 10**12 and 0 <= usage.output <= 10**12


def test_an_event_over_the_bound_is_set_aside_and_the_rest_still_read(
    answers: list[tuple[str, str, bytes, bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(wire, "WIRE_EVENT_MAX", 4096)
    api, path, request, answer = answers[0]
    huge = b'data: {"type": "ping", "delta": {"text": "' + b"h" * 10_000 + b'"}}\n\n'
    for stream in (huge + answer, answer.replace(b"\n\n", b"\n\n" + huge, 1)):
        reader = wire.UsageReader(api, request, path)
        for i in range(0, len(stream), 1000):
            reader.feed(stream[i : i + 1000])
        assert reader.finish() == _expected(api) and reader.skipped == 1
    assert not wire.usage_of(api, request, b"{" + b" " * 5000 + answer, path).known
    endless = wire.UsageReader(api, request, path)
    for _ in range(100):  # one event of endless data lines, never ended: not held
        endless.feed(b"data: " + b"e" * 1000 + b"\n")
    assert len(endless._data) == 0  # pyright: ignore[reportPrivateUsage]
    assert endless.feed(b"\n" + answer) == _expected(api) and endless.skipped == 1


def test_cost_is_priced_from_the_configs_prices() -> None:
    prices = {"gpt-c": ModelPrice(input=2.0, output=8.0, cached_input=0.5)}
    usage = Usage("openai/gpt-c", 1_000_000, 100_000, 400_000, True)
    assert wire.cost_of(usage, prices) == (0.6 * 2.0 + 0.4 * 0.5 + 0.1 * 8.0, budget.PRICES)
    assert wire.cost_of(Usage("other", 10, 10, 0, True), prices) == (0.0, budget.NONE)
    assert wire.cost_of(Usage("", 10, 0, 0, True), prices, "gpt-c")[1] == budget.PRICES


def test_the_cap_refuses_the_next_request_and_cuts_a_stream_that_passes_it() -> None:
    caps = Caps(tokens=10_000, usd=1.0)
    assert wire.refused(caps, tokens=9_999, usd=0.99) == ""
    assert "10,000 tokens" in wire.refused(caps, tokens=10_000, usd=0.0)
    assert "$1.00" in wire.refused(caps, tokens=0, usd=1.0)
    assert wire.refused(Caps(), tokens=10**9, usd=10**6) == ""  # 0: no cap
    assert wire.cut(caps, tokens=9_000, usd=0.5, running=Usage("m", 900, 100, 0, True)) == ""
    assert "10,001" in wire.cut(caps, tokens=9_000, usd=0.5, running=Usage("m", 900, 101, 0, True))
    assert wire.cut(caps, tokens=0, usd=0.9, running=Usage(), running_usd=0.2) != ""


def test_refusals_are_each_vendors_error_that_its_cli_does_not_retry() -> None:
    servers = {408, 409, 429, 499, 529} | set(range(500, 600))
    retried = {  # read from each CLI's source (wire.REFUSAL_STATUS says where)
        "claude": servers | {401},
        "codex": servers | {401},
        "gemini": servers,
        "opencode": servers,
        "mini-swe-agent": servers | {400},
    }
    for api in wire.APIS:
        refusal = wire.refusal(api, "the iteration's cap of 10 tokens is reached")
        assert all(refusal.status not in statuses for statuses in retried.values())
        assert ("x-should-retry", "false") in refusal.headers
        doc = json.loads(refusal.body)
        assert "cap of 10 tokens" in json.dumps(doc)
        event = wire.stream_error(api, "cut")
        assert event.endswith(b"\n\n")
        if api == "gemini":  # the bare error object @google/genai throws on (its code, 403)
            assert json.loads(event)["error"]["code"] == 403
            continue
        assert event.startswith((b"event: ", b"data: "))
        assert "BUDGET_EXCEEDED" in json.dumps(json.loads(event.split(b"data: ")[1]))
    assert json.loads(wire.refusal("anthropic", "x").body)["error"]["type"] == "permission_error"
    assert json.loads(wire.refusal("gemini", "x").body)["error"]["code"] == 403


# -- model.jsonl


def _record(
    recording: exchanges.Recording, seq: int, api: str, path: str, request: bytes, answer: bytes
) -> None:
    recording.append(
        exchanges.Exchanged(
            seq=seq,
            api=api,
            method="POST",
            path=path + "&key=AIzaSECRET" if "?" in path else path,
            headers={
                "Authorization": "Bearer sk-SECRET",
                "x-api-key": "sk-ant-SECRET",
                "x-goog-api-key": "AIzaSECRET",
                "X-Custom-Token": "SECRET",
                "content-type": "application/json",
                "anthropic-version": "2023-06-01",
            },
            request=request,
            answer=answer,
            status=200,
            started=1_700_000_000.0 + seq,
            seconds=0.25,
            usage=wire.usage_of(api, request, answer, path),
            answer_headers=(("Content-Type", "text/event-stream"), ("Set-Cookie", "SECRET")),
        )
    )


def test_every_exchange_is_recorded_bounded_redacted_and_read_back(
    tmp_path: Path, answers: list[tuple[str, str, bytes, bytes]]
) -> None:
    folder, state = tmp_path / "history" / "iter-0001", tmp_path / "state"
    recording = exchanges.Recording(folder, state)
    big = json.dumps({"model": "claude-x", "messages": ["z" * 100_000]}).encode()
    for seq, (api, path, request, answer) in enumerate(answers):
        _record(recording, seq, api, path, request, answer)
    _record(recording, len(answers), "anthropic", "/v1/messages", big, answers[0][3])
    again = exchanges.Recording(folder, state)  # a repair round records on
    _record(again, len(answers) + 1, "anthropic", "/v1/messages", big, answers[0][3])
    text = (folder / exchanges.MODEL_FILE).read_text()
    assert "SECRET" not in text and "AIza" not in text
    assert len(text.splitlines()) == len(answers) + 2
    assert max(len(line) for line in text.splitlines()) < 64 * 1024
    assert [p.name for p in (folder / "bodies").iterdir()] == [exchanges.sha256(big)]
    read = exchanges.read(folder, state)
    assert [r.seq for r in read] == list(range(len(answers) + 2))
    first = read[0]
    assert first.usage == _expected("anthropic") and first.status == 200
    assert first.headers["authorization"] == exchanges.REDACTED
    assert first.headers["x-custom-token"] == exchanges.REDACTED
    assert first.headers["anthropic-version"] == "2023-06-01"
    assert first.answer_headers == {
        "content-type": "text/event-stream",
        "set-cookie": exchanges.REDACTED,
    }
    assert exchanges.body(folder, first.answer) == answers[0][3]
    assert exchanges.body(folder, read[-1].request) == big
    assert "key=" + exchanges.REDACTED in read[4].path


def test_a_hand_edited_recording_is_refused_naming_the_first_line_that_differs(
    tmp_path: Path, answers: list[tuple[str, str, bytes, bytes]]
) -> None:
    folder, state = tmp_path / "iter-0002", tmp_path / "state"
    recording = exchanges.Recording(folder, state)
    for seq, (api, path, request, answer) in enumerate(answers[:4]):
        _record(recording, seq, api, path, request, answer)
    model = folder / exchanges.MODEL_FILE
    sound = model.read_bytes()
    lines = sound.splitlines(keepends=True)

    def refused_at(data: bytes) -> int:
        model.write_bytes(data)
        with pytest.raises(exchanges.RecordingRefused) as caught:
            exchanges.read(folder, state)
        return caught.value.line

    assert refused_at(b"".join([lines[0], lines[1].replace(b"1000", b"1001"), *lines[2:]])) == 2
    assert refused_at(b"".join([lines[0], *lines[2:]])) == 2  # a turn taken out
    assert refused_at(b"".join(lines[:3])) == 4  # the last turn cut off
    assert refused_at(sound + lines[3]) == 5  # a turn added, unsealed
    assert refused_at(b"x" * (2 * 1024 * 1024) + b"\n" + sound) == 1  # over the bound, unread
    model.write_bytes(sound)
    assert len(exchanges.read(folder, state)) == 4
    seals = folder / exchanges.SEAL_FILE
    sealed = seals.read_bytes()
    for junk in (b"\xff\n" * 4, b"\x00" * 300 + b"\n", b""):
        seals.write_bytes(junk)
        with pytest.raises(exchanges.RecordingRefused) as caught:
            exchanges.read(folder, state)
        assert caught.value.line == 1
    seals.write_bytes(sealed)
    other = exchanges.Recording(folder, tmp_path / "another-kernel")
    _record(other, 4, *answers[4][:2], answers[4][2], answers[4][3])
    with pytest.raises(exchanges.RecordingRefused) as caught:
        exchanges.read(folder, state)  # sealed with another key from line 5 on
    assert caught.value.line == 5


def test_a_body_kept_by_hash_and_edited_is_refused(
    tmp_path: Path, answers: list[tuple[str, str, bytes, bytes]]
) -> None:
    folder, state = tmp_path / "iter-0003", tmp_path / "state"
    big = b'{"messages": "' + b"q" * 50_000 + b'"}'
    _record(exchanges.Recording(folder, state), 0, "anthropic", "/v1/messages", big, b"{}")
    ref = exchanges.read(folder, state)[0].request
    (folder / "bodies" / exchanges.sha256(big)).write_bytes(big.replace(b"q", b"r", 1))
    with pytest.raises(exchanges.RecordingRefused):
        exchanges.body(folder, ref)


def test_a_requests_reservation_is_its_prompts_bytes_and_the_output_ceiling_it_names() -> None:
    text = "x" * 1000
    chat = json.dumps({"model": "m", "max_tokens": 300, "n": 2, "messages": [text]}).encode()
    assert wire.ask_of("openai-chat", "POST", "/v1/chat/completions", chat) == wire.Ask(
        "m", len(chat), 600
    )
    # no ceiling named: the default one; a listing costs its bytes; a count has no output
    bare = json.dumps({"model": "m", "messages": [text]}).encode()
    assert wire.ask_of("openai-chat", "POST", "/v1/chat/completions", bare) == wire.Ask(
        "m", len(bare), 65_536
    )
    assert wire.ask_of("openai-chat", "GET", "/v1/models", b"") == wire.Ask()
    count = wire.ask_of("anthropic", "POST", "/v1/messages/count_tokens", bare)
    assert count == wire.Ask("m", len(bare), 0)
    gemini = b'{"generationConfig": {"maxOutputTokens": "300", "candidateCount": 2}}'
    assert wire.ask_of("gemini", "POST", "/v1beta/models/g:generateContent", gemini) == wire.Ask(
        "g", len(gemini), 600
    )


def test_a_ceiling_is_read_as_the_upstream_reads_it_or_the_request_is_refused() -> None:
    path = "/v1/chat/completions"
    # a key given twice, or spelled with escapes, or Google's other spelling: the largest
    twice = wire.ask_of("openai-chat", "POST", path, b'{"max_tokens": 9000, "max_tokens": 5}')
    assert isinstance(twice, wire.Ask) and twice.output == 9000
    escaped = b'{"max\\u005fcompletion\\u005ftokens": 7000, "max_tokens": 5}'
    assert wire.Ask("", len(escaped), 7000) == wire.ask_of("openai-chat", "POST", path, escaped)
    both = b'{"generation_config": {"max_output_tokens": 800}, "generationConfig": {}}'
    got = wire.ask_of("gemini", "POST", "/v1beta/models/g:generateContent", both)
    assert isinstance(got, wire.Ask) and got.output == 800
    # a long string is read as empty (the parse stays small); a key is kept whole
    padded = b'{"max_tokens": 4000, "pad": "' + b"y" * 100_000 + b'", "' + b"k" * 300 + b'": 1}'
    got = wire.ask_of("openai-chat", "POST", path, padded)
    assert isinstance(got, wire.Ask) and (got.prompt, got.output) == (len(padded), 4000)
    for refused in (
        b'{"max_tokens": "lots"}',
        b'{"max_tokens": -1}',
        b'{"max_tokens": true}',
        b'{"max_tokens": 5, "max_tokens": "x"}',
        b'{"n": 1.5}',
        b"[1, 2]",
        b"not json",
        "{}".encode("utf-16"),
        b"{" * 200_000,
        b'["a", ' * 10 + b'""' * 300_000,
    ):
        reason = wire.ask_of("openai-chat", "POST", path, refused)
        assert isinstance(reason, str) and "the gateway reads" in reason, refused[:40]


def test_an_answer_counts_its_own_usage_only_where_it_said_its_last_word_on_it(
    answers: list[tuple[str, str, bytes, bytes]],
) -> None:
    ask = wire.Ask("m", 5000, 65_536)
    for api, path, request, answer in answers:
        reader = wire.UsageReader(api, request, path)
        reader.feed(answer)
        reader.finish()
        assert reader.final, (api, path)
        assert wire.charged(ask, reader, 200) == _expected(api)  # smaller, and trusted
        # cut before its end: not known, so never less than the reservation
        cut = wire.UsageReader(api, request, path)
        cut.feed(answer[: len(answer) // 3])
        cut.finish()
        assert not cut.final
        assert wire.charged(ask, cut, 200).tokens == ask.usage.tokens, (api, path)
        assert wire.charged(ask, cut, 0).tokens == ask.usage.tokens  # no head: the upstream failed
    # a chat stream that was not asked for usage: its reservation
    plain = (
        b'data: {"choices":[{"delta":{"content":"hi"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
    )
    reader = wire.UsageReader("openai-chat")
    reader.feed(plain)
    reader.finish()
    assert wire.charged(ask, reader, 200) == ask.usage
    # an error the upstream answered before serving: nothing (vendors bill none)
    error = wire.UsageReader("anthropic")
    error.feed(b'{"type": "error", "error": {"type": "overloaded_error"}}')
    error.finish()
    assert wire.charged(ask, error, 529).tokens == 0
    # a count answers the prompt's tokens, and that is what it counts
    count = wire.UsageReader("gemini", path="/v1beta/models/g:countTokens")
    count.feed(b'{"totalTokens": 1234}')
    count.finish()
    assert wire.charged(wire.Ask("g", 9000, 0), count, 200) == Usage("g", 1234, 0, 0, True)
    count = wire.UsageReader("anthropic", b'{"model": "c"}', "/v1/messages/count_tokens")
    count.feed(b'{"input_tokens": 4321}')
    count.finish()
    assert wire.charged(wire.Ask("c", 9000, 0), count, 200) == Usage("c", 4321, 0, 0, True)


def test_a_request_is_admitted_only_when_its_reservation_fits_what_is_left() -> None:
    caps = Caps(tokens=100_000, usd=1.0)
    assert wire.refused(caps, 30_000, 0.2, ask=70_000, ask_usd=0.8) == ""
    held = wire.refused(caps, 30_001, 0.2, ask=70_000)
    assert "70,000 tokens" in held and "69,999 are left" in held
    assert "$0.8500" in wire.refused(caps, 0, 0.2, ask=10, ask_usd=0.85)
    assert wire.refused(Caps(), 10**12, 10**6, ask=10**12, ask_usd=10**6) == ""


def test_a_recording_past_its_bound_names_what_it_left_out_and_writes_no_more(
    tmp_path: Path, answers: list[tuple[str, str, bytes, bytes]]
) -> None:
    folder, state = tmp_path / "history" / "iter-0001", tmp_path / "state"
    recording = exchanges.Recording(folder, state, limit=300_000)
    api, path, _, answer = answers[0]
    bodies = [json.dumps({"n": k, "pad": "z" * 100_000}).encode() for k in range(4)]
    for seq, body in enumerate(bodies):
        _record(recording, seq, api, path, body, answer)
    assert recording.over.startswith("the run's model recording reached its bound of 0 MiB")
    written = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    assert written <= 300_000
    lines = exchanges.read(folder, state)  # whole and sealed
    assert [line.request.cut for line in lines] == [0, 0, len(bodies[2]), len(bodies[3])]
    assert lines[2].request.sha256 == exchanges.sha256(bodies[2])  # named, not kept
    with pytest.raises(exchanges.RecordingRefused):
        exchanges.body(folder, lines[2].request)
    tight = exchanges.Recording(tmp_path / "history" / "iter-0002", state, limit=100)
    _record(tight, 1, api, path, b"{}", b"{}")
    assert tight.unwritten == 1 and tight.over
    assert exchanges.read(tmp_path / "history" / "iter-0002", state) == []
