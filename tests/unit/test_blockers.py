"""What blocks landing is read from the person's checkout by git: changed paths, or its state."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from kernel.isolation import blockers
from tests.support import SAMPLE, git, make_repo
from tests.unit.factories import gap, record


def test_changed_staged_deleted_and_untracked_files_block_but_ignored_ones_do_not(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path / "repo", {**SAMPLE, "b.py": "B = 1\n", "c.py": "C = 1\n"})
    (repo / "calc.py").write_text("# edited\n")
    (repo / "b.py").write_text("B = 2\n")
    git(repo, "add", "b.py")
    (repo / "c.py").unlink()
    (repo / "new.py").write_text("N = 1\n")
    (repo / "debug.log").write_text("ignored\n")
    (repo / "odd[1].py").write_text("literal, not a glob\n")
    named = ["calc.py", "b.py", "c.py", "new.py", "debug.log", "tests/test_calc.py", "odd[1].py"]

    assert blockers.dirty(repo, named) == sorted(["b.py", "c.py", "calc.py", "new.py", "odd[1].py"])
    assert blockers.dirty(repo, ["tests/test_calc.py"]) == []
    assert blockers.blocker(repo, ["calc.py"]) == ("calc.py",)
    assert not blockers.checkout_wide(("calc.py",))


def test_a_merge_in_progress_or_a_detached_head_blocks_every_path(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", SAMPLE)
    git(repo, "checkout", "-q", "-b", "other")
    (repo / "calc.py").write_text("# theirs\n")
    git(repo, "commit", "-q", "-am", "theirs")
    git(repo, "checkout", "-q", "main")
    (repo / "calc.py").write_text("# ours\n")
    git(repo, "commit", "-q", "-am", "ours")
    with pytest.raises(subprocess.CalledProcessError):
        git(repo, "merge", "-q", "other")  # a conflict (as the user): the merge stays in progress
    assert (repo / ".git" / "MERGE_HEAD").is_file()

    facts = blockers.blocker(repo, ["tests/test_calc.py"])
    assert facts == ("a merge is in progress",) and blockers.checkout_wide(facts)
    assert blockers.describe(facts) == "your checkout: a merge is in progress"

    git(repo, "merge", "--abort")
    git(repo, "checkout", "-q", "--detach")
    assert blockers.blocker(repo, []) == ("HEAD is detached",)


def test_a_blocked_record_holds_while_the_same_facts_are_read_again(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", SAMPLE)
    (repo / "calc.py").write_text("# edited\n")
    blocked = record(gap(), 1).model_copy(update={"blocked_by": ("calc.py",)})
    assert blockers.held(repo)(blocked)
    (repo / "calc.py").write_text(SAMPLE["calc.py"])
    assert not blockers.held(repo)(blocked)


def test_a_checkout_git_cannot_read_blocks_everything_until_it_can(tmp_path: Path) -> None:
    """Fail closed: a `git status` that fails is a blocker, never "nothing blocks"."""
    repo = make_repo(tmp_path / "repo", SAMPLE)
    index = repo / ".git" / "index"
    good = index.read_bytes()
    index.write_bytes(b"DIRC garbage")  # git: "index file smaller than expected"

    facts = blockers.blocker(repo, ["calc.py"])
    assert facts == (blockers.UNREADABLE,)
    assert blockers.checkout_wide(facts)
    assert "your checkout: git could not read it" in blockers.describe(facts)
    assert blockers.dirty(repo, ["calc.py"]) == [blockers.UNREADABLE]

    index.write_bytes(good)
    assert blockers.blocker(repo, ["calc.py"]) == ()
