"""Is a file still open for writing? So that a half-written inbox file is never read.

Asked first of the kernel itself: a read lease cannot be taken on a file some process has
open for writing (EAGAIN), whoever that process belongs to. A lease needs the file to be
ours; otherwise /proc/*/fd tells, for the processes we may look at.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from pathlib import Path

_WRITE_MODES = (os.O_WRONLY, os.O_RDWR)


def _by_lease(path: Path) -> bool | None:
    setlease = getattr(fcntl, "F_SETLEASE", None)
    if setlease is None:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        fcntl.fcntl(fd, setlease, fcntl.F_RDLCK)
    except OSError as exc:
        return True if exc.errno == errno.EAGAIN else None
    else:
        # released at once, so a writer opening the file now is never held up
        with contextlib.suppress(OSError):
            fcntl.fcntl(fd, setlease, fcntl.F_UNLCK)
        return False
    finally:
        os.close(fd)


def _by_proc(path: Path) -> bool | None:
    proc = Path("/proc")
    if not proc.is_dir():
        return None
    try:
        wanted = os.stat(path)
    except OSError:
        return None
    complete = True
    for pid in os.listdir(proc):
        if not pid.isdigit():
            continue
        fd_dir = proc / pid / "fd"
        try:
            fds = os.listdir(fd_dir)
        except PermissionError:
            complete = False  # another user's process: it might be the writer
            continue
        except OSError:
            continue  # the process ended meanwhile
        for fd in fds:
            try:
                st = os.stat(fd_dir / fd)
                if (st.st_dev, st.st_ino) != (wanted.st_dev, wanted.st_ino):
                    continue
                info = (proc / pid / "fdinfo" / fd).read_text()
            except OSError:
                continue
            flags = next(
                (ln.split()[1] for ln in info.splitlines() if ln.startswith("flags:")), "0"
            )
            if (int(flags, 8) & os.O_ACCMODE) in _WRITE_MODES:
                return True
    return False if complete else None


def open_for_writing(path: Path) -> bool | None:
    """True if some process has the file open for writing, False if none has, None if unknown."""
    answer = _by_lease(path)
    return answer if answer is not None else _by_proc(path)
