"""Thin, explicit git commands. Nothing here resets, cleans, stashes or forces the user's checkout."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from kernel.errors import SeedError
from kernel.isolation import procs

# Side files of tools and agents that never belong in a diff, whatever .gitignore says.
SIDE_FILE_EXCLUDES = (
    ":(exclude,glob)**/__pycache__/**",
    ":(exclude,glob)**/*.pyc",
    ":(exclude,glob)**/.pytest_cache/**",
    ":(exclude,glob)**/.ruff_cache/**",
    ":(exclude,glob)**/.mypy_cache/**",
    ":(exclude,glob)**/.hypothesis/**",
    ":(exclude,glob).aider*",
    ":(exclude,glob)**/.aider*",
)


class GitError(SeedError):
    """A git command failed; the message carries its stderr."""


_ISOLATED = (
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.untrackedCache=false",
    "core.attributesFile=/dev/null",
    "core.excludesFile=/dev/null",
    "core.pager=cat",
    "core.editor=false",
    "core.askPass=",
    "core.sshCommand=false",
    "credential.helper=",
    "commit.gpgsign=false",
    "tag.gpgsign=false",
    "diff.external=",
    "protocol.allow=never",
)
"""Settings every kernel git command runs with, whatever the repository's configuration says:
no hooks, fsmonitor, pagers, editors or helpers (programs the agent could have named)."""


def _env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    # only the repository's own configuration: never $HOME/.gitconfig or /etc/gitconfig,
    # where a clean filter or an fsmonitor would run inside the kernel's git commands
    env.update(
        GIT_TERMINAL_PROMPT="0",
        LC_ALL="C",
        GIT_OPTIONAL_LOCKS="0",
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_ATTR_NOSYSTEM="1",
        GIT_NO_REPLACE_OBJECTS="1",
    )
    env.update(extra or {})
    return env


def git(
    cwd: Path,
    *args: str,
    check: bool = True,
    timeout_s: float = 120.0,
    env: Mapping[str, str] | None = None,
    stdin: bytes | None = None,
    max_bytes: int = 256 * 1024 * 1024,
) -> procs.Completed:
    """Run git isolated from global configuration, hooks and helper programs, in the C locale.

    Output past `max_bytes` is counted (Completed.output_bytes) but not kept."""
    argv = ["git"]
    for setting in _ISOLATED:
        argv += ["-c", setting]
    argv += args
    result = procs.run(
        argv,
        cwd=cwd,
        timeout_s=timeout_s,
        env=_env(env),
        interruptible=False,
        sweep_rounds=0,
        stdin=stdin,
        max_bytes=max_bytes,
    )
    if check and not result.ok:
        raise GitError(
            f"git {' '.join(args)}: {result.err_text().strip() or result.text().strip()}"
        )
    return result


def out(cwd: Path, *args: str) -> str:
    """stdout of a git command that must succeed, stripped."""
    return git(cwd, *args).text().strip()


def toplevel(path: Path) -> Path:
    """The top of the working tree that contains path."""
    return Path(out(path, "rev-parse", "--show-toplevel")).resolve()


def common_dir(root: Path) -> Path:
    """The repository's common git directory (shared by all worktrees)."""
    value = out(root, "rev-parse", "--git-common-dir")
    path = Path(value)
    return (path if path.is_absolute() else root / path).resolve()


def git_dir(root: Path) -> Path:
    """The git directory of this working tree."""
    value = out(root, "rev-parse", "--git-dir")
    path = Path(value)
    return (path if path.is_absolute() else root / path).resolve()


def head(root: Path) -> str | None:
    """The commit HEAD points at, or None in a repository with no commits."""
    result = git(root, "rev-parse", "--verify", "--quiet", "HEAD^{commit}", check=False)
    return result.text().strip() or None if result.ok else None


def tree_of(root: Path, rev: str) -> str:
    """The tree id of a commit."""
    return out(root, "rev-parse", f"{rev}^{{tree}}")


def current_branch(root: Path) -> str | None:
    """The checked-out branch name, or None on a detached HEAD."""
    result = git(root, "symbolic-ref", "--quiet", "--short", "HEAD", check=False)
    return result.text().strip() or None if result.ok else None


def operation_in_progress(root: Path) -> str | None:
    """A merge, rebase, cherry-pick, revert or bisect under way in this checkout, if any."""
    gdir = git_dir(root)
    markers = {
        "MERGE_HEAD": "a merge",
        "rebase-merge": "a rebase",
        "rebase-apply": "a rebase",
        "CHERRY_PICK_HEAD": "a cherry-pick",
        "REVERT_HEAD": "a revert",
        "BISECT_LOG": "a bisect",
    }
    for name, what in markers.items():
        if (gdir / name).exists():
            return what
    return None


def land_blocker(root: Path) -> str:
    """Why the daemon may not land on this checkout now ('' when it may)."""
    if head(root) is None:
        return "the repository has no commits yet"
    if current_branch(root) is None:
        return "HEAD is detached"
    operation = operation_in_progress(root)
    if operation:
        return f"{operation} is in progress"
    return ""


def changed_paths(
    root: Path, paths: Sequence[str] = (), *, folders: bool = False
) -> list[str] | None:
    """The checkout's paths with changes not committed (staged, unstaged, deleted or
    untracked; ignored files are not changes), among `paths` (literal) when given; an
    untracked folder as one "dir/" with `folders`; None when git cannot read the checkout."""
    literal = ("--", *(f":(literal){p}" for p in paths)) if paths else ()
    result = git(
        root,
        "status",
        "--porcelain=v1",
        "-z",
        f"--untracked-files={'normal' if folders else 'all'}",
        "--no-renames",  # a rename is its two paths, each listed
        *literal,
        check=False,
    )
    if not result.ok:
        return None
    entries = result.stdout.decode("utf-8", errors="surrogateescape").split("\0")
    return sorted({e[3:] for e in entries if len(e) > 3})


def uncommitted(root: Path) -> list[str]:
    """Paths of the checkout with changes not committed, but the kernel's own history/ and
    inbox/ (what `status` shows the person)."""
    found = changed_paths(root, folders=True) or []
    return [p for p in found if not p.startswith(("history/", "inbox/"))]


@dataclass(frozen=True)
class Change:
    """One path changed between two trees."""

    status: str
    """A, M, D, T (type change) or R (rename: path is the new name)."""
    path: str
    old_path: str = ""


def blob_at(repo: Path, rev: str, path: str, env: dict[str, str] | None = None) -> bytes | None:
    """A file's bytes at a commit or tree (None: not there, or no commit given)."""
    if not rev:
        return None
    shown = git(repo, "cat-file", "blob", f"{rev}:{path}", check=False, env=env)
    return shown.stdout if shown.ok else None


def written(worktree: Path, change: Change) -> bytes | None:
    """A changed file's bytes in the worktree (None: deleted, a link, or not a file)."""
    path = worktree / change.path
    if change.status == "D" or path.is_symlink() or not path.is_file():
        return None
    return path.read_bytes()


def as_text(data: bytes | None) -> str | None:
    """Bytes as text, what is not UTF-8 replaced."""
    return None if data is None else data.decode("utf-8", errors="replace")


def stage_all(worktree: Path) -> None:
    """Stage every change in a worktree the kernel owns, leaving side files out."""
    git(worktree, "add", "--all", "--", ".", *SIDE_FILE_EXCLUDES)


def staged_changes(worktree: Path, base: str) -> list[Change]:
    """Changes staged in the worktree against base, renames detected."""
    return parse_name_status(
        git(worktree, "diff", "--cached", "--name-status", "-z", "-M", base).stdout
    )


def parse_name_status(raw: bytes) -> list[Change]:
    """`--name-status -z` output as changes (R and C carry the old path)."""
    parts = raw.decode("utf-8", errors="surrogateescape").split("\0")
    changes: list[Change] = []
    i = 0
    while i < len(parts) and parts[i]:
        status = parts[i]
        if status.startswith(("R", "C")):
            changes.append(Change(status[0], parts[i + 2], parts[i + 1]))
            i += 3
        else:
            changes.append(Change(status[0], parts[i + 1]))
            i += 2
    return changes


def numstat(worktree: Path, base: str) -> tuple[int, int]:
    """Inserted and deleted lines staged against base (binary files count as 0)."""
    return sum_numstat(git(worktree, "diff", "--cached", "--numstat", base).text())


def sum_numstat(text: str) -> tuple[int, int]:
    """Inserted and deleted lines of `--numstat` output (binary files count as 0)."""
    added = deleted = 0
    for line in text.splitlines():
        cols = line.split("\t")
        if len(cols) >= 2 and cols[0].isdigit() and cols[1].isdigit():
            added += int(cols[0])
            deleted += int(cols[1])
    return added, deleted


def commit(worktree: Path, message: str, name: str, email: str) -> str:
    """Commit what is staged with the kernel's identity; return the new commit id."""
    git(
        worktree,
        "-c",
        f"user.name={name}",
        "-c",
        f"user.email={email}",
        "commit",
        "--no-verify",
        "--quiet",
        "-m",
        message,
    )
    return out(worktree, "rev-parse", "HEAD")


def worktree_remove(root: Path, path: Path) -> None:
    """Remove a worktree an older daemon created (the agent's checkout is no worktree now:
    agentgit.py); its files are the kernel's own."""
    if path.exists():
        git(root, "worktree", "remove", "--force", "--force", str(path), check=False)
    git(root, "worktree", "prune", check=False)


def branch_exists(root: Path, name: str) -> bool:
    """Whether refs/heads/name exists."""
    return git(root, "show-ref", "--verify", "--quiet", f"refs/heads/{name}", check=False).ok


def delete_branch(root: Path, name: str) -> None:
    """Delete one of the kernel's own branches (seed/...)."""
    if not name.startswith("seed/"):
        raise GitError(f"refusing to delete a branch the kernel does not own: {name}")
    if branch_exists(root, name):
        git(root, "branch", "-D", "--quiet", name, check=False)


def list_branches(root: Path, prefix: str) -> list[str]:
    """Local branches under a prefix, oldest commit first."""
    # for-each-ref matches a pattern without wildcards only at a "/" boundary
    pattern = f"refs/heads/{prefix}" + ("" if prefix.endswith("/") else "*")
    text = out(root, "for-each-ref", "--sort=committerdate", "--format=%(refname:short)", pattern)
    return [line for line in text.splitlines() if line]


def drop_landed(root: Path, name: str, tip: str) -> bool:
    """Delete a kept branch (seed/...) whose work landed: only while it still points at `tip`
    and no worktree has it checked out (a branch a person took on stays)."""
    listed = git(root, "worktree", "list", "--porcelain", check=False).text()
    if not name.startswith("seed/") or f"branch refs/heads/{name}\n" in listed + "\n":
        return False
    return git(root, "update-ref", "-d", f"refs/heads/{name}", tip, check=False).ok


def fast_forward(root: Path, commit: str) -> procs.Completed:
    """`git merge --ff-only` that writes the blobs' own bytes into the checkout.

    No attribute applies (they are read from the empty tree: git 2.41 and later; older git
    ignores GIT_ATTR_SOURCE and the caller compares the bytes afterwards), so no filter,
    ident, eol or encoding runs either; core.autocrlf is off for the same reason.
    """
    empty = git(root, "hash-object", "-t", "tree", "--stdin", stdin=b"").text().strip()
    return git(
        root,
        "-c",
        "core.autocrlf=false",
        "-c",
        "core.safecrlf=false",
        "merge",
        "--ff-only",
        "--quiet",
        commit,
        check=False,
        env={"GIT_ATTR_SOURCE": empty},
    )


def is_ancestor(root: Path, ancestor: str, descendant: str) -> bool:
    """Whether ancestor is reachable from descendant."""
    return git(root, "merge-base", "--is-ancestor", ancestor, descendant, check=False).ok


def added_files(root: Path, base: str, tip: str) -> list[str]:
    """Paths a range of commits adds."""
    raw = git(root, "diff", "--name-only", "-z", "--diff-filter=A", base, tip).stdout
    return [p for p in raw.decode("utf-8", errors="surrogateescape").split("\0") if p]


_PROGRAM_KEYS = re.compile(
    r"^(core\.(fsmonitor|hookspath|sshcommand|pager|editor|askpass|gitproxy)"
    r"|sequence\.editor|credential\..*helper|gpg\.(.*\.)?program|uploadpack\.packobjectshook"
    r"|filter\..*\.(clean|smudge|process)|diff\..*\.(textconv|command)|diff\.external"
    r"|merge\..*\.driver|include\.path|includeif\..*\.path|alias\..*"
    r"|remote\..*\.(uploadpack|receivepack|proxy)|protocol\..*|http\..*proxy.*"
    r"|core\.worktree|extensions\..*)$"
)
"""Configuration keys with which git runs a program (or reads more configuration)."""


def program_settings(root: Path) -> dict[str, str]:
    """The repository's own settings that make git run a program, key -> value."""
    result = git(root, "config", "--local", "--list", "-z", check=False)
    if not result.ok:
        return {}
    found: dict[str, str] = {}
    for item in result.stdout.decode("utf-8", errors="replace").split("\0"):
        key, _, value = item.partition("\n")
        if key and _PROGRAM_KEYS.match(key.lower()):
            if key.lower().startswith("alias.") and not value.startswith("!"):
                continue
            found[key] = value
    return found
