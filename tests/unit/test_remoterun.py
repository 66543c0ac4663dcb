"""A file a Ray worker left out of its patch as oversized is put back in the candidate's
checkout as a sparse file of its apparent size, so the kernel's own size rule refuses it;
a path the worker names through a link, into .git or outside the checkout is not written."""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from kernel.host.answers import Backend
from kernel.isolation import agentgit, remote, trees
from kernel.isolation.paths import Paths, discover
from kernel.judging.iteration import Iteration
from kernel.loop.remoterun import _sparse  # pyright: ignore[reportPrivateUsage]
from tests.support import git, make_repo
from tests.unit.factories import gap, plan

LIMIT = 4000
"""max_file_bytes of these tests."""


@pytest.fixture
def checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Paths, Iteration]]:
    """A fresh checkout of a base holding a link to a folder outside and a link into .git, as
    `remote.apply` makes it from an empty patch (a worker that left every file out)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    (tmp_path / "outside").mkdir()
    root = make_repo(tmp_path / "repo", {"calc.py": "X = 1\n", "docs/a.md": "a\n"})
    os.symlink(tmp_path / "outside", root / "elsewhere")
    os.symlink(".git/config", root / "settings.cfg")
    git(root, "add", "elsewhere", "settings.cfg")
    git(root, "commit", "-qm", "links")
    paths = discover(root)
    head = git(root, "rev-parse", "HEAD").strip()
    made = remote.apply(paths, "wt-sparse", head, b"")
    it = Iteration(plan(gap()), head, datetime.now(UTC), Backend("command", "remote"), made)
    yield paths, it
    agentgit.remove(made)


def _oversized(paths: Paths, it: Iteration) -> list[tuple[str, int]]:
    """What the kernel's size rule (the judge's GROWTH_LIMIT) finds in the checkout."""
    store = trees.ObjectStore(paths.objects / "sizes", paths.common / "objects")
    built = trees.build_candidate(paths.root, it.worktree, it.base, store, max_file_bytes=LIMIT)
    return sorted(built.oversized)


def test_a_file_left_out_for_its_size_is_put_back_sparse_and_refused_by_the_size_rule(
    checkout: tuple[Paths, Iteration],
) -> None:
    paths, it = checkout
    _sparse(it, "data/big.bin", 6000)
    _sparse(it, "docs/a.md", 1 << 62)  # more than any file system holds: at its most

    big = it.worktree / "data" / "big.bin"
    assert big.stat().st_size == 6000 and big.stat().st_blocks * 512 < 6000  # sparse
    assert (it.worktree / "docs" / "a.md").stat().st_size == (1 << 40) + 1
    assert _oversized(paths, it) == [("data/big.bin", 6000), ("docs/a.md", (1 << 40) + 1)]


@pytest.mark.parametrize(
    "path",
    [
        "elsewhere/escaped.bin",  # through a link of the base
        "settings.cfg",  # a link itself (to .git/config)
        ".git/hooks/pre-commit",
        "docs/../../escaped.bin",
        "/tmp/escaped.bin",
        "calc.py/inner.bin",  # a file on the way
        "nothing.bin",  # a size no file left out has
    ],
)
def test_a_path_through_a_link_into_git_or_outside_is_not_written(
    checkout: tuple[Paths, Iteration], tmp_path: Path, path: str
) -> None:
    paths, it = checkout
    configs = [paths.common / "config", it.worktree / ".git" / "config"]
    config = [c.read_bytes() for c in configs]
    before = sorted(p.relative_to(it.worktree).as_posix() for p in it.worktree.rglob("*"))

    _sparse(it, path, -1 if path == "nothing.bin" else 6000)

    after = sorted(p.relative_to(it.worktree).as_posix() for p in it.worktree.rglob("*"))
    assert after == before
    assert list((tmp_path / "outside").iterdir()) == []
    escaped = (tmp_path / "escaped.bin", it.worktree.parent / "escaped.bin")
    assert not any(place.exists() for place in (*escaped, Path("/tmp/escaped.bin")))
    assert [c.read_bytes() for c in configs] == config
    assert (it.worktree / "calc.py").read_text() == "X = 1\n"
    assert _oversized(paths, it) == []
