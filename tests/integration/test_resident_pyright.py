"""The resident pyright reports what a cold pyright on a fresh export reports, tree after tree;
a tampered folder is never reported from; a dead pyright is restarted; close() leaves nothing."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from domain import Measurement
from kernel.isolation import gitops
from kernel.isolation.paths import discover
from kernel.isolation.trees import export_tree
from kernel.measuring.gate import Gate
from kernel.measuring.measure import run_pyright
from kernel.measuring.resident import Folder, ResidentPyright, mismatch
from tests.planted import target_for
from tests.support import git, make_repo, seed, start_daemon, wait_for

FILES = {
    "pkg/__init__.py": "",
    "pkg/base.py": "def size(x: int) -> int:\n    return x * 2\n",
    "pkg/user.py": "from pkg.base import size\n\nlength: int = size(3)\n",
    "pkg/clean.py": "VALUE = 1\n",
}


def _commit(root: Path, files: dict[str, str | None], message: str) -> str:
    """Write (or delete, for None) files, commit them; the new tree id."""
    for name, text in files.items():
        path = root / name
        if text is None:
            path.unlink()
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", message)
    return git(root, "rev-parse", "HEAD^{tree}").strip()


def _facts(found: Measurement) -> set[tuple[str, int, str, str]]:
    assert found.ran, found.error
    return {(d.file, d.line, d.rule, d.message) for d in found.diagnostics}


def _cold(root: Path, tree: str, gate: Gate, where: Path) -> set[tuple[str, int, str, str]]:
    export = where / f"export-{tree[:12]}"
    export_tree(root, tree, export)
    return _facts(run_pyright(export, gate, target_for(root, strict=()), 300))


def _group_alive(pgid: int) -> bool:
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = raw[raw.rfind(")") + 2 :].split()
        if fields[2] == str(pgid) and fields[0] != "Z":
            return True
    return False


@pytest.fixture
def resident(tmp_path: Path) -> Iterator[tuple[ResidentPyright, list[str]]]:
    said: list[str] = []
    root = make_repo(tmp_path / "repo", FILES)
    checker = ResidentPyright(root, tmp_path / "state", log=said.append)
    yield checker, said
    checker.close()


def test_tree_after_tree_it_reports_what_a_cold_run_reports(
    tmp_path: Path, resident: tuple[ResidentPyright, list[str]]
) -> None:
    checker, said = resident
    root = checker.root
    target = target_for(root, strict=())
    gate = Gate(ruff_config=tmp_path / "unused.toml", pyright_config={})
    steps: list[tuple[str, dict[str, str | None]]] = [
        ("a type error in one file", {"pkg/clean.py": 'VALUE: int = "one"\n'}),
        ("fixed", {"pkg/clean.py": "VALUE: int = 1\n"}),
        ("a file added", {"pkg/extra.py": "from pkg.clean import VALUE\n\nx: str = VALUE\n"}),
        ("a file deleted", {"pkg/extra.py": None}),
        (
            "an imported module changed",
            {"pkg/base.py": "def size(x: int) -> str:\n    return ''\n"},
        ),
        (
            "a file becomes a folder",
            {"pkg/clean.py": None, "pkg/clean/__init__.py": "V: int = ''\n"},
        ),
    ]
    first = git(root, "rev-parse", "HEAD^{tree}").strip()
    assert _facts(checker.check(first, gate, target, 300)) == _cold(root, first, gate, tmp_path)
    pid = checker.pid
    seen: list[set[tuple[str, int, str, str]]] = []
    for message, change in steps:
        tree = _commit(root, change, message)
        got = _facts(checker.check(tree, gate, target, 300))
        assert got == _cold(root, tree, gate, tmp_path), message
        assert checker.last_reason == "", (message, said)
        seen.append(got)
    assert checker.pid == pid, said  # the same pyright all along: no restart, no cold run
    assert any(f == "pkg/user.py" for f, *_ in seen[4]), "the importer's error must show"
    assert any(f == "pkg/clean.py" for f, *_ in seen[0])
    # back to the first tree: files deleted and re-added
    assert _facts(checker.check(first, gate, target, 300)) == _cold(root, first, gate, tmp_path)

    stricter = Gate(ruff_config=tmp_path / "unused.toml", pyright_config={"strict": ["pkg"]})
    tree = git(root, "rev-parse", "HEAD^{tree}").strip()
    got = _facts(checker.check(tree, stricter, target, 300))
    assert got == _cold(root, tree, stricter, tmp_path)
    assert checker.pid != pid  # a new config means a new pyright
    assert any("configuration" in s for s in said)
    # a project that turns off the rule of the sentinel's error still gets its own findings
    quiet = Gate(
        ruff_config=tmp_path / "unused.toml", pyright_config={"reportAssignmentType": "none"}
    )
    tree = _commit(root, {"pkg/clean/__init__.py": "V: int = ''\nW: str = V.nothing\n"}, "more")
    got = _facts(checker.check(tree, quiet, target, 300))
    assert got == _cold(root, tree, quiet, tmp_path) and got, said
    assert checker.last_reason == "", said


def test_a_tampered_folder_is_never_reported_from(
    tmp_path: Path, resident: tuple[ResidentPyright, list[str]]
) -> None:
    checker, said = resident
    root = checker.root
    target = target_for(root, strict=())
    gate = Gate(ruff_config=tmp_path / "unused.toml", pyright_config={})
    tree = git(root, "rev-parse", "HEAD^{tree}").strip()
    want = _cold(root, tree, gate, tmp_path)
    assert _facts(checker.check(tree, gate, target, 300)) == want
    folder = checker.folder.path
    entries = checker.folder.entries(tree)
    assert mismatch(folder, entries) == ""

    (folder / "pkg" / "planted.py").write_text("x: int = 'planted'\n", encoding="utf-8")
    assert "extra file pkg/planted.py" in mismatch(folder, entries)
    got = _facts(checker.check(tree, gate, target, 300))
    assert got == want and not any("planted" in m for *_, m in got)
    assert not (folder / "pkg" / "planted.py").exists()

    (folder / "pkg" / "clean.py").write_text("VALUE: int = 'x'\n", encoding="utf-8")
    assert "bytes of pkg/clean.py" in mismatch(folder, entries)
    assert _facts(checker.check(tree, gate, target, 300)) == want

    (folder / "pkg" / "base.py").unlink()
    (folder / "pkg" / "base.py").symlink_to(folder / "pkg" / "clean.py")
    assert "link where the tree has a file" in mismatch(folder, entries)
    assert _facts(checker.check(tree, gate, target, 300)) == want

    (folder / "pkg" / "clean.py").chmod(0o755)
    assert "mode" in mismatch(folder, entries)
    assert _facts(checker.check(tree, gate, target, 300)) == want
    assert mismatch(folder, entries) == ""
    noticed = [s for s in said if "not as written" in s]
    assert len(noticed) == 4, said
    assert "extra file pkg/planted.py" in noticed[0]


def test_symlinks_are_held_as_the_tree_says(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", FILES)
    (root / "pkg" / "alias.py").symlink_to("clean.py")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "a link")
    linked = git(root, "rev-parse", "HEAD^{tree}").strip()
    (root / "pkg" / "alias.py").unlink()
    (root / "pkg" / "alias.py").write_text("VALUE = 2\n", encoding="utf-8")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "not a link")
    plain = git(root, "rev-parse", "HEAD^{tree}").strip()
    folder = Folder(root, tmp_path / "folder")
    for tree in (linked, plain, linked):
        folder.sync(tree)
        assert mismatch(folder.path, folder.entries(tree)) == ""
        assert (folder.path / "pkg" / "alias.py").is_symlink() == (tree == linked)
    assert os.readlink(folder.path / "pkg" / "alias.py") == "clean.py"
    assert "link" in mismatch(folder.path, folder.entries(plain))
    gitops.git(root, "cat-file", "-e", linked)


def test_a_killed_pyright_is_restarted_and_close_leaves_nothing(
    tmp_path: Path, resident: tuple[ResidentPyright, list[str]]
) -> None:
    checker, said = resident
    root = checker.root
    target = target_for(root, strict=())
    gate = Gate(ruff_config=tmp_path / "unused.toml", pyright_config={})
    first = git(root, "rev-parse", "HEAD^{tree}").strip()
    assert _facts(checker.check(first, gate, target, 300)) == _cold(root, first, gate, tmp_path)
    pid = checker.pid
    assert pid is not None and checker.rss_bytes() > 0
    os.killpg(pid, signal.SIGKILL)
    tree = _commit(root, {"pkg/clean.py": "VALUE: str = 1\n"}, "an error")
    found = checker.check(tree, gate, target, 300)
    assert _facts(found) == _cold(root, tree, gate, tmp_path), said
    assert checker.pid not in (None, pid)
    assert any("died" in s for s in said)

    checker.invalidate()
    assert not _group_alive(pid)
    again = _facts(checker.check(tree, gate, target, 300))
    assert again == _cold(root, tree, gate, tmp_path)
    last = checker.pid
    assert last is not None and _group_alive(last), said
    assert checker.last_reason == "", said
    checker.close()
    assert not _group_alive(last)
    assert checker.rss_bytes() == 0


def _pyright_processes(folder: Path) -> list[int]:
    """Live processes whose command line names the resident checker's folder."""
    found: list[int] = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if str(folder).encode() in cmdline:
                found.append(int(entry))
    return found


def test_the_daemon_keeps_pyright_resident_reports_it_and_ends_it(tmp_path: Path) -> None:
    files = {
        **FILES,
        "pyproject.toml": "[tool.pyright]\n",
        "pkg/user.py": "from pkg.base import size\n\nlength: str = size(3)\n",  # a type error
    }
    config = '[agent]\nbackend = "none"\n\n[daemon]\npoll_interval_s = 1\n\n[quality]\ntools = ["pyright"]\n\n[analysis]\nresident_pyright = true\n'
    root = make_repo(tmp_path / "repo", files, config)
    daemon = start_daemon(root)
    try:

        def status() -> str:
            return seed(root, "status").stdout

        wait_for(lambda: "pyright:     resident" in status(), 240, "a resident pyright", daemon)
        shown = status()
        assert "MiB of 2048 MiB" in shown and "(pyright 1)" in shown, shown
        assert _pyright_processes(discover(root).resident)
        # the person fixes the error: the resident re-check (not a cold run) finds it gone
        _commit(root, {"pkg/user.py": FILES["pkg/user.py"]}, "fix the type")
        wait_for(lambda: "1 open (pyright 1)" not in status(), 240, "the re-check")
        assert "started 1 time(s)" in status()
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.communicate(timeout=60)
    assert daemon.returncode == 0
    wait_for(lambda: not _pyright_processes(discover(root).resident), 10, "no pyright")
