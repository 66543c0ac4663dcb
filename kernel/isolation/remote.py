"""An agent run on another machine (the Ray engine): what the kernel sends, what comes back,
and the kernel's side of it. The worker's side is `worker.py`.

The kernel sends the base commit as a git bundle and the run's inputs (`Job`); a worker sends
back a binary patch against the base with the agent's log, result file and exit (`Outcome`),
never a verdict. The kernel trusts a patch no more than an agent's checkout: `apply` turns it
into a tree in a private object store with `git apply --cached` (git's own path rules: no
`..`, no `.git`, nothing outside; no file is written while applying) and writes that tree as
a fresh agent checkout at the base, which the judge then builds, guards and verifies exactly
as a local run's.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from kernel.bounds import REMOTE_PATCH_MAX
from kernel.config import GuardConfig
from kernel.errors import SeedError
from kernel.fsutil import remove_any
from kernel.isolation import agentgit, gitops, trees
from kernel.isolation.paths import Paths

USAGE_SAID = "reported by the worker"
"""How a remote run's usage is marked: read from the agent's own log and result file, which
the worker sent; no gateway of the kernel's counted it."""

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
"""A repository key or candidate name: one plain path component."""


class PatchRefused(SeedError):
    """A worker's patch the kernel does not apply (too big, or outside what git allows)."""


@dataclass(frozen=True)
class Job:
    """One agent run for a worker: everything it needs, nothing of the kernel's state."""

    repository: str
    """The worker's cached clone is kept under this key (the repository's first commit)."""
    candidate: str
    """The run's name (its checkout, run folder and HOME on the worker)."""
    base: str
    argv: tuple[str, ...]
    """With the placeholders {worktree}, {prompt_file}, {plan_file}, {run_dir},
    {result_file}, {iteration_id}: filled on the worker with its own paths."""
    env: dict[str, str] = field(default_factory=lambda: dict[str, str]())
    """What the agent runs with besides the worker's own PATH and HOME and the SEED_* values."""
    prompt: str = ""
    plan: str = ""
    iteration_id: str = ""
    timeout_s: float = 1800.0
    log_cap: int = 4 * 1024 * 1024
    guard: GuardConfig = field(default_factory=GuardConfig)
    """The sandbox's limits (memory, processes, /tmp) the kernel's config sets."""
    home: tuple[str, ...] = ()
    """Login folders under the worker's HOME the adapter names (shown in the private HOME)."""
    network: str = "full"
    """"full", or "model-only" through `gateway`."""
    gateway: str = ""
    """model-only: the kernel's gateway socket, reachable only by a worker on its host."""
    relay: str = ""
    """model-only from another host: the kernel's relay door ("host:port", `relay.Door`)."""
    token: str = ""
    """The candidate's token at the door (kept by the worker's process, never the agent's)."""
    cache: str = ""
    """The worker's cache folder ('' = ~/.cache/seed/workers)."""
    patch_max: int = REMOTE_PATCH_MAX
    round: int = 1
    """The repair round (SEED_ROUND): after the kernel refused the previous round's change."""
    start: bytes = b""
    """A repair round's starting files: the previous round's checkout as the kernel judged
    it (its own repairs in), a binary patch against the base, applied before the agent runs."""


@dataclass(frozen=True)
class Outcome:
    """What a worker sends back: facts of the run, never a verdict."""

    candidate: str
    host: str = ""
    node: str = ""
    """The Ray node the task ran on (filled by the engine)."""
    refused: str = ""
    """'refused: <why>' when the worker did not run the agent (no sandbox, no gateway), or
    why the run could not be sent back; the candidate then fails with it."""
    patch: bytes = b""
    """`git diff --binary --full-index` from the base to the tree of the files the agent left."""
    oversized: tuple[tuple[str, int], ...] = ()
    """Files over the patch's bound by their apparent size: never read, never sent."""
    log: str = ""
    result: str = ""
    exit_code: int | None = None
    timed_out: bool = False
    duration_s: float = 0.0
    usage_said: str = USAGE_SAID


@dataclass(frozen=True)
class Diffed:
    """A checkout's files as a binary patch against the base, or why it cannot be sent."""

    patch: bytes = b""
    oversized: tuple[tuple[str, int], ...] = ()
    """Files over the bound by their apparent size (never read)."""
    over: int = 0
    """The patch's size when it is over the bound (then `patch` is empty)."""


def diff(root: Path, checkout: Path, base: str, store: trees.ObjectStore, limit: int) -> Diffed:
    """The checkout's files (read as the kernel reads a checkout: `trees.build_candidate`, by
    the base's ignore rules) as `git diff --binary --full-index` from the base."""
    built = trees.build_candidate(root, checkout, base, store, max_file_bytes=limit)
    if built.oversized:
        return Diffed(oversized=tuple(built.oversized))
    done = gitops.git(
        root,
        "diff",
        "--binary",
        "--full-index",
        "--no-renames",
        "--no-ext-diff",
        "--no-textconv",
        base,
        built.tree,
        env=store.env(),
        max_bytes=limit + 1,
    )
    if done.output_bytes > limit:
        return Diffed(over=done.output_bytes)
    return Diffed(patch=done.stdout)


def plain_name(name: str) -> bool:
    """Whether a repository key or candidate name is one plain path component."""
    return bool(_NAME.fullmatch(name))


def bundle(paths: Paths, base: str, name: str) -> bytes:
    """The base commit and its history as a git bundle (sent once per iteration), made in a
    private repository of the kernel's that borrows the person's objects."""
    place = paths.objects / f"bundle-{name}"
    remove_any(place)
    try:
        store = trees.ObjectStore(place, paths.common / "objects")
        env = store.env()
        gitops.git(place, "update-ref", "refs/heads/base", base, env=env)
        out = place / "base.bundle"
        gitops.git(place, "bundle", "create", "--quiet", str(out), "refs/heads/base", env=env)
        return out.read_bytes()
    finally:
        remove_any(place)


def apply(paths: Paths, name: str, base: str, patch: bytes, limit: int = REMOTE_PATCH_MAX) -> Path:
    """A fresh agent checkout at `base` holding the worker's patch applied (PatchRefused when
    the patch is over `limit` bytes or git refuses it). The judge reads it as any checkout."""
    if len(patch) > limit:
        raise PatchRefused(f"the worker's patch is {len(patch):,} bytes, over the bound {limit:,}")
    if not plain_name(name):
        raise PatchRefused(f"not a checkout name: {name!r}")
    place = paths.objects / f"patch-{name}"
    remove_any(place)
    try:
        store = trees.ObjectStore(place, paths.common / "objects")
        env = store.env()
        gitops.git(place, "read-tree", base, env=env)
        # --cached: into the store's index only; git's own rules refuse `..`, `.git` and
        # paths outside; no file is written, so no link the patch makes can be followed
        done = gitops.git(
            place,
            "apply",
            "--cached",
            "--whitespace=nowarn",
            "-",
            env=env,
            stdin=patch,
            check=False,
        )
        if patch.strip() and not done.ok:  # an empty patch: the agent changed nothing
            said = (done.err_text() or done.text()).strip()[:500]
            raise PatchRefused(f"git apply refused the worker's patch: {said}")
        tree = gitops.git(place, "write-tree", env=env).text().strip()
        _plain_paths(place, tree, env)
        checkout = paths.checkouts / name
        remove_any(checkout)
        checkout.parent.mkdir(parents=True, exist_ok=True)
        trees.export_tree(paths.root, tree, checkout, store)
        agentgit.restore_git(paths, checkout, base)
        return checkout
    finally:
        remove_any(place)


def _plain_paths(place: Path, tree: str, env: dict[str, str]) -> None:
    """Every path of the applied tree is relative, below the checkout and outside `.git`
    (what git already holds to, checked again: an allow-list of the kernel's own)."""
    raw = gitops.git(place, "ls-tree", "-r", "-z", "--name-only", tree, env=env).stdout
    for item in raw.split(b"\0"):
        if not item:
            continue
        pure = PurePosixPath(os.fsdecode(item))
        bad = pure.is_absolute() or any(p in ("", ".", "..") for p in pure.parts)
        if bad or any(p.lower() == ".git" for p in pure.parts):
            raise PatchRefused(f"the worker's patch names {os.fsdecode(item)!r}")
