"""Integrity of the user's checkout: protected bytes restored exactly, the rest listed, never undone."""

from __future__ import annotations

import os
from pathlib import Path

from kernel.contracts import protected_patterns
from kernel.isolation.integrity import Checkout, Snapshot
from tests.support import SAMPLE, git, make_repo

FILES = {
    **SAMPLE,
    "VISION.md": "why\n",
    "kernel/core.py": "X = 1\n",
    "kernel/sub/deep.py": "Y = 2\n",
    "seed.toml": '[agent]\nbackend = "none"\n',
}


def _setup(tmp: Path) -> tuple[Path, Checkout, Snapshot]:
    root = make_repo(tmp / "repo", FILES)
    (root / "calc.py").write_text(SAMPLE["calc.py"] + "# the person's uncommitted edit\n")
    (root / "kernel/local.py").write_text("untracked but protected\n")
    (root / "seed.py").write_text("print('untracked seed.py')\n")
    os.chmod(root / "seed.py", 0o755)
    checkout = Checkout(root, tmp / "state", protected_patterns(()))
    return root, checkout, checkout.begin("iter-0001-20260101-120000")


def test_nothing_changed_nothing_reported(tmp_path: Path) -> None:
    _root, checkout, before = _setup(tmp_path)
    report = checkout.check(before, tmp_path / "evidence")
    assert (report.violations, report.changes, report.problems) == ([], [], [])
    assert not (tmp_path / "evidence").exists()
    assert set(before.protected) >= {
        "VISION.md",
        "kernel/core.py",
        "kernel/sub/deep.py",
        "kernel/local.py",
        "seed.py",
        "seed.toml",
    }


def test_protected_files_are_restored_to_their_exact_bytes_and_mode(tmp_path: Path) -> None:
    root, checkout, before = _setup(tmp_path)
    originals = {
        p: (root / p).read_bytes() for p in ("kernel/core.py", "kernel/local.py", "seed.py")
    }
    (root / "kernel/core.py").write_text("X = 666\n")
    (root / "kernel/local.py").unlink()
    (root / "seed.py").write_text("import os; os.system('rm -rf ~')\n")
    os.chmod(root / "seed.py", 0o644)
    (root / "kernel/evil.py").write_text("EVIL = True\n")
    evidence = tmp_path / "evidence"
    report = checkout.check(before, evidence)
    assert len(report.violations) == 4, report.violations
    for path, data in originals.items():
        assert (root / path).read_bytes() == data, path
    assert os.stat(root / "seed.py").st_mode & 0o777 == 0o755
    assert not (root / "kernel/evil.py").exists()
    assert (evidence / "integrity/kernel/core.py").read_text() == "X = 666\n"
    assert (evidence / "integrity/kernel/evil.py").read_text() == "EVIL = True\n"
    assert "rm -rf" in (evidence / "integrity/seed.py").read_text()
    assert (evidence / "integrity.json").exists()
    assert report.problems == []


def test_a_protected_folder_swapped_for_a_symlink_is_put_back(tmp_path: Path) -> None:
    root, checkout, before = _setup(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "core.py").write_text("X = 'from elsewhere'\n")
    os.rename(root / "kernel", tmp_path / "moved-kernel")
    (root / "kernel").symlink_to(elsewhere)
    report = checkout.check(before, tmp_path / "evidence")
    assert report.violations and report.problems == []
    assert not (root / "kernel").is_symlink()
    assert (root / "kernel/core.py").read_text() == "X = 1\n"
    assert (root / "kernel/sub/deep.py").read_text() == "Y = 2\n"
    assert (elsewhere / "core.py").read_text() == "X = 'from elsewhere'\n"  # never written through


def test_hooks_and_git_config_are_restored(tmp_path: Path) -> None:
    root, checkout, before = _setup(tmp_path)
    config = (root / ".git/config").read_bytes()
    (root / ".git/config").write_bytes(config + b"[core]\n\tfsmonitor = /tmp/evil\n")
    hook = root / ".git/hooks/pre-commit"
    hook.write_text("#!/bin/sh\ncurl evil\n")
    hook.chmod(0o755)
    report = checkout.check(before, tmp_path / "evidence")
    assert (root / ".git/config").read_bytes() == config
    assert not hook.exists()
    assert any(".git/hooks/pre-commit was created" in v for v in report.violations)
    assert (tmp_path / "evidence/integrity/git-dir/hooks/pre-commit").exists()
    assert not list((tmp_path / "evidence").rglob(".git"))


def test_head_and_refs_changes_are_violations_but_not_undone(tmp_path: Path) -> None:
    root, checkout, before = _setup(tmp_path)
    git(root, "branch", "sneaky")
    git(root, "commit", "-q", "--allow-empty", "-m", "moved by someone")
    report = checkout.check(before, tmp_path / "evidence")
    text = "\n".join(report.violations)
    assert "HEAD of the checkout changed" in text
    assert "refs/heads/sneaky changed" in text and "refs/heads/main changed" in text
    assert "sneaky" in git(root, "branch")  # not undone
    assert (tmp_path / "evidence/integrity/refs.before").exists()


def test_other_changes_are_listed_and_left_alone(tmp_path: Path) -> None:
    root, checkout, before = _setup(tmp_path)
    (root / "calc.py").write_text("the person keeps working\n")
    (root / "notes.txt").write_text("new\n")
    (root / "tests/test_calc.py").unlink()
    (root / "history").mkdir()
    (root / "history/x.json").write_text("{}")  # the kernel's own folder: not listed
    report = checkout.check(before, tmp_path / "evidence")
    assert report.violations == []
    assert report.changes == [
        "modified: calc.py",
        "created: notes.txt",
        "deleted: tests/test_calc.py",
    ]
    assert (root / "calc.py").read_text() == "the person keeps working\n"
    assert not (root / "tests/test_calc.py").exists()


def test_compiled_code_written_under_a_protected_path_is_removed(tmp_path: Path) -> None:
    root, checkout, before = _setup(tmp_path)
    cache = root / "kernel/__pycache__"
    cache.mkdir()
    (cache / "core.cpython-311.pyc").write_bytes(b"forged")
    report = checkout.check(before, tmp_path / "evidence")
    assert report.violations == []
    assert not (cache / "core.cpython-311.pyc").exists()
    assert any("compiled code" in c for c in report.changes)


def test_the_snapshot_survives_a_crash(tmp_path: Path) -> None:
    root, _checkout, before = _setup(tmp_path)
    (root / "VISION.md").write_text("rewritten\n")
    # a new daemon, a new Checkout: only what is on disk is left
    again = Checkout(root, tmp_path / "state", protected_patterns(()))
    saved = again.saved()
    assert saved is not None and saved == before
    report = again.check(saved, tmp_path / "evidence")
    assert report.violations and (root / "VISION.md").read_text() == "why\n"
    again.done()
    assert again.saved() is None


def test_configured_protected_globs_count(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", {**SAMPLE, "data/keep.csv": "a,b\n"})
    checkout = Checkout(root, tmp_path / "state", protected_patterns(["data/**", "**/*.lock"]))
    before = checkout.begin("iter-0002-20260101-120000")
    (root / "data/keep.csv").write_text("tampered\n")
    (root / "deps.lock").write_text("new\n")
    report = checkout.check(before, tmp_path / "evidence")
    assert len(report.violations) == 2
    assert (root / "data/keep.csv").read_text() == "a,b\n" and not (root / "deps.lock").exists()


def test_after_a_crash_a_sandboxed_runs_snapshot_credits_the_person_and_puts_nothing_back(
    tmp_path: Path,
) -> None:
    root = make_repo(tmp_path / "repo", FILES)
    bound = root / "kernel"  # a writable bind of the run's (a person's misconfiguration)
    checkout = Checkout(root, tmp_path / "state", protected_patterns(()))
    checkout.begin("iter-0003-20260101-120000", (bound,), sandboxed=True)
    (root / "seed.toml").write_text("# the person's edit after the crash\n")
    (root / "kernel/core.py").write_text("X = 'the run, or the person since'\n")
    # a new daemon: only the sealed snapshot is left, and it says the run was sandboxed
    again = Checkout(root, tmp_path / "state", protected_patterns(()))
    saved = again.saved()
    assert saved is not None and saved.sandboxed and saved.writable == (str(bound),)
    report = again.check(saved, tmp_path / "evidence", after_crash=True)
    assert (root / "seed.toml").read_text() == "# the person's edit after the crash\n"
    assert (root / "kernel/core.py").read_text() == "X = 'the run, or the person since'\n"
    [person] = [c for c in report.changes if "seed.toml" in c]
    assert "by a person" in person and "left as it is" in person
    [violation] = report.violations
    assert "kernel/core.py" in violation and "left as it is" in violation, violation
    assert (tmp_path / "evidence/integrity/earlier/kernel/core.py").read_text() == "X = 1\n"
    assert report.undecided == [] and report.problems == []


def test_after_a_crash_of_an_unsandboxed_run_what_changed_is_undecided_and_kept(
    tmp_path: Path,
) -> None:
    root, checkout, before = _setup(tmp_path)
    assert not before.sandboxed
    (root / "seed.toml").write_text("# who wrote this?\n")
    (root / "kernel/local.py").unlink()
    git(root, "commit", "-q", "--allow-empty", "-m", "a commit since the crash")
    report = checkout.check(before, tmp_path / "evidence", after_crash=True)
    assert report.violations == [] and report.problems == []
    assert (root / "seed.toml").read_text() == "# who wrote this?\n"
    assert not (root / "kernel/local.py").exists()
    text = "\n".join(report.undecided)
    assert "seed.toml" in text and "kernel/local.py" in text and "HEAD" in text, text
    evidence = tmp_path / "evidence"
    assert (evidence / "integrity/seed.toml").read_text() == "# who wrote this?\n"
    assert (evidence / "integrity/earlier/seed.toml").read_text() == FILES["seed.toml"]
    assert (
        evidence / "integrity/earlier/kernel/local.py"
    ).read_text() == "untracked but protected\n"
    assert "undecided" in (evidence / "integrity.json").read_text()
