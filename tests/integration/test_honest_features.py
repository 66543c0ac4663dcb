"""Honest features land: the docs that come with code, and a test asked of the agent before
a person is (issue 40, items 1 and 3)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.support import SAMPLE, agent_config, git, make_repo, records, seed

pytestmark = pytest.mark.usefixtures("bwrap")

TOOLS = '\n[quality]\ntools = ["ruff", "pytest"]\n'
DOCUMENTED: dict[str, str] = {
    **SAMPLE,
    "README.md": "# calc\n\nadd() and mul().\n",
    "docs/usage.md": "# Usage\n\n    add(2, 3)\n",
}
SUB = [
    {"append": "calc.py", "text": "\n\ndef sub(a, b):\n    return a - b\n"},
    {
        "append": "tests/test_calc.py",
        "text": "\n\ndef test_sub():\n    from calc import sub\n\n    assert sub(5, 3) == 2\n",
    },
    {"append": "README.md", "text": "\nsub() too.\n"},
    {"append": "docs/usage.md", "text": "\n    sub(5, 3)\n"},
]
"""The honest change: the code, its test, and the README and docs that go with it."""


def _task(repo: Path, text: str) -> None:
    (repo / "inbox").mkdir(exist_ok=True)
    (repo / "inbox" / "sub.md").write_text(text, encoding="utf-8")


def _once(tmp_path: Path, files: dict[str, str], config: str, task: str):
    repo = make_repo(tmp_path / "repo", files, config)
    head = git(repo, "rev-parse", "HEAD").strip()
    _task(repo, task)
    result = seed(repo, "once")
    [record] = records(repo)
    return repo, head, result, record


def test_a_feature_whose_change_updates_docs_and_readme_lands(tmp_path: Path) -> None:
    repo, head, result, record = _once(
        tmp_path,
        DOCUMENTED,
        agent_config(tmp_path, SUB, extra=TOOLS),
        "Add a sub(a, b) function to calc.py that returns a minus b.\n",
    )
    assert record["outcome"] == "SUCCESS", (record["reason"], result.stderr[-2000:])
    assert record["plan"]["task_kind"] == "feature"
    assert "sub() too." in git(repo, "show", "HEAD:README.md")
    assert "sub(5, 3)" in git(repo, "show", "HEAD:docs/usage.md")
    assert git(repo, "rev-parse", "HEAD~1").strip() == head


def test_the_same_change_with_an_edit_to_conftest_is_refused(tmp_path: Path) -> None:
    steps = [*SUB, {"write": "tests/conftest.py", "text": "collect_ignore = ['test_calc.py']\n"}]
    repo, head, _, record = _once(
        tmp_path,
        DOCUMENTED,
        agent_config(tmp_path, steps, extra=TOOLS),
        "Add a sub(a, b) function to calc.py that returns a minus b.\n",
    )
    assert record["outcome"] == "ROLLBACK", record["reason"]
    assert "tests/conftest.py" in record["reason"]
    assert record["failure_category"] in ("HYGIENE_VIOLATION", "ALLOWLIST_VIOLATION")
    assert git(repo, "rev-parse", "HEAD").strip() == head


SAFE_DIV = [
    {
        "append": "calc.py",
        "text": "\n\ndef safe_div(a, b):\n    if b == 0:\n        return None\n    return a / b\n",
    },
    {
        "append": "tests/test_calc.py",
        "text": "\n\ndef test_safe_div():\n    from calc import safe_div\n\n"
        "    assert safe_div(6, 3) == 2\n",
    },
]
"""A feature whose branch for b == 0 no test takes (calc.py:11, `return None`)."""
REACT = """
import os, pathlib
prompt = pathlib.Path(os.environ["SEED_PROMPT_FILE"]).read_text()
if "no test ran these lines: calc.py:11" in prompt and "`return None`" in prompt:
    with open("tests/test_calc.py", "a") as handle:
        handle.write("\\n\\ndef test_safe_div_by_zero():\\n    from calc import safe_div\\n\\n"
                     "    assert safe_div(1, 0) is None\\n")
"""
"""A round-two agent that adds the test only when the kernel's prompt names the line."""


def test_an_untested_branch_goes_back_to_the_agent_and_its_test_lands_it(tmp_path: Path) -> None:
    rounds = [SAFE_DIV, [{"run": [sys.executable, "-c", REACT]}]]
    repo, _, result, record = _once(
        tmp_path,
        SAMPLE,
        agent_config(tmp_path, [], extra=TOOLS, rounds=rounds),
        "Add a safe_div(a, b) function to calc.py: None when b is 0.\n",
    )
    assert record["outcome"] == "SUCCESS", (record["reason"], result.stderr[-2000:])
    first = record["rounds"][0]
    assert first["outcome"] == "KEPT" and "calc.py:11" in first["reason"], first
    assert "test_safe_div_by_zero" in git(repo, "show", "HEAD:tests/test_calc.py")
    assert record["uncovered"] == []
    assert git(repo, "branch", "--list", "seed/*").strip() == ""  # nothing waits for a person


def test_an_agent_that_says_why_no_test_can_be_written_is_kept_with_its_reason(
    tmp_path: Path,
) -> None:
    why = "b == 0 comes only from the hardware clock; no test can make it"
    rounds = [SAFE_DIV, [{"result": {"summary": why}}]]
    repo, head, _, record = _once(
        tmp_path,
        SAMPLE,
        agent_config(tmp_path, [], extra=TOOLS, rounds=rounds),
        "Add a safe_div(a, b) function to calc.py: None when b is 0.\n",
    )
    assert record["outcome"] == "KEPT", record["reason"]
    assert "no test ran these lines: calc.py:11" in record["reason"]
    assert why in record["reason"]
    assert git(repo, "rev-parse", "HEAD").strip() == head
    report = (repo / "history" / record["iteration_id"] / "report.md").read_text()
    assert why in report
    assert json.dumps(why)[1:-1] in json.dumps(record)
