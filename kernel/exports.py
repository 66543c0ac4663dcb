"""Exports: fresh folders holding exactly one tree's files, where the kernel measures.

Measurement never happens where the agent works: the baseline is measured on an export of
HEAD (so the agent's worktree starts as exactly HEAD, whatever the tools write), and a
candidate on an export of the tree the kernel built (a folder the agent never saw).
"""

from __future__ import annotations

import itertools
import os
import shutil
from pathlib import Path

from kernel import trees

_SERIAL = itertools.count()


class Export:
    """One tree, exported on first use and removed on close."""

    def __init__(
        self,
        root: Path,
        folder: Path,
        tree: str,
        label: str,
        store: trees.ObjectStore | None = None,
    ) -> None:
        self.root = root
        self.tree = tree
        self.store = store
        self.label = label
        # the folder's name does not say what it is for (a candidate, the base): code under
        # test must not be able to tell a verification from any other run by its path
        self.path = folder / f"tree-{os.getpid()}-{next(_SERIAL)}"
        self._files: frozenset[str] | None = None

    def __call__(self) -> Path:
        """The folder, exported now if it is not yet."""
        if self._files is None:
            shutil.rmtree(self.path, ignore_errors=True)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._files = frozenset(trees.export_tree(self.root, self.tree, self.path, self.store))
        return self.path

    def written(self) -> tuple[str, ...]:
        """Files in the folder that are not the tree's (what the tools wrote there)."""
        if self._files is None or not self.path.is_dir():
            return ()
        found: list[str] = []
        for folder, dirs, files in os.walk(self.path):
            dirs[:] = [d for d in dirs if d not in ("__pycache__", ".pytest_cache")]
            for name in files:
                rel = Path(folder, name).relative_to(self.path).as_posix()
                if rel not in self._files and not name.endswith(".pyc"):
                    found.append(rel)
        return tuple(sorted(found))

    def close(self) -> None:
        """Remove the folder."""
        shutil.rmtree(self.path, ignore_errors=True)
