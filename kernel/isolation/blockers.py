"""What in the person's checkout keeps work from landing, read by the kernel from git.

Never from anything an agent wrote: the facts come from `git status` and the git directory
of the person's checkout. A blocker is a tuple of facts: the checkout's state when it blocks
everything (HEAD detached, a merge or rebase in progress), else the paths with uncommitted or
untracked changes among those the work changes. The same facts read again mean the same
blocker: the gap waits (no agent run, nothing spent) until they change.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from domain import IterationPlan, IterationRecord
from kernel.isolation import gitops

Blocker = tuple[str, ...]
"""The facts that block, in a stable order (empty: nothing blocks)."""

UNREADABLE = "git could not read it (git status failed)"
"""The blocker when git cannot read the checkout: fail closed, never "nothing blocks"."""
_GLOB = frozenset("*?[")
_STATE = re.compile(
    r"^(HEAD is detached|the repository has no commits yet|an? [a-z-]+ is in progress"
    r"|git could not read it \(git status failed\))$"
)
"""The sentences of `gitops.land_blocker`, and UNREADABLE."""


def plan_paths(plan: IterationPlan) -> list[str]:
    """The files a plan names: its actions' targets and its suspects (globs are checked at
    landing, on the files the change really touched)."""
    named = [p for a in plan.actions for p in a.target_files] + list(plan.suspect_files)
    return sorted({p for p in named if p and not _GLOB & set(p)})


def dirty(root: Path, paths: Iterable[str]) -> list[str]:
    """Which of these paths the person's checkout has changed: modified, staged, deleted or
    untracked (ignored files are not changes); [UNREADABLE] when git cannot tell."""
    wanted = sorted(set(paths))
    if not wanted:
        return []
    found = gitops.changed_paths(root, wanted)
    return [UNREADABLE] if found is None else found


def blocker(root: Path, paths: Iterable[str]) -> Blocker:
    """What blocks work on these paths now: the checkout's state, else the changed paths."""
    state = gitops.land_blocker(root)
    if state:
        return (state,)
    changed = dirty(root, paths)
    return (UNREADABLE,) if UNREADABLE in changed else tuple(changed)


def checkout_wide(facts: Sequence[str]) -> bool:
    """Whether a blocker is the checkout's state (it blocks every gap), not changed paths."""
    return len(facts) == 1 and _STATE.match(facts[0]) is not None


def describe(facts: Sequence[str]) -> str:
    """A blocker in words, for the record, the report, the log and `status`."""
    if checkout_wide(facts):
        return f"your checkout: {facts[0]}"
    shown = ", ".join(facts[:10]) + (f" and {len(facts) - 10} more" if len(facts) > 10 else "")
    return f"uncommitted or untracked changes in your checkout to {shown}"


def held(root: Path) -> Callable[[IterationRecord], bool]:
    """Whether a blocked record's blocker still holds (the same facts read again)."""
    seen: dict[Blocker, bool] = {}

    def still(record: IterationRecord) -> bool:
        facts = tuple(record.blocked_by)
        if facts not in seen:
            seen[facts] = blocker(root, facts) == facts
        return seen[facts]

    return still


def kept_paths(root: Path, record: IterationRecord) -> list[str]:
    """The paths kept work changes (what a fast-forward to it would write)."""
    if not record.commit or not record.base:
        return []
    raw = gitops.git(
        root, "diff", "--name-only", "-z", "--no-renames", record.base, record.commit, check=False
    ).stdout
    return [p for p in raw.decode("utf-8", errors="surrogateescape").split("\0") if p]
