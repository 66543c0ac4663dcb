"""`seed.py gaps` on a target whose tools are configured to write: its checkout stays as it was."""

from __future__ import annotations

import sys
from pathlib import Path

from domain import GapReport
from tests.planted import WRITING
from tests.support import SAMPLE, git, make_repo, seed, snapshot


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


def test_gaps_runs_the_tests_once_and_the_daemons_next_whole_run_maps_them(
    tmp_path: Path,
) -> None:
    # before Python 3.12 the test map needs a traced run of its own (a second whole suite):
    # a look at the gaps does without it; on 3.12+ the one run maps, unseen, for free
    root = make_repo(tmp_path / "repo", SAMPLE, '[quality]\ntools = ["pytest"]\n')
    maps = root / ".git" / "seed" / "testmap"
    result = seed(root, "gaps", "--json")
    assert result.returncode == 0, result.stderr
    assert GapReport.model_validate_json(result.stdout).gaps == ()
    assert bool(list(maps.glob("*.json"))) == (sys.version_info >= (3, 12))
    # the daemon's analysis of a new HEAD finds no map to select from, runs the whole suite
    # and maps it
    (root / "tests" / "test_more.py").write_text("def test_more():\n    assert True\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "more")
    once = seed(root, "once")
    assert once.returncode == 5, once.stderr
    assert list(maps.glob("*.json"))
