"""history/README.md: newest first, totals, the halt and how to resume, quarantined gaps."""

from __future__ import annotations

from datetime import UTC, datetime

from domain import (
    EventNote,
    GapCategory,
    HaltNote,
    HistoryDigest,
    HistoryRow,
    HistoryTotals,
    RankedGap,
    Severity,
)
from modules.reports.index import render_index
from tests.histories import history_rows, synthetic

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def _rows(n: int) -> tuple[HistoryRow, ...]:
    return history_rows(synthetic(n))


def test_index_lists_newest_first_with_links_and_totals() -> None:
    rows = _rows(5)
    digest = HistoryDigest(
        generated_at=NOW,
        root_name="demo",
        rows=rows,
        totals=HistoryTotals(
            iterations=5,
            by_outcome={"SUCCESS": 3, "ROLLBACK": 1, "WAITING": 1},
            agent_runs=4,
            agent_landed=3,
            cost_usd=1.5,
            day="2026-06-01",
            cost_today_usd=0.25,
            iterations_today=2,
            max_cost_usd_per_day=10.0,
            max_iterations_per_day=100,
        ),
    )
    text = render_index(digest)
    ids = [line.split("](")[0][3:] for line in text.splitlines() if line.startswith("| [iter-")]
    assert ids == [r.iteration_id for r in rows]
    assert ids == sorted(ids, reverse=True)
    assert f"[{rows[0].iteration_id}]({rows[0].iteration_id}/report.md)" in text
    assert "75% (3 of 4 that ran an agent)" in text
    assert "$0.2500 of $10.00 (2 of 100 runs on 2026-06-01)" in text
    assert "Outcomes: SUCCESS 3, ROLLBACK 1, WAITING 1." in text
    assert "Not halted" in text and "HALTED" not in text
    assert text.endswith("\n")


def test_index_shows_the_halt_and_how_to_resume_and_quarantined_gaps() -> None:
    digest = HistoryDigest(
        generated_at=NOW,
        rows=_rows(2),
        totals=HistoryTotals(iterations=2, by_outcome={"FAILURE": 2}),
        halt=HaltNote(
            halted=True,
            reason="3 consecutive failures across different gaps",
            iteration_id="iter-0002-20260302-091300",
            since=NOW,
        ),
        quarantined=("pytest:tests/test_calc.py::test_case_7",),
        top_gaps=(
            RankedGap(
                key="ruff:a.py:F401",
                category=GapCategory.QUALITY,
                source="ruff",
                title="F401 in a.py",
                rank=1,
                severity=Severity.NORMAL,
            ),
        ),
    )
    digest = digest.model_copy(
        update={
            "events": (EventNote(at=NOW, kind="halt", message="3 consecutive failures <b>x</b>"),)
        }
    )
    text = render_index(digest)
    assert "- 2026-06-01 12:00Z halt: 3 consecutive failures &lt;b>x&lt;/b>" in text
    assert "**HALTED** since 2026-06-01 12:00Z (after iter-0002-20260302-091300)" in text
    assert "3 consecutive failures across different gaps" in text
    assert "`python seed.py resume`" in text
    quarantine = text.split("## Quarantined gaps", 1)[1]
    assert "`pytest:tests/test_calc.py::test_case_7`" in quarantine
    assert "1. `ruff:a.py:F401` F401 in a.py (ruff, normal)" in text


def test_index_says_how_to_see_older_iterations_and_handles_none() -> None:
    digest = HistoryDigest(generated_at=NOW, rows=_rows(3), totals=HistoryTotals(iterations=10_000))
    assert "The latest 3 of 10,000" in render_index(digest)
    empty = render_index(HistoryDigest(generated_at=NOW))
    assert "No iterations yet." in empty and "0 of 0" in empty


def test_a_category_that_repeats_the_outcome_is_shown_once() -> None:
    from domain import FailureCategory, IterationOutcome
    from tests.histories import START, record

    blocked = record(1, START, IterationOutcome.MERGE_BLOCKED, FailureCategory.MERGE_BLOCKED)
    rolled = record(2, START, IterationOutcome.ROLLBACK, FailureCategory.LINT_ERROR)
    digest = HistoryDigest(generated_at=NOW, rows=history_rows([rolled, blocked]))

    text = render_index(digest)

    assert "MERGE_BLOCKED MERGE_BLOCKED" not in text and "| MERGE_BLOCKED |" in text
    assert "| ROLLBACK LINT_ERROR |" in text
