"""The ratchet end to end: real tools judge the agent's tree against the baseline's findings,
with the gate configuration of the baseline commit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support import agent_config, git, make_repo, records, seed

BUGGY: dict[str, str] = {
    "calc.py": (
        "def add(a: int, b: int) -> int:\n"
        "    return a - b\n"
        "\n\n"
        "def is_none(x: object) -> bool:\n"
        "    return x is None\n"
    ),
    "tests/test_calc.py": (
        "from calc import add\n\n\ndef test_add() -> None:\n    assert add(2, 3) == 5\n"
    ),
    "pyproject.toml": (
        '[tool.ruff.lint]\nselect = ["E", "F"]\n\n[tool.pytest.ini_options]\npythonpath = ["."]\n'
    ),
    ".gitignore": "history/*\ninbox/*\n__pycache__/\n",
}
"""The failing test tests/test_calc.py::test_add is the top gap (a broken build)."""

FIX = {"replace": "calc.py", "old": "return a - b", "new": "return a + b"}
TOOLS = '\n[quality]\ntools = ["ruff", "ruff-format", "pytest"]\n'


def _once(
    tmp_path: Path,
    files: dict[str, str],
    steps: list[dict[str, Any]],
    extra: str = TOOLS,
    task: str = "",
    gap: str = "pytest:tests/test_calc.py::test_add",
):
    repo = make_repo(tmp_path / "repo", files, agent_config(tmp_path, steps, extra=extra))
    if task:
        (repo / "inbox").mkdir()
        (repo / "inbox" / "task.md").write_text(task, encoding="utf-8")
    head = git(repo, "rev-parse", "HEAD").strip()
    result = seed(repo, "once")
    [record] = records(repo)
    assert record["gap"]["key"] == gap, record
    return repo, head, result, record


def test_fixing_the_target_but_adding_a_lint_error_elsewhere_is_rejected(tmp_path: Path) -> None:
    # the fix is in calc.py; the new finding is in another file the plan allows
    helper = "\n\ndef _helper() -> None:\n    unused = 1\n"
    steps = [FIX, {"append": "tests/test_calc.py", "text": helper}]
    repo, head, result, record = _once(tmp_path, BUGGY, steps)
    assert result.returncode == 1, result.stderr
    assert (record["outcome"], record["failure_category"]) == ("ROLLBACK", "LINT_ERROR")
    evidence = record["evidence"]
    assert any("tests/test_calc.py" in e and "F841" in e for e in evidence), evidence
    assert git(repo, "rev-parse", "HEAD").strip() == head
    assert "_helper" not in (repo / "tests" / "test_calc.py").read_text()


def test_touching_a_file_with_an_unrelated_old_error_is_not_blamed(tmp_path: Path) -> None:
    files = dict(BUGGY)
    files["calc.py"] = BUGGY["calc.py"].replace("return x is None", "return x == None")  # E711
    steps = [
        FIX,
        {"replace": "calc.py", "old": "def add(", "new": '"""Arithmetic."""\n\n\ndef add('},
    ]
    # all four tools, pyright included: the old E711 moves down three lines and stays
    repo, head, result, record = _once(tmp_path, files, steps, extra="")
    assert result.returncode == 0, result.stderr + str(record)
    assert record["outcome"] == "SUCCESS" and record["touched_files"] == ["calc.py"]
    assert git(repo, "rev-parse", "HEAD^").strip() == head
    assert "return x == None" in (repo / "calc.py").read_text()


RELAX_TASK = """+++
title = "Add is_empty to calc.py"
priority = "critical"
allowed = ["calc.py", "pyproject.toml", ".ruff.toml", "sub/ruff.toml", "tests/test_calc.py"]
+++
Add is_empty(x) to calc.py, with a test.
"""


def test_relaxing_tool_ruff_in_the_change_does_not_relax_the_judgement(tmp_path: Path) -> None:
    files = {**BUGGY, "calc.py": BUGGY["calc.py"].replace("return a - b", "return a + b")}
    steps = [
        {
            "replace": "pyproject.toml",
            "old": 'select = ["E", "F"]',
            "new": 'select = ["E", "F"]\nignore = ["E711"]',
        },
        # a config ruff would find first (.ruff.toml wins over pyproject.toml), and a nested one
        {"write": ".ruff.toml", "text": '[lint]\nselect = ["E9"]\n'},
        {"write": "sub/ruff.toml", "text": '[lint]\nselect = ["E9"]\n'},
        {
            "append": "calc.py",
            "text": "\n\ndef is_empty(x: object) -> bool:\n    return x == None\n",
        },
        {
            "append": "tests/test_calc.py",
            "text": "\n\ndef test_is_empty() -> None:\n    from calc import is_empty\n\n"
            "    assert is_empty(None)\n",
        },
    ]
    repo, head, result, record = _once(tmp_path, files, steps, task=RELAX_TASK, gap="inbox:task.md")
    assert result.returncode == 1, result.stderr
    assert (record["outcome"], record["failure_category"]) == ("ROLLBACK", "LINT_ERROR")
    assert any("E711" in e for e in record["evidence"]), record["evidence"]
    assert git(repo, "rev-parse", "HEAD").strip() == head
    assert "ignore" not in (repo / "pyproject.toml").read_text()
    assert not (repo / ".ruff.toml").exists()


def test_a_landed_roadmap_item_is_ticked_in_the_same_commit(tmp_path: Path) -> None:
    files = {
        "calc.py": "def add(a: int, b: int) -> int:\n    return a + b\n",
        "tests/test_calc.py": BUGGY["tests/test_calc.py"],
        "pyproject.toml": BUGGY["pyproject.toml"],
        ".gitignore": BUGGY[".gitignore"],
        "ROADMAP.md": "# Next\n- [ ] add a sub function\n- [ ] add a sub function test suite\n",
    }
    steps = [
        {"append": "calc.py", "text": "\n\ndef sub(a: int, b: int) -> int:\n    return a - b\n"},
        {
            "write": "tests/test_sub.py",
            "text": "from calc import sub\n\n\ndef test_sub() -> None:\n    assert sub(5, 3) == 2\n",
        },
    ]
    repo = make_repo(tmp_path / "repo", files, agent_config(tmp_path, steps, extra=TOOLS))
    result = seed(repo, "once")
    assert result.returncode == 0, result.stderr
    [record] = records(repo)
    assert record["outcome"] == "SUCCESS" and record["gap"]["source"] == "roadmap"
    changed = git(repo, "show", "--name-only", "--format=", "HEAD").split()
    assert sorted(changed) == ["ROADMAP.md", "calc.py", "tests/test_sub.py"]
    assert (repo / "ROADMAP.md").read_text() == (
        "# Next\n- [x] add a sub function\n- [ ] add a sub function test suite\n"
    )


UNRELATED = {"replace": "calc.py", "old": "return x is None", "new": "return x is None  # kept"}
"""An edit that leaves the gap's test failing and breaks nothing else."""
IS_NONE_TEST = (
    "from calc import is_none\n\n\ndef test_is_none() -> None:\n    assert is_none(None)\n"
)


def _new_problems(repo: Path, record: dict[str, Any]) -> str:
    """The report's "New problems" section ('' when it has none)."""
    report = (repo / "history" / record["iteration_id"] / "report.md").read_text()
    _, found, rest = report.partition("## New problems the change introduced")
    return found + rest.split("\n## ", 1)[0]


def test_an_unrelated_edit_claimed_as_success_is_refused_as_the_gaps_tests_still_fail(
    tmp_path: Path,
) -> None:
    repo, head, result, record = _once(tmp_path, BUGGY, [UNRELATED])
    assert result.returncode == 1, result.stderr
    assert (record["outcome"], record["failure_category"]) == ("ROLLBACK", "GAP_NOT_CLOSED"), (
        record["reason"]
    )
    assert record["reason"].startswith("the gap's tests still fail"), record["reason"]
    assert "tests/test_calc.py::test_add" in record["reason"]
    # the gap's test failed at the base: never a new problem of the change
    assert not any(d["node_id"] == "tests/test_calc.py::test_add" for d in record["failures"])
    assert _new_problems(repo, record) == ""
    assert git(repo, "rev-parse", "HEAD").strip() == head


def test_a_test_is_a_new_problem_only_when_it_passed_at_the_base(tmp_path: Path) -> None:
    files = {**BUGGY, "tests/test_none.py": IS_NONE_TEST}
    breaks = {"replace": "calc.py", "old": "return x is None", "new": "return x is not None"}
    repo, _, result, record = _once(tmp_path, files, [breaks])
    assert result.returncode == 1, result.stderr
    assert (record["outcome"], record["failure_category"]) == ("ROLLBACK", "TEST_REGRESSION"), (
        record["reason"]
    )
    shown = _new_problems(repo, record)
    assert "tests/test_none.py::test_is_none" in shown, shown
    assert "test_add" not in shown, shown
