"""Localisation by execution, end to end: the fix lives in a file the traceback never names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import agent_config, git, make_repo, records, seed
from tests.unit.test_localise import FILES

pytestmark = pytest.mark.usefixtures("bwrap")

TOOLS = '[quality]\ntools = ["ruff", "pytest"]\n'
FIX = {"replace": "pkg/strutils.py", "old": "n // 1000", "new": "n // 1024"}


def test_the_plan_allows_the_executed_file_the_traceback_does_not_name(tmp_path: Path) -> None:
    files = {**FILES, ".gitignore": "history/*\ninbox/*\n__pycache__/\n"}
    repo = make_repo(tmp_path / "repo", files, agent_config(tmp_path, [FIX], extra=TOOLS))
    head = git(repo, "rev-parse", "HEAD").strip()

    result = seed(repo, "once")

    [record] = records(repo)
    assert record["gap"]["key"] == "pytest:tests/test_api.py::test_kilo", record
    plan = json.loads((repo / "history" / record["iteration_id"] / "plan.json").read_text())
    [evidence] = plan["gap"]["evidence"]
    assert "pkg/strutils.py" not in evidence["detail"]  # the traceback stops in the test
    assert "pkg/strutils.py" in [e["file"] for e in evidence["executed"]]
    assert plan["suspect_files"][0] == "pkg/strutils.py"
    assert plan["suspect_lines"][0] == "4"  # only the failing test ran the buggy line
    prompt = (repo / "history" / record["iteration_id"] / "prompt.md").read_text()
    assert "`pkg/strutils.py` lines 4" in prompt
    assert result.returncode == 0 and record["outcome"] == "SUCCESS", result.stderr[-3000:]
    assert git(repo, "rev-parse", "HEAD~1").strip() == head
    assert "n // 1024" in git(repo, "show", "HEAD:pkg/strutils.py")
