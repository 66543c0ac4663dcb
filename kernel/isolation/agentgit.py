"""The agent's checkout: a repository of its own, made and restored by the kernel.

Not a `git worktree`: a worktree's admin folder lives in the person's `.git`, and git run in
it follows whatever its `.git` file says (round 1 could point it at the person's `.git`).
Here the checkout is a plain folder the kernel writes from git objects (no filters or
attributes), with its own `.git` folder: HEAD detached at the base commit, an index read
from the base tree, and the person's objects borrowed read-only through
`objects/info/alternates`. The agent may commit there; nothing of it is read back.

Before every round the kernel throws the checkout's `.git` away and makes it again from its
own record (the checkout's path and the base commit), so nothing a round planted there
(a `.git` file naming another folder, hooks, config) reaches the next one. Every kernel git
command here runs with an explicit GIT_DIR and a working folder outside the checkout.
"""

from __future__ import annotations

import os
from pathlib import Path

from kernel.errors import SeedError
from kernel.fsutil import atomic_write_text, remove_any
from kernel.isolation import gitops, procs, trees
from kernel.isolation.paths import Paths


def create(paths: Paths, name: str, commit: str) -> Path:
    """A fresh checkout of commit, named name, with its own git folder."""
    checkout = paths.checkouts / name
    remove_any(checkout)
    checkout.parent.mkdir(parents=True, exist_ok=True)
    trees.export_tree(paths.root, commit, checkout)
    restore_git(paths, checkout, commit)
    return checkout


def restore_git(paths: Paths, checkout: Path, commit: str) -> None:
    """Make the checkout's `.git` again from the kernel's record, whatever a run left there."""
    git_dir = checkout / ".git"
    remove_any(git_dir)
    if git_dir.exists() or git_dir.is_symlink():
        # `git init` would keep what is there (hooks, config): never run a round on it
        raise SeedError(f"the agent's {git_dir} could not be removed before the round")
    neutral = paths.state
    neutral.mkdir(parents=True, exist_ok=True)
    fmt = gitops.git(paths.root, "rev-parse", "--show-object-format", check=False).text().strip()
    # `git init DIR` makes DIR/.git and reads nothing of DIR: the run's files stay as they are
    gitops.git(
        neutral, "init", "--quiet", "--template=", f"--object-format={fmt or 'sha1'}", str(checkout)
    )
    atomic_write_text(git_dir / "objects" / "info" / "alternates", f"{paths.common / 'objects'}\n")
    atomic_write_text(git_dir / "HEAD", f"{commit}\n")
    gitops.git(neutral, "read-tree", commit, env={"GIT_DIR": str(git_dir)})


def remove(checkout: Path) -> None:
    """Remove a checkout the kernel made (its files are the kernel's own)."""
    remove_any(checkout)


def stale(paths: Paths) -> list[Path]:
    """Checkouts left by a process that died (wt-<pid>-...: a live `seed gaps` keeps its own)."""
    if not paths.checkouts.is_dir():
        return []
    found: list[Path] = []
    for path in sorted(paths.checkouts.iterdir()):
        owner = next((int(p) for p in path.name.split("-") if p.isdigit()), 0)
        if owner != os.getpid() and owner and procs.alive(owner):
            continue
        found.append(path)
    return found


def env(paths: Paths) -> dict[str, str]:
    """What the agent's git needs: never to look for a repository above its checkout."""
    return {"GIT_CEILING_DIRECTORIES": os.fspath(paths.checkouts)}
