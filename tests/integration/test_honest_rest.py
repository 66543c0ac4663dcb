"""Honest features the judge read wrong: a test renamed with its body kept, and a doctest
the change edits with the behaviour it documents (issue 40)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import SAMPLE, agent_config, git, make_repo, records, seed

pytestmark = pytest.mark.usefixtures("bwrap")

TOOLS = '\n[quality]\ntools = ["ruff", "pytest"]\n'
TASK = "Add a sub(a, b) function to calc.py that returns a minus b.\n"
SUB = [
    {"append": "calc.py", "text": "\n\ndef sub(a, b):\n    return a - b\n"},
    {
        "append": "tests/test_calc.py",
        "text": "\n\ndef test_sub():\n    from calc import sub\n\n    assert sub(5, 3) == 2\n",
    },
]


def _once(tmp_path: Path, files: dict[str, str], steps: list[dict[str, str]], config: str = TOOLS):
    repo = make_repo(tmp_path / "repo", files, agent_config(tmp_path, steps, extra=config))
    head = git(repo, "rev-parse", "HEAD").strip()
    (repo / "inbox").mkdir(exist_ok=True)
    (repo / "inbox" / "sub.md").write_text(TASK, encoding="utf-8")
    result = seed(repo, "once")
    [record] = records(repo)
    return repo, head, result, record


def test_a_test_renamed_with_its_body_kept_lands(tmp_path: Path) -> None:
    rename = {
        "replace": "tests/test_calc.py",
        "old": "def test_add():",
        "new": "def test_addition():",
    }
    repo, head, result, record = _once(tmp_path, SAMPLE, [*SUB, rename])
    assert record["outcome"] == "SUCCESS", (record["reason"], result.stderr[-2000:])
    assert "def test_addition():" in git(repo, "show", "HEAD:tests/test_calc.py")
    assert git(repo, "rev-parse", "HEAD~1").strip() == head


def test_a_test_renamed_with_its_assert_gutted_is_refused(tmp_path: Path) -> None:
    gutted = {
        "replace": "tests/test_calc.py",
        "old": "def test_add():\n    assert add(2, 3) == 5",
        "new": "def test_addition():\n    add(2, 3)",
    }
    repo, head, _, record = _once(tmp_path, SAMPLE, [*SUB, gutted])
    assert record["outcome"] == "ROLLBACK", record["reason"]
    assert record["failure_category"] == "HYGIENE_VIOLATION"
    assert "test_add" in record["reason"]
    assert git(repo, "rev-parse", "HEAD").strip() == head


DOCTESTED: dict[str, str] = {
    **{k: v for k, v in SAMPLE.items() if k not in ("calc.py", "tests/test_calc.py")},
    "pyproject.toml": SAMPLE["pyproject.toml"]
    + '\n[tool.pytest.ini_options]\naddopts = "--doctest-modules"\n',
    "calc/__init__.py": "from calc.ops import add, greet\n\n__all__ = ['add', 'greet']\n",
    "calc/ops.py": (
        'def add(a, b):\n    """Add.\n\n    >>> add(2, 3)\n    5\n    """\n    return a + b\n\n\n'
        'def greet(name):\n    """Greet.\n\n    >>> greet("Ann")\n    \'Hello, Ann\'\n    """\n'
        '    return f"Hello, {name}"\n'
    ),
    "tests/test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
}
"""A package whose module holds doctests (pytest runs them: --doctest-modules)."""
SUB_DOCTESTED = [
    {
        "append": "calc/ops.py",
        "text": '\n\ndef sub(a, b):\n    """Subtract.\n\n    >>> sub(5, 3)\n    2\n    """\n'
        "    return a - b\n",
    },
    {"replace": "calc/__init__.py", "old": "add, greet\n", "new": "add, greet, sub\n"},
    {"replace": "calc/__init__.py", "old": "'greet']", "new": "'greet', 'sub']"},
    {
        "append": "tests/test_calc.py",
        "text": "\n\ndef test_sub():\n    from calc import sub\n\n    assert sub(5, 3) == 2\n",
    },
]
LOUDER = {"replace": "calc/ops.py", "old": 'f"Hello, {name}"', "new": 'f"Hello, {name}!"'}


def test_a_feature_whose_module_holds_doctests_lands(tmp_path: Path) -> None:
    repo, head, result, record = _once(tmp_path, DOCTESTED, SUB_DOCTESTED)
    assert record["outcome"] == "SUCCESS", (record["reason"], result.stderr[-2000:])
    assert "def sub(a, b):" in git(repo, "show", "HEAD:calc/ops.py")
    assert git(repo, "rev-parse", "HEAD~1").strip() == head


def test_a_doctest_the_change_edits_with_the_behaviour_is_kept_for_a_person(
    tmp_path: Path,
) -> None:
    edited = {"replace": "calc/ops.py", "old": "'Hello, Ann'", "new": "'Hello, Ann!'"}
    repo, head, _, record = _once(tmp_path, DOCTESTED, [*SUB_DOCTESTED, LOUDER, edited])
    assert record["outcome"] == "KEPT", record["reason"]
    assert "calc/ops.py::calc.ops.greet" in record["reason"] + json.dumps(record)
    assert git(repo, "rev-parse", "HEAD").strip() == head


def test_a_doctest_the_change_left_alone_that_now_fails_is_a_regression(tmp_path: Path) -> None:
    repo, head, _, record = _once(tmp_path, DOCTESTED, [*SUB_DOCTESTED, LOUDER])
    assert record["outcome"] == "ROLLBACK", record["reason"]
    assert record["failure_category"] == "TEST_REGRESSION"
    assert "calc/ops.py::calc.ops.greet" in record["reason"]
    assert git(repo, "rev-parse", "HEAD").strip() == head
