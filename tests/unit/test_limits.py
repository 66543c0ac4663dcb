"""Reading a usage limit from the upstream's answer, the pause it writes, and counting repeats."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from kernel.records import limits, repeats

NOW = datetime(2026, 12, 7, 2, 0, tzinfo=UTC)
ANTHROPIC = json.dumps({"type": "error", "error": {"type": "rate_limit_error", "message": "x"}})
OPENAI = json.dumps({"error": {"type": "insufficient_quota", "code": "insufficient_quota"}})


def test_retry_after_in_seconds_or_as_an_http_date() -> None:
    seconds = limits.of_answer(429, [("Retry-After", "5")], b"", NOW)
    assert seconds is not None and seconds.until == NOW + timedelta(seconds=5)
    date = limits.of_answer(429, [("retry-after", "Mon, 07 Dec 2026 04:00:00 GMT")], b"", NOW)
    assert date is not None and date.until == datetime(2026, 12, 7, 4, 0, tzinfo=UTC)


def test_the_vendors_reset_headers_the_exhausted_one_counts() -> None:
    anthropic = [
        ("anthropic-ratelimit-requests-remaining", "10"),
        ("anthropic-ratelimit-requests-reset", "2026-12-07T02:00:30Z"),
        ("anthropic-ratelimit-tokens-remaining", "0"),
        ("anthropic-ratelimit-tokens-reset", "2026-12-07T02:01:00Z"),
    ]
    found = limits.of_answer(429, anthropic, ANTHROPIC.encode(), NOW)
    assert found is not None and found.until == NOW + timedelta(minutes=1)
    assert "rate_limit_error" in found.why
    openai = [("x-ratelimit-reset-requests", "1h2m3.5s"), ("x-ratelimit-reset-tokens", "20ms")]
    found = limits.of_answer(429, openai, b"", NOW)
    assert found is not None and found.until == NOW + timedelta(hours=1, minutes=2, seconds=3.5)
    unified = [
        ("anthropic-ratelimit-unified-reset", str(int((NOW + timedelta(hours=2)).timestamp())))
    ]
    found = limits.of_answer(429, unified, b"", NOW)
    assert found is not None and found.until == NOW + timedelta(hours=2)


def test_a_limit_body_without_a_reset_is_a_limit_with_none() -> None:
    found = limits.of_answer(429, [], OPENAI.encode(), NOW)
    assert found is not None and found.until is None
    assert "insufficient_quota" in found.why


def test_only_a_429_with_a_reset_or_a_limit_body_is_a_limit() -> None:
    assert limits.of_answer(200, [("retry-after", "5")], ANTHROPIC.encode(), NOW) is None
    assert limits.of_answer(529, [("retry-after", "5")], b"", NOW) is None  # overloaded
    assert limits.of_answer(403, [], OPENAI.encode(), NOW) is None  # the gateway's own refusal
    assert limits.of_answer(429, [], b'{"error": {"message": "who knows"}}', NOW) is None
    assert limits.of_answer(429, [("retry-after", "soon")], b"not json", NOW) is None


def test_the_pause_lasts_a_day_at_most_and_a_backoff_without_a_reset(tmp_path: Path) -> None:
    far = limits.Limit("429", NOW + timedelta(days=30))
    assert limits.bounded(far, NOW, 900) == NOW + timedelta(days=1)
    assert limits.bounded(limits.Limit("429"), NOW, 900) == NOW + timedelta(seconds=900)
    now = datetime.now(UTC)
    limits.pause(tmp_path, now + timedelta(seconds=60), "the model's upstream answered 429", "i1")
    limits.pause(tmp_path, now + timedelta(seconds=30), "again", "i2")  # the later reset stays
    paused = limits.waiting(tmp_path, now)
    assert paused is not None and paused.moment() == now + timedelta(seconds=60)
    assert limits.waiting(tmp_path, now + timedelta(seconds=61)) is None
    (tmp_path / limits.LIMIT_FILE).write_text("{not json")
    assert limits.waiting(tmp_path, now) is None


def test_each_backends_pause_holds_all_only_when_every_backend_is_paused(tmp_path: Path) -> None:
    now = datetime.now(UTC)
    limits.pause(tmp_path, now + timedelta(seconds=60), "claude's 429", "i1", "claude")
    both = {"claude", "codex"}
    assert limits.holding(tmp_path, now, "all", both) is not None  # the default: all wait
    assert limits.holding(tmp_path, now, "backend", both) is None  # codex runs meanwhile
    assert limits.shown(tmp_path, now, "backend", both)[1] == "claude"
    assert limits.holding(tmp_path, now, "backend", {"claude"}) is not None  # no other
    limits.pause(tmp_path, now + timedelta(seconds=30), "codex's 429", "i2", "codex")
    first = limits.holding(tmp_path, now, "backend", both)
    assert first is not None and first.backend == "codex"  # the daemon wakes at the first reset
    assert set(limits.paused_backends(tmp_path, now + timedelta(seconds=31))) == {"claude"}
    whole = limits.waiting(tmp_path, now)
    assert whole is not None and whole.moment() == now + timedelta(seconds=60)


def test_a_pause_that_names_no_backend_holds_every_agent(tmp_path: Path) -> None:
    now = datetime.now(UTC)
    until = (now + timedelta(seconds=60)).isoformat()
    doc = {"until": until, "reason": "429", "iteration_id": "i1", "at": now.isoformat()}
    (tmp_path / limits.LIMIT_FILE).write_text(json.dumps(doc))  # as written before backends
    assert limits.holding(tmp_path, now, "backend", {"claude", "codex"}) is not None


def _chat(n: int, result: str = "done") -> bytes:
    """The agent's n-th request: the same tool call and result each time (new ids)."""
    messages: list[dict[str, object]] = [{"role": "user", "content": "fix calc.py"}]
    for i in range(n):
        call = {"id": f"call_{i}", "type": "function", "function": {"name": "replace"}}
        messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"call_{i}", "content": result})
    return json.dumps({"model": "m", "messages": messages}).encode()


def _answer(n: int) -> bytes:
    return f'data: {{"id": "chatcmpl-{n}", "created": {1700000000 + n}}}\n\n'.encode()


def test_eight_requests_alike_in_a_row_are_stuck() -> None:
    seen = repeats.Repeats(8)
    said = [seen.seen(_chat(n), 200, _answer(n)) for n in range(9)]
    assert said[:8] == [""] * 8  # the first request adds no step; then seven alike
    assert said[8].startswith("8 identical model requests in a row")


def test_an_error_answer_is_not_counted_and_a_change_starts_again() -> None:
    seen = repeats.Repeats(3)
    assert seen.seen(_chat(1), 200, _answer(1)) == ""
    assert seen.seen(_chat(2), 429, b"limited") == ""  # a retry after it: not a repeat
    assert seen.seen(_chat(2), 200, _answer(2)) == ""
    assert seen.seen(_chat(3, "other"), 200, _answer(3)) == ""  # a new result: count again
    assert seen.seen(_chat(4, "other"), 200, _answer(4)) == ""
    assert seen.seen(_chat(5, "other"), 200, _answer(5)) != ""
    assert repeats.Repeats(0).seen(_chat(3), 200, _answer(3)) == ""  # off
