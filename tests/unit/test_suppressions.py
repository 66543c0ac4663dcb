"""Suppressions are findings: what a noqa or a type-ignore hides is measured apart, and the
ratchet counts it; an existing one is neutral and never a gap."""

from __future__ import annotations

import os
from pathlib import Path

from domain import Diagnostic, Measurement, Measurements, Tool
from kernel.config import QualityConfig
from kernel.isolation import gitops, trees
from kernel.judging.verify import new_findings
from kernel.measuring.gate import freeze_gate, pyright_config
from kernel.measuring.incremental import carried, merge
from kernel.measuring.measure import run_ruff, run_ruff_format
from kernel.measuring.suppressions import pyright_comments, pyright_split, ruff_hidden, unsuppressed
from tests.support import SAMPLE, git, make_repo

LOOSE = "def one():\n    l = 1  # noqa: E741\n    return l\n"


def _ruff(tmp: Path, files: dict[str, str]) -> Measurement:
    tree = tmp / "tree"
    for name, text in files.items():
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        (tree / name).write_text(text)
    gate = freeze_gate(tree, tmp / "gate", QualityConfig())
    return run_ruff(tree, gate, 60)


def test_ruff_keeps_what_a_noqa_hides_apart(tmp_path: Path) -> None:
    m = _ruff(tmp_path, {**SAMPLE, "loose.py": LOOSE, "whole.py": "# ruff: noqa\n" + LOOSE})
    assert m.ran and [d.rule for d in m.diagnostics] == []
    assert sorted((d.file, d.rule) for d in m.suppressed) == [
        ("loose.py", "E741"),
        ("whole.py", "E741"),
    ]
    total = unsuppressed(Measurements(items=(m,))).get(Tool.RUFF)
    assert total is not None and len(total.diagnostics) == 2


def test_a_new_noqa_is_a_new_finding_and_an_old_one_is_neutral() -> None:
    e741 = Diagnostic(tool=Tool.RUFF, file="a.py", line=2, rule="E741", message="l")
    before = Measurement(tool=Tool.RUFF, ran=True, diagnostics=(e741,))
    hidden = Measurement(tool=Tool.RUFF, ran=True, suppressed=(e741,))
    other = Diagnostic(tool=Tool.RUFF, file="a.py", line=5, rule="E741", message="O")
    more = Measurement(tool=Tool.RUFF, ran=True, suppressed=(e741, other))

    def total(m: Measurement) -> Measurement | None:
        return unsuppressed(Measurements(items=(m,))).get(Tool.RUFF)

    assert new_findings(total(before), total(hidden)) == []  # the gap is still there
    assert total(hidden) is not None and len(total(hidden).diagnostics) == 1  # type: ignore[union-attr]
    assert new_findings(total(hidden), total(hidden)) == []
    assert new_findings(total(hidden), total(more)) == [other]


def test_ruff_hidden_is_a_multiset_difference() -> None:
    a = Diagnostic(tool=Tool.RUFF, file="a.py", line=1, column=1, rule="E741")
    b = Diagnostic(tool=Tool.RUFF, file="a.py", line=3, column=1, rule="E741")
    assert ruff_hidden([a], [a, b]) == [b]
    assert ruff_hidden([a, b], [a, b]) == []


def test_pyright_split_follows_type_ignore_lines_and_the_top_of_a_file(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x: int = ''  # type: ignore[assignment]\ny: int = ''\n")
    (tmp_path / "b.py").write_text('"""doc"""\n# type: ignore\nz: int = ""\n')
    (tmp_path / "c.py").write_text("# a header\n# type: ignore\nz: int = ''\n")
    (tmp_path / "d.py").write_text("v = f(\n    1,\n)  # type: ignore\n")
    found = [
        Diagnostic(tool=Tool.PYRIGHT, file="a.py", line=1, rule="r"),
        Diagnostic(tool=Tool.PYRIGHT, file="a.py", line=2, rule="r"),
        Diagnostic(tool=Tool.PYRIGHT, file="b.py", line=3, rule="r"),
        Diagnostic(tool=Tool.PYRIGHT, file="c.py", line=3, rule="r"),
        Diagnostic(tool=Tool.PYRIGHT, file="d.py", line=1, rule="r"),
    ]
    spans = [(1, 1), (2, 2), (3, 3), (3, 3), (1, 3)]
    shown, hidden = pyright_split(found, spans, tmp_path)
    assert [(d.file, d.line) for d in shown] == [("a.py", 2), ("b.py", 3)]
    assert [(d.file, d.line) for d in hidden] == [("a.py", 1), ("c.py", 3), ("d.py", 1)]


def test_pyright_comments_are_findings_but_strict(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "a.py").write_text("# pyright: strict\nx = 1  # pyright: ignore[reportFoo]\n")
    (tree / "b.py").write_text("# pyright: basic\n# pyright: reportReturnType=false\n")
    (tree / ".hidden").mkdir()
    (tree / ".hidden" / "c.py").write_text("# pyright: basic\n")
    gate = freeze_gate(tree, tmp_path / "gate", QualityConfig())
    found = pyright_comments(tree, gate, ())
    assert [(d.file, d.line, d.rule) for d in found] == [
        ("a.py", 2, "pyright-ignore"),
        ("b.py", 1, "pyright-comment"),
        ("b.py", 2, "pyright-comment"),
    ]
    assert [d.file for d in pyright_comments(tree, gate, ["b.py"])] == ["b.py", "b.py"]


def test_the_kernels_pyright_config_turns_type_ignore_comments_off(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "pyrightconfig.json").write_text(
        '{"enableTypeIgnoreComments": true, "executionEnvironments": [{"root": "src"}]}'
    )
    gate = freeze_gate(tree, tmp_path / "gate", QualityConfig())
    config = pyright_config(gate, tree, ())
    assert config["enableTypeIgnoreComments"] is False
    assert config["executionEnvironments"] == [{"root": "src", "enableTypeIgnoreComments": False}]


def test_incremental_merges_keep_hidden_findings_by_file() -> None:
    a = Diagnostic(tool=Tool.RUFF, file="a.py", line=1, rule="E741")
    b = Diagnostic(tool=Tool.RUFF, file="b.py", line=1, rule="E741")
    previous = Measurement(tool=Tool.RUFF, ran=True, suppressed=(a, b))
    fresh = Measurement(tool=Tool.RUFF, ran=True)
    assert merge(previous, fresh, ["a.py"], []).suppressed == (b,)
    assert carried(previous, ["b.py"]).suppressed == (a,)


def test_landing_names_files_whose_bytes_are_not_the_blobs(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", SAMPLE)
    old = git(root, "rev-parse", "HEAD").strip()
    (root / "calc.py").write_text("CHANGED = 1\n")
    (root / "new.py").write_text("NEW = 1\n")
    os.symlink("calc.py", root / "alias.py")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "change")
    new = git(root, "rev-parse", "HEAD").strip()
    assert trees.unlike_blobs(root, old, new) == []
    (root / "new.py").write_text("NEW = 2\n")
    (root / "tests" / "test_calc.py").write_text("untouched by the range\n")
    (root / "alias.py").unlink()
    os.symlink("tests", root / "alias.py")
    assert sorted(trees.unlike_blobs(root, old, new)) == ["alias.py", "new.py"]


def test_the_fast_forward_writes_no_attribute_git_can_skip(tmp_path: Path) -> None:
    """git 2.41+: the person's `ident` is not applied on landing; older git applies it and
    the byte check names the file."""
    root = make_repo(tmp_path / "repo", {**SAMPLE, ".gitattributes": "*.py ident\n"})
    old = git(root, "rev-parse", "HEAD").strip()
    git(root, "checkout", "-q", "-b", "work")
    (root / "calc.py").write_text('VERSION = "$Id$"\n')
    git(root, "commit", "-qam", "ident")
    new = git(root, "rev-parse", "HEAD").strip()
    git(root, "checkout", "-q", "main")
    assert gitops.fast_forward(root, new).ok
    data = (root / "calc.py").read_bytes()
    assert (data == b'VERSION = "$Id$"\n') == (trees.unlike_blobs(root, old, new) == [])


def test_fmt_off_comments_are_format_findings(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "pkg").mkdir(parents=True)
    (tree / "pkg" / "a.py").write_text("# fmt: off\nX = [1,\n  2]\n")
    (tree / "pkg" / "c.py").write_text("Y = [1,2]  # fmt: skip\n")
    (tree / "b.py").write_text("# fmt is fine here\nZ = 1\n")
    gate = freeze_gate(tree, tmp_path / "gate", QualityConfig())
    m = run_ruff_format(tree, gate, 60)
    assert m.ran and m.diagnostics == ()
    assert [(d.file, d.line, d.rule) for d in m.suppressed] == [
        ("pkg/a.py", 1, "fmt-off"),
        ("pkg/c.py", 1, "fmt-off"),
    ]
