"""report.md for records of every outcome and every failure category."""

from __future__ import annotations

import re

import pytest

from domain import Candidate, FailureCategory, IterationOutcome, IterationRecord
from modules.reports.common import md
from modules.reports.markdown import render_record
from tests.histories import every_kind

RECORDS = every_kind()


def _id(record: IterationRecord) -> str:
    return record.failure_category.value if record.failure_category else record.outcome.value


def _tables(text: str) -> list[list[str]]:
    tables: list[list[str]] = []
    current: list[str] = []
    for line in text.splitlines():
        if line.startswith("|"):
            current.append(line)
        elif current:
            tables.append(current)
            current = []
    if current:
        tables.append(current)
    return tables


def _cells(line: str) -> int:
    return len(re.findall(r"(?<!\\)\|", line)) - 1


def test_the_samples_cover_every_outcome_and_every_category() -> None:
    assert {r.outcome for r in RECORDS} == set(IterationOutcome)
    assert {r.failure_category for r in RECORDS if r.failure_category} == set(FailureCategory)


@pytest.mark.parametrize("record", RECORDS, ids=_id)
def test_report_names_outcome_gap_reason_plan_verdicts_and_time(record: IterationRecord) -> None:
    text = render_record(record)

    title = text.splitlines()[0]
    assert title.startswith(f"# {record.iteration_id}: {record.outcome.value}")
    if record.failure_category:
        assert record.failure_category.value in title
    assert record.reason in text
    assert f"`{record.gap.key}`" in text
    # why this gap: its rank and what was passed over, and why
    assert "## Why this gap" in text and "Ranked #2 of" in text
    assert "quarantined" in text and "ranked lower" in text
    assert record.plan is not None and md(record.plan.goal) in text
    assert "Allowed files:" in text and "Acceptance criteria:" in text
    for verdict in record.verdicts:
        assert ("pass" if verdict.passed else "**FAIL**") in text
        if verdict.evidence:
            assert verdict.evidence in text
    assert "| **total** |" in text
    for table in _tables(text):
        widths = {_cells(line) for line in table}
        assert len(widths) == 1, f"ragged table: {table}"
    assert "<b>" not in text  # titles are people's text: no raw html on a code host


def test_success_links_the_commit_and_the_logs() -> None:
    record = next(r for r in RECORDS if r.outcome == IterationOutcome.SUCCESS)
    text = render_record(record)
    assert record.commit is not None and f"git show {record.commit[:12]}" in text
    assert "[agent.log](agent.log)" in text and "[plan.json](plan.json)" in text
    assert "## What the agent did" in text and "Removed the unused import." in text


def test_a_tournament_links_each_candidates_log_in_its_own_folder() -> None:
    """A tournament's folder holds no agent.log: each candidate's is in `<id>-cK/`."""
    record = next(r for r in RECORDS if r.outcome == IterationOutcome.SUCCESS)
    ran = [Candidate(number=k, backend="command", outcome=IterationOutcome.SUCCESS) for k in (1, 2)]
    text = render_record(record.model_copy(update={"candidates": ran}))
    for k in (1, 2):
        assert f"[candidate {k} agent.log](../{record.iteration_id}-c{k}/agent.log)" in text
    assert "[agent.log](agent.log)" not in text


def test_merge_blocked_names_the_kept_branch() -> None:
    record = next(r for r in RECORDS if r.outcome == IterationOutcome.MERGE_BLOCKED)
    text = render_record(record)
    assert f"git log -p seed/kept/{record.iteration_id}" in text


def test_test_regression_shows_the_failing_test_its_message_and_where() -> None:
    record = next(r for r in RECORDS if r.failure_category == FailureCategory.TEST_REGRESSION)
    text = render_record(record)
    section = text.split("## New problems the change introduced", 1)[1]
    assert "`tests/test_calc.py::test_add` failed: AssertionError: assert -1 == 5" in section
    assert "(at calc.py:2)" in section


def test_waiting_says_nothing_ran_and_links_no_agent_log() -> None:
    record = next(r for r in RECORDS if r.outcome == IterationOutcome.WAITING)
    text = render_record(record)
    assert "nothing ran; the plan is in plan.json" in text
    assert "agent.log" not in text
    assert "## What the agent did" not in text


def test_a_bare_record_without_plan_or_ranking_still_renders() -> None:
    record = RECORDS[0].model_copy(
        update={"plan": None, "ranking": (), "open_gaps": {}, "durations": {}, "verdicts": ()}
    )
    text = render_record(record)
    assert "The record holds no ranking for this iteration." in text
    assert "## Plan" not in text and "## Time" not in text
