"""The agent's checkout is a repository of its own, made again before every round (agentgit.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernel.isolation import agentgit
from kernel.isolation.paths import discover
from tests.support import SAMPLE, git, make_repo


def test_the_checkout_is_its_own_repository_outside_the_persons_git(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    root = make_repo(tmp_path / "repo", SAMPLE)
    paths = discover(root)
    head = git(root, "rev-parse", "HEAD").strip()
    checkout = agentgit.create(paths, "wt-1-x", head)
    assert not checkout.is_relative_to(root) and (checkout / ".git").is_dir()
    assert git(checkout, "rev-parse", "HEAD").strip() == head
    assert git(checkout, "status", "--porcelain") == ""
    assert Path(git(checkout, "rev-parse", "--absolute-git-dir").strip()) == checkout / ".git"
    assert git(root, "worktree", "list", "--porcelain").count("worktree ") == 1


def test_whatever_a_round_planted_in_its_git_is_gone_before_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    root = make_repo(tmp_path / "repo", SAMPLE)
    paths = discover(root)
    head = git(root, "rev-parse", "HEAD").strip()
    checkout = agentgit.create(paths, "wt-1-x", head)
    # round 1 commits, then points its .git at the person's
    (checkout / "calc.py").write_text("changed\n")
    git(checkout, "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qam", "agent")
    hooks = checkout / ".git" / "hooks"
    hooks.mkdir(exist_ok=True)
    (hooks / "post-commit").write_text("#!/bin/sh\n")
    (checkout / ".git" / "objects").chmod(0o000)  # a folder the kernel cannot read at first
    agentgit.restore_git(paths, checkout, head)
    assert not hooks.exists()
    agentgit.remove(checkout / ".git")
    (checkout / ".git").write_text(f"gitdir: {root / '.git'}\n")

    agentgit.restore_git(paths, checkout, head)

    assert (checkout / ".git").is_dir() and not (checkout / ".git" / "hooks").exists()
    assert git(checkout, "rev-parse", "HEAD").strip() == head
    assert Path(git(checkout, "rev-parse", "--absolute-git-dir").strip()) == checkout / ".git"
    # the round's files stay: the change shows against the base
    assert git(checkout, "status", "--porcelain").strip() == "M calc.py"
    agentgit.remove(checkout)
    assert not checkout.exists() and agentgit.stale(paths) == []
