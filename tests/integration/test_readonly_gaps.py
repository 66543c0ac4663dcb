"""`seed.py gaps` on a target whose tools are configured to write: its checkout stays as it was."""

from __future__ import annotations

import json
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


def test_gaps_runs_the_tests_once_and_leaves_a_map_the_daemons_next_run_keeps(
    tmp_path: Path,
) -> None:
    # one test run, no traced second suite: before Python 3.12 the map `gaps` leaves is the
    # tree's imports, from 3.12 the run's own (sys.monitoring)
    root = make_repo(tmp_path / "repo", SAMPLE, '[quality]\ntools = ["pytest"]\n')
    maps = root / ".git" / "seed" / "testmap"
    result = seed(root, "gaps", "--json")
    assert result.returncode == 0, result.stderr
    assert GapReport.model_validate_json(result.stdout).gaps == ()
    made = [json.loads(json.loads(p.read_text())["body"]) for p in maps.glob("*.json")]
    assert [m.get("imports", False) for m in made] == [sys.version_info < (3, 12)]
    # the daemon's analysis of a new HEAD selects from that map and leaves one for its tree
    (root / "tests" / "test_more.py").write_text("def test_more():\n    assert True\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "more")
    once = seed(root, "once")
    assert once.returncode == 5, once.stderr
    assert len(list(maps.glob("*.json"))) >= 1
