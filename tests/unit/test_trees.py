"""Trees the kernel builds itself from the worktree's files, with real git."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from kernel.isolation import gitops, trees
from tests.support import SAMPLE, git, make_repo


def _store(root: Path, tmp: Path) -> trees.ObjectStore:
    return trees.ObjectStore(tmp / "store", root / ".git" / "objects")


def _objects(root: Path) -> set[str]:
    base = root / ".git" / "objects"
    return {p.relative_to(base).as_posix() for p in base.rglob("*") if p.is_file()}


def _blob(root: Path, store: trees.ObjectStore, tree: str, path: str) -> bytes:
    return gitops.git(root, "cat-file", "blob", f"{tree}:{path}", env=store.env()).stdout


def _build(root: Path, tmp: Path, **kwargs: object) -> tuple[trees.Candidate, trees.ObjectStore]:
    store = _store(root, tmp)
    head = gitops.head(root)
    assert head is not None
    return trees.build_candidate(root, root, head, store, **kwargs), store  # type: ignore[arg-type]


@pytest.mark.parametrize("bit", ["--skip-worktree", "--assume-unchanged"])
def test_the_disk_counts_never_the_agents_index(tmp_path: Path, bit: str) -> None:
    root = make_repo(tmp_path / "repo", SAMPLE)
    (root / "calc.py").write_text("BACKDOOR = 1\n")
    git(root, "add", "calc.py")
    git(root, "update-index", bit, "calc.py")
    (root / "calc.py").write_text(SAMPLE["calc.py"] + "# honest\n")
    candidate, store = _build(root, tmp_path)
    assert b"BACKDOOR" not in _blob(root, store, candidate.tree, "calc.py")
    assert [c.path for c in candidate.changes] == ["calc.py"]


def test_ignores_come_from_the_base_commit_only(tmp_path: Path) -> None:
    files = {
        **SAMPLE,
        ".gitignore": "build/\n*.log\n",
        "sub/.gitignore": "local.txt\n",
        "kept.log": "tracked though ignored\n",
    }
    root = make_repo(tmp_path / "repo", files)
    git(root, "add", "-f", "kept.log")
    git(root, "commit", "-q", "-m", "track a file the ignores match")
    (root / ".git" / "info" / "exclude").write_text("conftest.py\n")
    (root / "conftest.py").write_text("# hidden by info/exclude\n")
    (root / "build").mkdir()
    (root / "build" / "out.txt").write_text("x")
    (root / "sub" / "local.txt").write_text("x")
    (root / "local.txt").write_text("not ignored at the top\n")
    (root / "kept.log").write_text("tracked though ignored, changed\n")
    (root / ".gitignore").write_text("build/\n*.log\nconftest.py\nlocal.txt\n")  # the agent's edit
    candidate, _ = _build(root, tmp_path)
    changed = {c.path for c in candidate.changes}
    assert {"conftest.py", "local.txt", "kept.log", ".gitignore"} <= changed
    assert "build/out.txt" in candidate.left_out and "sub/local.txt" in candidate.left_out


def test_attributes_cannot_hide_lines_and_filters_cannot_rewrite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_repo(tmp_path / "repo", SAMPLE)
    (root / ".git" / "info" / "attributes").write_text("* -diff\n*.py filter=evil\n")
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text('[filter "evil"]\n\tclean = sed s/a/EVIL/\n')
    monkeypatch.setenv("HOME", str(home))
    (root / "calc.py").write_text(SAMPLE["calc.py"] + "".join(f"X{n} = {n}\n" for n in range(3000)))
    candidate, store = _build(root, tmp_path)
    assert candidate.inserted == 3000
    assert b"EVIL" not in _blob(root, store, candidate.tree, "calc.py")


def test_an_oversized_sparse_file_is_refused_by_size_without_being_read(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", SAMPLE)
    before = _objects(root)
    with (root / "huge.bin").open("wb") as handle:
        handle.truncate(64 * 1024**3)
    started = time.monotonic()
    candidate, store = _build(root, tmp_path, max_file_bytes=1_000_000)
    assert time.monotonic() - started < 30
    assert candidate.oversized == [("huge.bin", 64 * 1024**3)] and candidate.tree == ""
    assert _objects(root) == before
    assert not [
        p for p in (store.path / "objects").rglob("*") if p.is_file() and "info" not in p.parts
    ]


def test_leave_out_and_side_files_stay_out_and_nothing_reaches_the_repo(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", SAMPLE)
    before = _objects(root)
    (root / "report.html").write_text("written by the tests")
    (root / "__pycache__").mkdir()
    (root / "__pycache__" / "calc.cpython-311.pyc").write_bytes(b"\0")
    (root / "new.py").write_text("VALUE = 1\n")
    written = {"report.html": trees.blob_id(b"written by the tests", 40)}
    candidate, _ = _build(root, tmp_path, leave_out=written)
    assert [c.path for c in candidate.changes] == ["new.py"]
    assert "report.html" in candidate.left_out
    assert _objects(root) == before


def test_a_file_named_like_a_test_output_with_other_bytes_is_kept(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", SAMPLE)
    (root / "report.html").write_text("the agent's own report")
    written = {"report.html": trees.blob_id(b"written by the tests", 40), "gone.txt": ""}
    candidate, _ = _build(root, tmp_path, leave_out=written)
    assert [c.path for c in candidate.changes] == ["report.html"]
    assert candidate.left_out == []


def test_export_commit_and_with_file(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", {**SAMPLE, "ROADMAP.md": "- [ ] x\n"})
    (root / "run.sh").write_text("#!/bin/sh\n")
    (root / "run.sh").chmod(0o755)
    os.symlink("calc.py", root / "alias.py")
    candidate, store = _build(root, tmp_path)
    out = tmp_path / "export"
    trees.export_tree(root, candidate.tree, out, store)
    names = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if not p.is_dir())
    assert names == sorted([*SAMPLE, "ROADMAP.md", "run.sh", "alias.py"])
    assert os.readlink(out / "alias.py") == "calc.py" and os.access(out / "run.sh", os.X_OK)
    ticked = trees.with_file(root, candidate.tree, "ROADMAP.md", b"- [x] x\n", store)
    head = gitops.head(root)
    assert head is not None
    commit = trees.commit_tree(root, ticked, head, "msg", "seed", "seed@localhost", store)
    assert git(root, "rev-parse", f"{commit}^{{tree}}").strip() == ticked
    assert git(root, "rev-parse", f"{commit}^").strip() == head
    assert git(root, "show", f"{commit}:ROADMAP.md") == "- [x] x\n"  # objects now in the repo


@pytest.mark.parametrize(
    ("links", "bad"),
    [
        ({"x": ".git/config"}, {"x"}),
        ({"x": "../outside"}, {"x"}),
        ({"a": "b", "b": ".git"}, {"a", "b"}),
        ({"x": "/etc/passwd"}, {"x"}),
        ({"docs/x": "../README.md"}, set()),
        ({"x": "sub/../calc.py"}, set()),
    ],
)
def test_unsafe_links(tmp_path: Path, links: dict[str, str], bad: set[str]) -> None:
    root = make_repo(tmp_path / "repo", {**SAMPLE, "README.md": "#\n", "docs/a.md": "a\n"})
    for path, target in links.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, root / path)
    candidate, store = _build(root, tmp_path)
    assert {p for p, _ in trees.unsafe_links(root, candidate.tree, store)} == bad


def test_an_absolute_link_inside_the_repository_is_fine(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", SAMPLE)
    os.symlink(str(root.resolve() / "calc.py"), root / "abs.py")
    os.symlink(str(root.resolve() / ".git" / "config"), root / "cfg")
    candidate, store = _build(root, tmp_path)
    assert {p for p, _ in trees.unsafe_links(root, candidate.tree, store)} == {"cfg"}


def test_a_name_with_a_newline_cannot_shift_blobs_between_files(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", SAMPLE)
    (root / "a\ncalc.py").write_text("BACKDOOR = 1\n")
    (root / "zz.py").write_text("Z = 1\n")
    candidate, store = _build(root, tmp_path)
    assert "a\ncalc.py" in candidate.left_out
    assert _blob(root, store, candidate.tree, "calc.py").decode() == SAMPLE["calc.py"]
    assert _blob(root, store, candidate.tree, "zz.py") == b"Z = 1\n"
