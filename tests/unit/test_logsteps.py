"""The agent's log read for stuck runs (kernel/records/logsteps.py): only the known events
of Claude Code's stream-json and Codex's --json count, ids aside."""

from __future__ import annotations

import json

from kernel.records.logsteps import LogRepeats, Reader


def _line(value: dict[str, object]) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _claude(n: int, command: str, output: str, parent: str | None = None) -> list[bytes]:
    use = f"toolu_{n}"
    call = {"type": "tool_use", "id": use, "name": "Bash", "input": {"command": command}}
    result = {"type": "tool_result", "tool_use_id": use, "content": output, "is_error": False}
    return [
        _line(
            {
                "type": "assistant",
                "message": {"id": f"m{n}", "content": [call]},
                "parent_tool_use_id": parent,
            }
        ),
        _line({"type": "user", "message": {"content": [result]}, "parent_tool_use_id": parent}),
    ]


def _codex(n: int, command: str, output: str) -> bytes:
    item = {
        "id": f"item_{n}",
        "type": "command_execution",
        "command": command,
        "aggregated_output": output,
        "exit_code": 1,
        "status": "failed",
    }
    return _line({"type": "item.completed", "item": item})


def _stuck_at(lines: list[bytes], limit: int = 3) -> int:
    """The line at which the run is stuck (0: never)."""
    reader, repeats = Reader(), LogRepeats(limit)
    for at, raw in enumerate(lines, 1):
        if any(repeats.seen(step) for step in reader.line(raw).steps):
            return at
    return 0


def test_claude_calls_alike_with_their_results_count_ids_aside() -> None:
    lines = [line for n in range(5) for line in _claude(n, "pytest -x", "1 failed")]
    assert _stuck_at(lines) == 6


def test_a_different_result_breaks_the_count() -> None:
    lines = [line for n in range(5) for line in _claude(n, "pytest -x", f"{n % 2} failed")]
    assert _stuck_at(lines) == 0


def test_a_retry_event_between_calls_neither_counts_nor_breaks() -> None:
    retry = _line({"type": "system", "subtype": "api_retry", "error": "overloaded"})
    lines = [line for n in range(3) for line in (*_claude(n, "ls", "a.py"), retry)]
    assert _stuck_at(lines) == 8


def test_sub_agents_count_apart() -> None:
    lines: list[bytes] = []
    for n in range(3):
        lines += _claude(n, "ls", "a.py")
        lines += _claude(100 + n, f"cat {n}", "x", parent="toolu_task")
    assert _stuck_at(lines) == 10


def test_codex_items_alike_count() -> None:
    assert _stuck_at([_codex(n, "/bin/bash -lc 'pytest'", "1 failed") for n in range(4)]) == 3
    started = _line({"type": "item.started", "item": {"id": "i", "type": "command_execution"}})
    assert _stuck_at([started] * 10) == 0


def test_text_and_other_shapes_are_never_read() -> None:
    text = b"$ pytest -x\n1 failed"
    echoed = b'  {"type":"item.completed","item":{"type":"command_execution"}}'
    assert _stuck_at([text] * 10 + [echoed] * 10 + [b"{not json"] * 3) == 0


def test_each_tool_calling_message_is_one_turn() -> None:
    reader = Reader()
    both = {
        "type": "assistant",
        "message": {
            "id": "m1",
            "content": [
                {"type": "tool_use", "id": "a", "name": "Read", "input": {"path": "x"}},
                {"type": "tool_use", "id": "b", "name": "Read", "input": {"path": "y"}},
            ],
        },
    }
    assert reader.line(_line(both)).turns == 1
    assert reader.line(_line(both)).turns == 0  # the same message printed again
    assert reader.line(_codex(1, "ls", "")).turns == 1
