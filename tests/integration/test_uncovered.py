"""Nothing lands on the word of no test: changed lines no passing test ran are named, a
change that leaves them is kept for a person, and a public name removed is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.test_ratchet import TOOLS
from tests.support import agent_config, git, make_repo, records, seed

pytestmark = pytest.mark.usefixtures("bwrap")

LINT: dict[str, str] = {
    "calc.py": "def add(a, b):\n    return a + b\n\n\ndef twice(a):\n    return add(a, a) + missing\n",
    ".gitignore": "history/*\ninbox/*\n*.log\n__pycache__/\n",
    "pyproject.toml": '[tool.ruff.lint]\nselect = ["E4", "E7", "E9", "F"]\n\n[tool.ruff.format]\n',
}
"""An untested project with one lint finding: an undefined name (F821)."""

TESTED: dict[str, str] = {
    **LINT,
    "tests/test_calc.py": "from calc import add, twice\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
}
"""The same project with a test of add() (twice() is run by no test)."""


def _once(tmp_path: Path, files: dict[str, str], steps: list[dict[str, str]], extra: str = TOOLS):
    repo = make_repo(tmp_path / "repo", files, agent_config(tmp_path, steps, extra=extra))
    head = git(repo, "rev-parse", "HEAD").strip()
    result = seed(repo, "once")
    [record] = records(repo)
    return repo, head, result, record


def test_a_module_replaced_by_print_none_is_refused_for_removing_add(tmp_path: Path) -> None:
    steps = [{"write": "calc.py", "text": "print(None)\n"}]

    repo, head, result, record = _once(tmp_path, LINT, steps)

    assert record["outcome"] == "ROLLBACK", record["reason"]
    assert record["failure_category"] == "PUBLIC_NAME_REMOVED"
    assert "add" in record["reason"] and "twice" in record["reason"]
    assert any("calc.py: add" in e for e in record["evidence"]), record["evidence"]
    assert git(repo, "rev-parse", "HEAD").strip() == head
    assert result.returncode == 1


def test_an_untested_fix_is_kept_and_says_no_test_ran_its_lines(tmp_path: Path) -> None:
    steps = [{"replace": "calc.py", "old": "+ missing", "new": "+ 0"}]

    repo, head, result, record = _once(tmp_path, LINT, steps)

    assert record["outcome"] == "KEPT", record["reason"]
    assert "no test ran these lines: calc.py:6" in record["reason"]
    assert record["uncovered"] == ["calc.py:6"]
    assert git(repo, "rev-parse", "HEAD").strip() == head  # nothing landed
    assert git(repo, "show", f"{record['kept_branch']}:calc.py").endswith("+ 0\n")
    report = (repo / "history" / record["iteration_id"] / "report.md").read_text()
    assert "no test ran these lines" in report and "calc.py:6" in report
    status = seed(repo, "status").stdout
    assert "no test ran these lines: calc.py:6" in status, status
    # a person lands it, naming it by its number as `history` does; the kept branch goes
    assert seed(repo, "history", "1").returncode == 0
    approved = seed(repo, "approve", "1")
    assert approved.returncode == 0, approved.stderr
    assert git(repo, "show", "HEAD:calc.py").endswith("+ 0\n")
    assert git(repo, "branch", "--list", "seed/*").strip() == ""
    assert result.returncode == 1  # `once` landed nothing


def test_uncovered_land_in_seed_toml_lands_it_and_still_says_so(tmp_path: Path) -> None:
    steps = [{"replace": "calc.py", "old": "+ missing", "new": "+ 0"}]

    repo, head, _, record = _once(
        tmp_path, LINT, steps, extra=TOOLS + '\n[landing]\nuncovered = "land"\n'
    )

    assert record["outcome"] == "SUCCESS", record["reason"]
    assert record["uncovered"] == ["calc.py:6"]
    assert "no test ran these lines: calc.py:6" in record["reason"]
    assert git(repo, "rev-parse", "HEAD~1").strip() == head


def test_a_covered_change_lands_as_before(tmp_path: Path) -> None:
    files = {
        **TESTED,
        "calc.py": "def add(a, b):\n    return a + b + missing\n\n\ndef twice(a):\n    return add(a, a)\n",
    }
    steps = [{"replace": "calc.py", "old": "a + b + missing", "new": "a + b"}]

    repo, head, result, record = _once(tmp_path, files, steps)

    assert record["outcome"] == "SUCCESS", record["reason"]
    assert record["uncovered"] == []
    assert "no test ran" not in record["reason"]
    assert git(repo, "rev-parse", "HEAD~1").strip() == head
    assert result.returncode == 0


def test_ruff_fix_lint_fix_in_an_untested_repo_still_lands(tmp_path: Path) -> None:
    files = {**LINT, "calc.py": "import os\n\n\ndef add(a, b):\n    return a + b\n"}
    repo = make_repo(
        tmp_path / "repo", files, '[agent]\nbackend = "ruff-fix"\n' + TOOLS.replace("\n[", "[", 1)
    )
    head = git(repo, "rev-parse", "HEAD").strip()

    result = seed(repo, "once")

    [record] = records(repo)
    assert record["outcome"] == "SUCCESS", json.dumps(record)[:2000]
    assert record["uncovered"] == ["calc.py: lines removed after line 0"]
    assert git(repo, "rev-parse", "HEAD~1").strip() == head
    assert result.returncode == 0
