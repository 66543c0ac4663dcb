"""Quarantine: a gap that keeps failing is skipped until it, its files, or a person's ask changes."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from domain import FailureCategory, GapReport, IterationOutcome
from kernel.loop.quarantine import FilesDigest, quarantine, quarantine_reason, quarantined
from tests.unit.factories import T0, gap, inbox_gap, record

G = gap()


def digest_of(changes: dict[str, str]) -> FilesDigest:
    """Files' digest per commit: commits listed in `changes` hold other bytes."""

    def digest(commit: str, files: Sequence[str]) -> str:
        return changes.get(commit, "same") + "|" + ",".join(files)

    return digest


def test_three_failures_in_a_row_quarantine() -> None:
    history = [
        record(G, n, category=c, evidence=(str(n),))
        for n, c in enumerate(
            [FailureCategory.AGENT_ERROR, FailureCategory.LINT_ERROR, FailureCategory.TYPE_ERROR],
            start=1,
        )
    ]
    assert quarantine_reason(G, history[:2]) == ""
    assert quarantine_reason(G, history).startswith("failed 3 times in a row")


def test_twice_with_the_same_category_and_evidence_quarantine() -> None:
    alike = [record(G, n, evidence=("boom",)) for n in (1, 2)]
    assert "twice with the same category (AGENT_ERROR)" in quarantine_reason(G, alike)
    different = [record(G, 1, evidence=("boom",)), record(G, 2, evidence=("bang",))]
    assert quarantine_reason(G, different) == ""


def test_a_success_ends_the_streak_and_aborted_runs_do_not_count() -> None:
    history = [
        record(G, 1, evidence=("x",)),
        record(G, 2, IterationOutcome.SUCCESS, None),
        record(G, 3, evidence=("x",)),
    ]
    assert quarantine_reason(G, history) == ""
    history = [
        record(G, 1, evidence=("x",)),
        record(G, 2, IterationOutcome.ABORTED, None),
        record(G, 3, evidence=("x",)),
    ]
    assert quarantine_reason(G, history) != ""


def test_a_changed_gap_lifts_the_quarantine() -> None:
    history = [record(G, n, evidence=("x",)) for n in (1, 2)]
    moved = gap(evidence=())  # its findings are different now
    assert quarantine_reason(moved, history) == ""


def test_a_change_to_the_gaps_files_lifts_the_quarantine() -> None:
    history = [record(G, n, evidence=("x",), base=f"c{n}") for n in (1, 2)]
    unchanged = digest_of({})
    assert quarantine_reason(G, history, None, unchanged, "head") != ""
    edited = digest_of({"head": "edited"})  # the files differ at HEAD from both attempts
    assert quarantine_reason(G, history, None, edited, "head") == ""


def test_an_inbox_item_naming_the_gap_asks_again() -> None:
    history = [record(G, n, evidence=("x",)) for n in (1, 2)]
    later = T0 + timedelta(days=1)
    asks = inbox_gap("retry.md", "please retry", f"try {G.key} again", at=later)
    report = GapReport(gaps=(G, asks))
    assert quarantine(report, history) == {}
    stale = inbox_gap("old.md", "please retry", f"try {G.key} again", at=T0 - timedelta(days=1))
    unrelated = inbox_gap("other.md", "something else", at=later)
    assert set(quarantine(GapReport(gaps=(G, stale, unrelated)), history)) == {G.key}
    assert quarantined(GapReport(gaps=(G, unrelated)), history) == (G.key,)


def test_an_inbox_task_dropped_again_is_a_new_ask() -> None:
    task = inbox_gap("t.md", "do it")
    history = [record(task, n, evidence=("x",)) for n in (1, 2)]
    assert quarantine_reason(task, history) != ""
    again = inbox_gap("t.md", "do it", at=T0 + timedelta(hours=1))
    assert quarantine_reason(again, history) == ""


def test_other_gaps_failures_do_not_count() -> None:
    other = gap("ruff:other.py:F401")
    history = [record(G, 1, evidence=("x",)), record(other, 2, evidence=("x",))]
    assert quarantine_reason(G, history) == ""
