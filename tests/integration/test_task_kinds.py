"""A person's task is judged by what it asks: a documentation task needs no new test, and it
may not change code (issue 25, item 4)."""

from __future__ import annotations

from pathlib import Path

from tests.support import SAMPLE, agent_config, make_repo, records, seed

TOOLS = '\n[quality]\ntools = ["ruff", "pytest"]\n'
DOCSTRING = {
    "replace": "calc.py",
    "old": "def add(a, b):\n",
    "new": 'def add(a, b):\n    """The sum of a and b."""\n',
}


def _task(repo: Path, name: str, text: str) -> Path:
    task = repo / "inbox" / name
    task.parent.mkdir(exist_ok=True)
    task.write_text(text, encoding="utf-8")
    return task


def test_a_docstring_task_lands_without_a_new_test(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", SAMPLE, agent_config(tmp_path, [DOCSTRING], extra=TOOLS))
    _task(repo, "doc.md", "Add a docstring to add() in calc.py\n")
    result = seed(repo, "once")
    [record] = records(repo)
    assert (record["outcome"], record["gap"]["key"]) == ("SUCCESS", "inbox:doc.md"), (
        record.get("reason"),
        result.stderr[-2000:],
    )
    assert record["plan"]["task_kind"] == "docs"
    assert '"""The sum of a and b."""' in (repo / "calc.py").read_text()
    assert (repo / "inbox" / "done" / "doc.md").exists()
    report = (repo / "history" / record["iteration_id"] / "report.md").read_text()
    assert "kind docs" in report


def test_a_docs_task_that_also_changes_code_is_refused_with_that_reason(tmp_path: Path) -> None:
    steps = [DOCSTRING, {"replace": "calc.py", "old": "return a * b", "new": "return b * a"}]
    repo = make_repo(tmp_path / "repo", SAMPLE, agent_config(tmp_path, steps, extra=TOOLS))
    original = (repo / "calc.py").read_text()
    _task(repo, "tidy.md", '+++\nkind = "docs"\n+++\nExplain calc.py better.\n')
    seed(repo, "once")
    [record] = records(repo)
    assert record["outcome"] == "ROLLBACK"
    assert record["plan"]["task_kind"] == "docs"
    assert "documentation task changed code" in record["reason"]
    assert "calc.py" in record["reason"]
    assert (repo / "calc.py").read_text() == original
