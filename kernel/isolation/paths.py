"""Where everything lives: the user's checkout, the kernel's state under <git-common-dir>/seed/."""

from __future__ import annotations

import hashlib
import os
import shlex
from dataclasses import dataclass
from pathlib import Path

from kernel.errors import UsageError
from kernel.isolation import gitops

SEED_HOME = Path(__file__).resolve().parents[2]
"""The directory holding seed.py, kernel/, domain/ and modules/."""
PLUGIN_DIR = SEED_HOME / "kernel" / "measuring" / "pytest_plugin"
"""The kernel's pytest plugin (bound read-only into every sandboxed test run)."""


@dataclass(frozen=True)
class Paths:
    """Every location the kernel reads or writes."""

    root: Path
    """Top of the user's checkout."""
    common: Path
    """The repository's common git directory."""
    seed_home: Path = SEED_HOME

    @property
    def state(self) -> Path:
        """The kernel's own folder inside the git directory (never in the working tree)."""
        return self.common / "seed"

    @property
    def worktrees(self) -> Path:
        """Where iteration worktrees lived before checkouts left the git directory (recovery
        still removes what an older daemon left there)."""
        return self.state / "wt"

    @property
    def checkouts(self) -> Path:
        """The agents' checkouts (`agentgit.py`), ~/.cache/seed/checkouts/<repository>.

        Outside the person's `.git` and checkout, on purpose: below `.git`, git looking for a
        repository above a checkout whose own `.git` is gone finds the person's (a git folder
        is a repository), and so do tools that search upward for their configuration; and a
        writable bind inside the state folder, which every sandbox hides, would have to be
        mounted over the hiding. Kernel-owned: one folder per repository, made by the kernel,
        bound writable into the agent's sandbox by the path the kernel chose, never by what
        git says inside it."""
        return self._cache / "checkouts" / self._key

    @property
    def _cache(self) -> Path:
        return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "seed"

    @property
    def _key(self) -> str:
        return hashlib.sha256(str(self.common.resolve()).encode()).hexdigest()[:16]

    @property
    def runs(self) -> Path:
        """Prompt, plan and result files handed to agents (outside every worktree)."""
        return self.state / "runs"

    @property
    def gate(self) -> Path:
        """Tool configuration frozen from baseline commits."""
        return self.state / "gate"

    @property
    def exports(self) -> Path:
        """Fresh folders holding one tree each, where the kernel measures (never the agent)."""
        return self.state / "exports"

    @property
    def objects(self) -> Path:
        """Private git object folders: candidates' blobs stay here until one lands."""
        return self.state / "objects"

    @property
    def homes(self) -> Path:
        """Private HOME folders of agents, one per iteration (kept across repair rounds)."""
        return self.state / "homes"

    @property
    def cache(self) -> Path:
        """Measurements of trees already measured."""
        return self.state / "cache"

    @property
    def lock(self) -> Path:
        """The one-daemon-per-repository lock."""
        return self.state / "daemon.lock"

    @property
    def running(self) -> Path:
        """The agent process group being run (so a restarted daemon can end a survivor)."""
        return self.state / "running.json"

    @property
    def history(self) -> Path:
        """history/ in the user's checkout."""
        return self.root / "history"

    @property
    def inbox(self) -> Path:
        """inbox/ in the user's checkout."""
        return self.root / "inbox"

    @property
    def selfhost(self) -> bool:
        """The target is seed's own repository."""
        return self.root.resolve() == self.seed_home.resolve()

    def command(self, *args: str) -> str:
        """A seed command for a person, whole: `python seed.py ARGS` on seed's own checkout,
        else with seed.py's path and `--root` (the person may stand anywhere when they read it)."""
        words = [shlex.quote(a) for a in args]
        if self.selfhost:
            return " ".join(["python", "seed.py", *words])
        seed_py = shlex.quote(str(self.seed_home / "seed.py"))
        return " ".join(["python", seed_py, "--root", shlex.quote(str(self.root)), *words])


def discover(root: Path) -> Paths:
    """Paths for the git repository containing root, or UsageError."""
    if not root.exists():
        raise UsageError(f"{root}: no such directory")
    result = gitops.git(root, "rev-parse", "--show-toplevel", check=False)
    if not result.ok:
        raise UsageError(f"{root}: not inside a git repository (run `git init` first)")
    top = Path(result.text().strip()).resolve()
    return Paths(root=top, common=gitops.common_dir(top))
