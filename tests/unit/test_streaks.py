"""Streaks count what they say: distinct gaps, the failures' own category, whole commands."""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path

from domain import FailureCategory, IterationOutcome
from kernel.isolation.paths import SEED_HOME, Paths
from kernel.loop.quarantine import quarantine_reason
from kernel.records import halt
from tests.unit.factories import gap, record

A, B, C = gap("ruff:a.py:F401"), gap("ruff:b.py:F401"), gap("ruff:c.py:F401")


def test_three_failures_of_two_gaps_are_no_streak_across_different_gaps() -> None:
    # the finding: two of the three were the same gap, one an older unrelated failure
    seen = [record(C, 1), record(A, 2), record(A, 3)]
    assert halt.halt_reason(seen[-1], seen) == ""
    three = [record(A, 1), record(B, 2), record(A, 3), record(C, 4)]
    reason = halt.halt_reason(three[-1], three)
    assert reason.startswith("4 consecutive failures across 3 different gaps")
    assert all(g.key in reason for g in (A, B, C))


def test_only_failures_since_the_last_resume_count_towards_distinct_gaps() -> None:
    history = [record(C, 1), record(A, 2), record(B, 3)]
    resumed = (history[0].ended_at + timedelta(seconds=1)).isoformat()
    assert halt.halt_reason(history[-1], history, resumed) == ""
    more = [*history, record(C, 4)]
    assert "3 different gaps" in halt.halt_reason(more[-1], more, resumed)


def test_failures_with_no_category_never_quarantine_as_the_same_category() -> None:
    # an agent or tool that fails without saying why says nothing about the gap
    silent = [record(A, n, IterationOutcome.NO_CHANGE, None, evidence=("nothing",)) for n in (1, 2)]
    assert quarantine_reason(A, silent) == ""
    alike = [
        record(A, n, IterationOutcome.ROLLBACK, FailureCategory.TEST_REGRESSION, ("t::x",))
        for n in (1, 2)
    ]
    assert "same category (TEST_REGRESSION)" in quarantine_reason(A, alike)
    assert "none" not in quarantine_reason(A, alike)


def test_a_command_for_a_person_names_the_repository_when_it_is_not_seeds_own(
    tmp_path: Path,
) -> None:
    other = Paths(tmp_path / "repo", tmp_path / "repo" / ".git")
    said = other.command("resume")
    assert said == f"python {SEED_HOME / 'seed.py'} --root {tmp_path / 'repo'} resume"
    own = Paths(SEED_HOME, SEED_HOME / ".git")
    assert own.command("approve", "iter-0001") == "python seed.py approve iter-0001"
    odd = Paths(tmp_path / "my repo", tmp_path / "my repo" / ".git")
    assert f"--root '{tmp_path / 'my repo'}' resume" in odd.command("resume")
    assert sys.executable not in said
