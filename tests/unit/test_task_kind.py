"""The kernel fixes a task's kind before the agent runs, and a docs task changes no code."""

from __future__ import annotations

from pathlib import Path

from domain import CheckName, IterationPlan, TaskKind
from kernel.config import Config
from kernel.isolation import gitops
from kernel.judging import guard, taskkind
from tests.support import SAMPLE, git, make_repo
from tests.unit.factories import gap, inbox_gap, plan


def _task(title: str, **item: object) -> IterationPlan:
    g = inbox_gap("t.md", title)
    assert g.inbox is not None
    g = g.model_copy(update={"inbox": g.inbox.model_copy(update=item)})
    return plan(g, task_kind=TaskKind.FEATURE)


def _clamped(p: IterationPlan) -> IterationPlan:
    return guard.clamp_plan(p, Config(), (), selfhost=False)


def test_the_kernel_makes_a_docstring_task_docs_and_says_why() -> None:
    clamped = _clamped(_task("Add a docstring to add() in calc.py"))
    assert clamped.task_kind == TaskKind.DOCS
    assert "its title asks for docstring" in clamped.notes[0]
    [closed] = [c for c in clamped.criteria if c.check == CheckName.GAP_CLOSED]
    assert "no new test is needed" in closed.text


def test_front_matter_decides_and_doc_files_are_docs() -> None:
    assert _clamped(_task("Fix the comments", kind="feature")).task_kind == TaskKind.FEATURE
    assert _clamped(_task("Explain the API", kind="docs")).task_kind == TaskKind.DOCS
    allowed = ("README.md", "docs/usage.rst")
    assert _clamped(_task("Explain the API", allowed=allowed)).task_kind == TaskKind.DOCS
    # a docs word with code files the task may change wholesale is not a docs task
    assert _clamped(_task("Add docs and a parser", allowed=("src/**",))).task_kind == (
        TaskKind.FEATURE
    )


def test_a_planner_cannot_make_a_feature_or_a_quality_gap_a_docs_task() -> None:
    feature = _task("Add a sub function").model_copy(update={"task_kind": TaskKind.DOCS})
    assert _clamped(feature).task_kind == TaskKind.FEATURE
    lint = plan(gap(title="docstring"), task_kind=TaskKind.DOCS)
    assert _clamped(lint).task_kind == TaskKind.FEATURE
    # nor skip a feature's test by calling it something else
    untested = _task("Add a sub function").model_copy(update={"task_kind": TaskKind.REFACTOR})
    clamped = _clamped(untested)
    assert clamped.task_kind == TaskKind.FEATURE
    assert "the planner said refactor" in clamped.notes[0]
    rename = _task("Rename add to plus").model_copy(update={"task_kind": TaskKind.REFACTOR})
    assert _clamped(rename).task_kind == TaskKind.REFACTOR


def test_stripped_syntax_trees_ignore_docstrings_and_comments_only() -> None:
    base = b"def add(a, b):\n    return a + b\n"
    documented = (
        b'"""Sums."""\n\n\ndef add(a, b):  # two numbers\n    """Sum."""\n    return a + b\n'
    )
    assert taskkind.code_shape(base) == taskkind.code_shape(documented)
    assert taskkind.code_shape(base) != taskkind.code_shape(base.replace(b"a + b", b"b + a"))
    assert taskkind.code_shape(b"def (") is None


def test_the_guard_refuses_code_in_a_docs_task_and_names_the_file(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", SAMPLE)
    base = git(repo, "rev-parse", "HEAD").strip()
    calc = repo / "calc.py"
    calc.write_text(calc.read_text().replace("return a * b", '"""Product."""\n    return b * a'))
    (repo / "README.md").write_text("# calc\n")
    (repo / "setup.cfg").write_text("[x]\n")
    changes = [
        gitops.Change("M", "calc.py"),
        gitops.Change("A", "README.md"),
        gitops.Change("A", "setup.cfg"),
    ]
    docs = _task("x", kind="docs").model_copy(update={"task_kind": TaskKind.DOCS})
    findings = guard.inspect_changes(repo, base, changes, docs, (), 3, 1)
    refused = {f.path: f.message for f in findings}
    assert set(refused) == {"calc.py", "setup.cfg"}
    assert refused["calc.py"].startswith("a documentation task changed code: its code changed")
    feature = docs.model_copy(update={"task_kind": TaskKind.FEATURE})
    assert guard.inspect_changes(repo, base, changes, feature, (), 3, 1) == []


PATHLIB = (
    "The path arguments of load() and save() only work with strings. Please accept "
    "`pathlib.Path` objects too, say so in the docstrings, and add a test"
)


def test_the_pathlib_task_is_a_feature_and_the_plan_says_why() -> None:
    """A task that asks for a behaviour and a test is a feature, whatever docs words it uses
    (issue 40: it was read as a docs task from "docstrings")."""
    clamped = _clamped(_task(PATHLIB))
    assert clamped.task_kind == TaskKind.FEATURE
    assert clamped.notes[0].startswith("kind feature"), clamped.notes
    assert "a test ('test')" in clamped.notes[0]
    # the planner calling it docs changes nothing
    said_docs = _task(PATHLIB).model_copy(update={"task_kind": TaskKind.DOCS})
    assert _clamped(said_docs).task_kind == TaskKind.FEATURE


def test_a_task_naming_only_doc_paths_and_asking_no_behaviour_is_docs() -> None:
    assert _clamped(_task("Reword the install section of README.md")).task_kind == TaskKind.DOCS
    assert _clamped(_task("Fix typos in docs/usage.rst")).task_kind == TaskKind.DOCS
    # a doc path named beside a behaviour asked for is a feature
    behaviour = _task("Document in README.md that parse() accepts bytes, and make it so")
    assert _clamped(behaviour).task_kind == TaskKind.FEATURE
    # front matter still decides over the words
    assert _clamped(_task("Add a test for add()", kind="docs")).task_kind == TaskKind.DOCS


def test_a_feature_that_also_fixes_typos_in_the_changelog_is_a_feature() -> None:
    """validators' own words (e5d7b4a): the one path they name is CHANGES.md, but they ask
    for new validators; read as docs, a comment-only change would have landed for it."""
    words = "- add validators for `base16` and `base32` encodings\n- fix: typos in `CHANGES.md`"
    g = inbox_gap("t.md", "feat: add validators for base16 and base32 encodings (#386)")
    assert g.inbox is not None
    g = g.model_copy(update={"inbox": g.inbox.model_copy(update={"body": words})})
    clamped = _clamped(plan(g, task_kind=TaskKind.FEATURE))
    assert clamped.task_kind == TaskKind.FEATURE
    assert "new code ('feat')" in clamped.notes[0]
    assert _clamped(_task("Add a docstring to add() in calc.py")).task_kind == TaskKind.DOCS
    assert _clamped(_task("Add an example to the README")).task_kind == TaskKind.DOCS
