"""The daemon's lock: one daemon per repository, and how `status` tells whether one runs.

Its own file beside kernel/shell/daemon.py: `status` reads the lock too, and daemon.py imports
status, so the lock inside daemon.py would close an import circle.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from typing import IO

from kernel.errors import LockHeld


class DaemonLock:
    """One daemon per repository: an fcntl lock on <git-common-dir>/seed/daemon.lock."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._handle: IO[str] | None = None

    def acquire(self) -> None:
        """Take the lock or raise LockHeld naming the holder."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = self.path.open("a+", encoding="utf-8")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            handle.close()
            raise LockHeld(
                f"another seed daemon (pid {holder}) is running on this repository; lock: {self.path}"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        self._handle = handle

    def release(self) -> None:
        """Release the lock."""
        if self._handle is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._handle.fileno(), fcntl.LOCK_UN)
            self._handle.close()
            self._handle = None

    def held_elsewhere(self) -> bool:
        """Whether another process holds the lock: a daemon is running."""
        try:
            self.acquire()
        except LockHeld:
            return True
        self.release()
        return False
