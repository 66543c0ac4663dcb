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


def _once(tmp_path: Path, files: dict[str, str], steps: list[dict[str, Any]], extra: str = TOOLS):
    repo = make_repo(tmp_path / "repo", files, agent_config(tmp_path, steps, extra=extra))
    head = git(repo, "rev-parse", "HEAD").strip()
    result = seed(repo, "once")
    [record] = records(repo)
    assert record["gap"]["key"] == "pytest:tests/test_calc.py::test_add", record
    return repo, head, result, record


def test_fixing_the_target_but_adding_a_lint_error_elsewhere_is_rejected(tmp_path: Path) -> None:
    steps = [FIX, {"write": "util.py", "text": "def helper() -> None:\n    unused = 1\n"}]
    repo, head, result, record = _once(tmp_path, BUGGY, steps)
    assert result.returncode == 1, result.stderr
    assert (record["outcome"], record["failure_category"]) == ("ROLLBACK", "LINT_ERROR")
    assert any("util.py" in e and "F841" in e for e in record["evidence"]), record["evidence"]
    assert git(repo, "rev-parse", "HEAD").strip() == head
    assert not (repo / "util.py").exists()


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


def test_relaxing_tool_ruff_in_the_change_does_not_relax_the_judgement(tmp_path: Path) -> None:
    steps = [
        FIX,
        {
            "replace": "pyproject.toml",
            "old": 'select = ["E", "F"]',
            "new": 'select = ["E", "F"]\nignore = ["E711"]',
        },
        {
            "append": "calc.py",
            "text": "\n\ndef is_empty(x: object) -> bool:\n    return x == None\n",
        },
    ]
    repo, head, result, record = _once(tmp_path, BUGGY, steps)
    assert result.returncode == 1, result.stderr
    assert (record["outcome"], record["failure_category"]) == ("ROLLBACK", "LINT_ERROR")
    assert any("E711" in e for e in record["evidence"]), record["evidence"]
    assert git(repo, "rev-parse", "HEAD").strip() == head


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
