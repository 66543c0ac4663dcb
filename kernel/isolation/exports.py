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

from kernel.isolation import trees

_SERIAL = itertools.count()
_WRITTEN_LIMIT = 64 * 1024 * 1024
"""Bytes of one file a run wrote that are hashed at most (a bigger one never leaves a
candidate's file of its name out)."""


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

    def written(self) -> dict[str, str]:
        """Files in the folder that are not the tree's (what the tools wrote there), each with
        the blob id of its bytes ('' when it is no regular file or link, or too big)."""
        if self._files is None or not self.path.is_dir():
            return {}
        found: dict[str, str] = {}
        for folder, dirs, files in os.walk(self.path):
            dirs[:] = [d for d in dirs if d not in ("__pycache__", ".pytest_cache")]
            for name in files:
                full = Path(folder, name)
                rel = full.relative_to(self.path).as_posix()
                if rel not in self._files and not name.endswith(".pyc"):
                    mode = "120000" if full.is_symlink() else "100644"
                    found[rel] = trees.disk_blob_id(full, mode, len(self.tree), _WRITTEN_LIMIT)
        return dict(sorted(found.items()))

    def close(self) -> None:
        """Remove the folder."""
        shutil.rmtree(self.path, ignore_errors=True)
