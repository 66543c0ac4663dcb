"""`seed.py gaps` on a target whose tools are configured to write: its checkout stays as it was."""

from __future__ import annotations

from pathlib import Path

from domain import GapReport
from tests.planted import WRITING
from tests.support import make_repo, seed, snapshot


def test_gaps_on_a_target_that_asks_ruff_to_fix_changes_nothing_and_reports_everything(
    tmp_path: Path,
) -> None:
    root = make_repo(tmp_path / "repo", WRITING)
    before = snapshot(root)
    for _ in range(2):  # the second run answers from the measurement cache
        result = seed(root, "gaps", "--json")
        assert result.returncode == 0, result.stderr
        keys = {g.key for g in GapReport.model_validate_json(result.stdout).gaps}
        # a measurement that fixed as it went would only report what it could not fix
        assert {
            "ruff:old.py:F401",
            "ruff:old.py:UP006",
            "ruff:old.py:UP045",
            "ruff-format:old.py",
            "pyright:typed.py:reportAssignmentType",  # measured in a worktree under .git/
        } <= keys, keys
        assert snapshot(root) == before
