"""Failures fed back: every earlier attempt's evidence rides in the plan and shows in the prompt."""

from __future__ import annotations

from domain import Diagnostic, FailureCategory, IterationOutcome, Tool
from modules.planner.prompt import render_prompt
from modules.planner.tests.factory import failing_test, lint_gap, must_plan, pytest_gap, record


def test_each_failed_attempt_becomes_a_note_with_its_evidence() -> None:
    gap = pytest_gap()
    broke = failing_test("tests/test_other.py::test_mul", frame="calc.py")
    attempt = record(
        gap,
        1,
        failures=[broke],
        touched=["calc.py", "tests/test_calc.py"],
        reason="criterion failed: these tests pass: tests/test_other.py::test_mul",
        summary="I rewrote add() with a loop",
        evidence=["tests/test_other.py::test_mul failed: assert -1 == 5"],
    )
    result = must_plan([gap], [attempt])
    (note,) = result.history
    assert note.iteration_id == attempt.iteration_id
    assert note.outcome == IterationOutcome.ROLLBACK
    assert note.failure_category == FailureCategory.TEST_REGRESSION
    assert note.failing_tests == ("tests/test_other.py::test_mul",)
    assert note.trace_head.startswith("    def test_add():")
    assert note.touched_files == ("calc.py", "tests/test_calc.py")
    assert note.reason == attempt.reason
    assert note.agent_summary == "I rewrote add() with a loop"
    assert note.evidence == ("tests/test_other.py::test_mul failed: assert -1 == 5",)
    assert note.backend == "command"


def test_notes_cover_the_current_streak_only_oldest_first() -> None:
    gap = lint_gap()
    history = [
        record(gap, 1, reason="old failure"),
        record(gap, 2, IterationOutcome.SUCCESS),
        record(gap, 3, reason="first", category=FailureCategory.AGENT_ERROR),
        record(gap, 4, IterationOutcome.WAITING, None),
        record(gap, 5, reason="second", category=FailureCategory.TYPE_ERROR),
    ]
    result = must_plan([gap], history)
    assert [n.reason for n in result.history] == ["first", "second"]


def test_records_of_other_gaps_are_not_notes() -> None:
    gap, other = lint_gap(), pytest_gap()
    result = must_plan([gap], [record(other, 1), record(other, 2)])
    assert result.history == ()


def test_records_arriving_out_of_order_are_read_by_sequence() -> None:
    gap = lint_gap()
    history = [
        record(gap, 3, reason="third"),
        record(gap, 1, reason="first"),
        record(gap, 2, IterationOutcome.SUCCESS),
    ]
    result = must_plan([gap], history)
    assert [n.reason for n in result.history] == ["third"]


def test_the_prompt_shows_what_was_tried_and_asks_for_a_different_approach() -> None:
    gap = pytest_gap()
    attempt = record(
        gap,
        1,
        failures=[failing_test("tests/test_other.py::test_mul")],
        touched=["calc.py"],
        reason="criterion failed: the failing tests pass",
        summary="I replaced the minus with a plus",
    )
    prompt = render_prompt(must_plan([gap], [attempt]))
    section = prompt.split("## What was tried and why it failed", 1)[1].split("## Documents")[0]
    assert attempt.iteration_id in section
    assert "TEST_REGRESSION" in section
    assert "`tests/test_other.py::test_mul`" in section
    assert "touched: `calc.py`" in section
    assert "why it was rejected: criterion failed: the failing tests pass" in section
    assert "I replaced the minus with a plus" in section
    assert "head of the trace:" in section
    assert "take a different approach" in section


def test_a_first_attempt_has_no_history_section() -> None:
    prompt = render_prompt(must_plan([pytest_gap()]))
    assert "## What was tried" not in prompt and "first attempt" not in prompt
    assert "## Rules" in prompt


def test_long_evidence_is_capped() -> None:
    gap = pytest_gap()
    huge = Diagnostic(
        tool=Tool.PYTEST, file="t.py", rule="failed", node_id="t.py::t", detail="x" * 50_000
    )
    attempt = record(gap, 1, failures=[huge], summary="s" * 50_000, reason="r" * 50_000)
    (note,) = must_plan([gap], [attempt]).history
    assert len(note.trace_head) <= 1200
    assert len(note.agent_summary) <= 800
    assert len(note.reason) <= 500
