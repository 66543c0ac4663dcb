"""Inbox intake: read what people drop into inbox/, set bad input aside, move claimed items.

Nothing here deletes or overwrites a file. Bad input moves to inbox/rejected/ with
NAME.reason.txt beside it (a name that is not UTF-8, holds a control character or is too
long is moved under a safe name, the original written in the reason); a claimed item moves to inbox/.active/, then to done/ or failed/ (or back to the queue)
with NAME.result.md beside it. A file is read only when it is complete: the watcher saw it
closed after writing or moved in, or no process has it open for writing. The kernel reads
files within its bounds; the modules read a task's front matter and body (the inbox reader,
behind the module host), and the kernel checks the item that comes back.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from domain import InboxItem, InboxText, Priority
from kernel.bounds import (
    FRONT_LIST_MAX,
    FRONT_MATTER_MAX_BYTES,
    FRONT_STRING_MAX,
    INBOX_MAX_BYTES,
    INBOX_MAX_QUEUED,
    INBOX_MAX_QUEUED_BYTES,
    INBOX_NAME_MAX_BYTES,
    cap_line,
    printable,
    unsafe_char,
)
from kernel.fsutil import atomic_write_text, unique_path
from kernel.isolation.openfiles import open_for_writing

MAX_BYTES = INBOX_MAX_BYTES
SUFFIXES = (".md", ".txt")
FOLDERS = ("done", "failed", "rejected", ".active")
TITLE_MAX = 200
QUIET_S = 1.0
"""When nobody can tell whether a file is still being written (another user's writer we may
not look at), one unchanged for this long is taken as complete."""


class InboxError(ValueError):
    """Why an inbox file cannot be taken as a task."""


Reader = Callable[[list[InboxText]], list[InboxItem | str]]
"""The modules' reading of inbox tasks (ModuleHost.read_inbox): per task an item within the
kernel's bounds, or why the file is set aside."""


@dataclass(frozen=True)
class Rejection:
    """A file set aside, and why."""

    name: str
    """The original name, printable (undecodable bytes as \\xNN, controls escaped)."""
    moved_to: Path
    reason: str


@dataclass(frozen=True)
class Intake:
    """One look at the inbox."""

    items: list[InboxItem]
    """Queued tasks, oldest first."""
    rejected: list[Rejection]
    """Entries set aside just now."""
    pending: list[str]
    """Files still being written (some process has them open for writing)."""
    waiting: int = 0
    """Tasks left for a later look: past INBOX_MAX_QUEUED tasks or INBOX_MAX_QUEUED_BYTES."""


def ignored(name: str) -> bool:
    """Editor temporaries, dotfiles, seed's own folders and notes, and the README are not tasks."""
    return (
        name.startswith((".", "#"))
        or name.endswith(("~", ".swp", ".swx", ".tmp", ".part", ".crdownload"))
        or name == "4913"  # vim's probe that the folder is writable
        or name in FOLDERS
        or name.lower() == "readme.md"
        or name.endswith((".reason.txt", ".result.md"))
    )


def name_problem(name: str) -> str:
    """Why a file name cannot be an inbox task's identity ('' when it can)."""
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        return "its name is not valid UTF-8"
    if size > INBOX_NAME_MAX_BYTES:
        return f"its name is {size} bytes long; the limit is {INBOX_NAME_MAX_BYTES}"
    if unsafe_char(name):
        return "its name holds a control character or a line break"
    return ""


def safe_name(name: str) -> str:
    """A short printable name for a set-aside entry whose own name is not one."""
    raw = name.encode("utf-8", "surrogateescape")
    digest = hashlib.sha256(raw).hexdigest()[:12]
    text = "".join(
        "_" if unicodedata.category(c) in ("Cc", "Cs", "Zl", "Zp") or c == "\ufffd" else c
        for c in raw.decode("utf-8", "replace")
    )
    stem, dot, suffix = text.rpartition(".")
    if not dot or not stem or len(suffix) > 8:
        stem, suffix = text, ""
    short = stem.encode("utf-8")[:80].decode("utf-8", "ignore").lstrip(".") or "entry"
    return f"{short}-{digest}" + (f".{suffix}" if suffix else "")


def _text_of(data: bytes) -> str:
    """The file's text, or InboxError when it is past the kernel's bounds or not text."""
    if len(data) > MAX_BYTES:
        raise InboxError(f"the file is {len(data)} bytes; the limit is {MAX_BYTES}")
    if not data.strip():
        raise InboxError("the file is empty")
    if b"\0" in data:
        raise InboxError("the file is binary (it contains NUL bytes)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InboxError(f"the file is not valid UTF-8 (byte {exc.start})") from exc


def task_text(name: str, text: str, received_at: datetime) -> InboxText:
    """An inbox file's text as the module that reads tasks gets it, with the bounds."""
    return InboxText(
        name=name,
        text=text,
        received_at=received_at,
        front_matter_max_bytes=FRONT_MATTER_MAX_BYTES,
        list_max=FRONT_LIST_MAX,
        string_max=FRONT_STRING_MAX,
        title_max=TITLE_MAX,
    )


def _stamped(reading: InboxItem | str, data: bytes, task: InboxText) -> InboxItem:
    """The reader's item with the kernel's own facts, or InboxError with the reason."""
    if isinstance(reading, str):
        raise InboxError(cap_line(reading))
    return reading.model_copy(
        update={
            "name": task.name,
            "received_at": task.received_at,
            "sha256": hashlib.sha256(data).hexdigest(),
            "attempts": 0,
        }
    )


def parse_item(name: str, data: bytes, received_at: datetime, *, read: Reader) -> InboxItem:
    """One inbox file as an InboxItem, or InboxError saying what is wrong with it."""
    task = task_text(name, _text_of(data), received_at)
    [reading] = read([task])
    return _stamped(reading, data, task)


def _free_pair(folder: Path, name: str, note: str) -> Path:
    """folder/name, or name with a number, such that neither it nor its note exists yet."""
    target = unique_path(folder / name)
    while (folder / (target.name + note)).exists():
        target = unique_path(target.with_name(f"{target.stem}.0{target.suffix}"))
    return target


def own_folder(inbox: Path, name: str) -> Path:
    """inbox/<name> (done, failed, rejected, .active) as a real folder: a file or a link in
    its place (never followed) is moved aside under a new name first, for the scan to reject."""
    folder = inbox / name
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        os.rename(folder, unique_path(inbox / f"{name.lstrip('.')}.not-a-folder"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def set_aside(inbox: Path, entry: Path, reason: str) -> Rejection:
    """Move a bad entry to inbox/rejected/ with NAME.reason.txt beside it (a bad name is
    replaced by a safe one; the reason file gives the original)."""
    rejected = own_folder(inbox, "rejected")
    shown = printable(entry.name, 400)
    renamed = bool(name_problem(entry.name))
    target = _free_pair(rejected, safe_name(entry.name) if renamed else entry.name, ".reason.txt")
    os.rename(entry, target)  # renames a symlink itself, never what it points to
    text = cap_line(reason)
    if renamed:
        text = f"inbox/{shown} was moved here as {target.name}: {text}"
    atomic_write_text(target.with_name(target.name + ".reason.txt"), text + "\n")
    return Rejection(shown, target, cap_line(reason))


def _kind_problem(entry: Path, info: os.stat_result) -> str:
    if stat.S_ISLNK(info.st_mode):
        return "it is a symlink; put the task's text in a regular file"
    if stat.S_ISDIR(info.st_mode):
        return "it is a directory; tasks are .md or .txt files"
    if not stat.S_ISREG(info.st_mode):
        return "it is not a regular file; tasks are .md or .txt files"
    if entry.suffix.lower() not in SUFFIXES:
        return f"{entry.suffix or 'no suffix'}: tasks are .md or .txt files"
    if info.st_size > MAX_BYTES:
        return f"the file is {info.st_size} bytes; the limit is {MAX_BYTES}"
    return ""


def _read_bounded(entry: Path) -> bytes:
    """At most MAX_BYTES + 1 bytes of a regular file, never through a link, never blocking."""
    fd = os.open(entry, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise InboxError("it is not a regular file; tasks are .md or .txt files")
        chunks: list[bytes] = []
        left = MAX_BYTES + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _complete(entry: Path, info: os.stat_result, moment: float, ready: bool) -> bool:
    """Whether the file may be read now (never while some process may still be writing it)."""
    if ready:
        return True
    writing = open_for_writing(entry)
    if writing is None:
        return moment - info.st_mtime >= QUIET_S
    return not writing


@dataclass
class _Look:
    """One pass over the inbox: files read and waiting to be read by the modules, in order."""

    read: Reader
    items: list[InboxItem] = field(default_factory=list[InboxItem])
    pending: list[str] = field(default_factory=list[str])
    refused: list[tuple[int, Path, str]] = field(default_factory=list[tuple[int, Path, str]])
    """(order, entry, reason): set aside once the pass is over, oldest first."""
    unread: list[tuple[int, Path, bytes, InboxText]] = field(
        default_factory=list[tuple[int, Path, bytes, InboxText]]
    )
    waiting: int = 0
    taken: int = 0

    def flush(self) -> None:
        """Have the modules read what is unread (one request for all of it)."""
        if not self.unread:
            return
        readings = self.read([task for *_, task in self.unread])
        for (order, entry, data, task), reading in zip(self.unread, readings, strict=True):
            try:
                self.items.append(_stamped(reading, data, task))
            except InboxError as exc:
                self.refused.append((order, entry, str(exc)))
        self.unread.clear()

    def full(self, size: int) -> bool:
        """Past INBOX_MAX_QUEUED tasks or INBOX_MAX_QUEUED_BYTES with this file."""
        if len(self.items) + len(self.unread) >= INBOX_MAX_QUEUED:
            self.flush()  # how many of the unread are tasks decides it
        return len(self.items) >= INBOX_MAX_QUEUED or self.taken + size > INBOX_MAX_QUEUED_BYTES


def _entries(inbox: Path) -> list[tuple[str, Path, os.stat_result]]:
    """The entries that may be tasks, oldest first."""
    entries: list[tuple[int, str, Path, os.stat_result]] = []
    for entry in inbox.iterdir():
        if not ignored(entry.name):
            with contextlib.suppress(FileNotFoundError):  # moved away while we looked
                info = entry.lstat()
                entries.append((info.st_mtime_ns, entry.name, entry, info))
    return [(name, entry, info) for _, name, entry, info in sorted(entries, key=lambda e: e[:2])]


def _consider(
    look: _Look, order: int, entry: Path, info: os.stat_result, moment: float, ready: bool
) -> None:
    """Take one entry: refuse it, leave it for later, or read it for the modules."""
    problem = name_problem(entry.name) or _kind_problem(entry, info)
    if problem:
        raise InboxError(problem)
    if look.full(info.st_size):
        look.waiting += 1  # read at a later look, once older tasks are done
        return
    if not _complete(entry, info, moment, ready):
        look.pending.append(entry.name)  # its close event wakes the daemon again
        return
    data = _read_bounded(entry)
    after = entry.lstat()
    if (after.st_size, after.st_mtime_ns) != (info.st_size, info.st_mtime_ns):
        look.pending.append(entry.name)  # written to while we read: take it next time
        return
    received = datetime.fromtimestamp(info.st_mtime, UTC)
    look.taken += len(data)
    look.unread.append((order, entry, data, task_text(entry.name, _text_of(data), received)))


def scan(
    inbox: Path,
    now: datetime | None = None,
    ready: frozenset[str] = frozenset(),
    *,
    read: Reader,
) -> Intake:
    """The queued tasks, oldest first; bad entries are moved aside and reported.

    `ready` names files the watcher saw closed after writing or moved in; `read` is the
    modules' reading of tasks (the Context's host).
    """
    if not inbox.is_dir():
        return Intake([], [], [])
    moment = (now or datetime.now(UTC)).timestamp()
    look = _Look(read)
    for order, (name, entry, info) in enumerate(_entries(inbox)):
        try:
            _consider(look, order, entry, info, moment, name in ready)
        except InboxError as exc:
            look.refused.append((order, entry, str(exc)))
        except FileNotFoundError:
            continue  # moved away while we looked
        except OSError as exc:
            look.refused.append((order, entry, f"it cannot be read: {exc.strerror or exc}"))
    look.flush()
    rejected: list[Rejection] = []
    for _, entry, reason in sorted(look.refused, key=lambda r: r[0]):
        with contextlib.suppress(FileNotFoundError):  # moved away while we looked
            rejected.append(set_aside(inbox, entry, reason))
    items = sorted(look.items, key=lambda item: (item.received_at, item.name))
    return Intake(items, rejected, look.pending, look.waiting)


def claim(inbox: Path, name: str) -> Path:
    """Move a queued item to inbox/.active/ while its iteration runs."""
    active = own_folder(inbox, ".active")
    target = active / name
    os.rename(inbox / name, target)
    return target


def result_note(
    name: str, outcome: str, reason: str, records: Sequence[tuple[str, str, str]]
) -> str:
    """NAME.result.md: what became of the task, with links to the history of every attempt."""
    lines = [f"# {name}: {outcome}", "", reason, ""]
    if records:
        lines += ["Attempts:", ""]
        lines += [
            f"- [{iteration_id}](../../history/{iteration_id}/report.md): {result}: {why}"[:400]
            for iteration_id, result, why in records
        ]
        lines.append("")
    return "\n".join(lines)


def release(inbox: Path, name: str, folder: str, result_text: str = "") -> Path:
    """Move an active item to done/, failed/, or back to the queue ('') with a result note."""
    source = inbox / ".active" / name
    destination_dir = own_folder(inbox, folder) if folder else inbox
    target = unique_path(destination_dir / name)
    if source.exists():
        os.rename(source, target)
    if folder and result_text:
        atomic_write_text(target.with_name(target.name + ".result.md"), result_text)
    return target


def fail_queued(inbox: Path, name: str, result_text: str, folder: str = "failed") -> Path:
    """Move a queued (not active) item to failed/ (or done/) with its result note."""
    failed = own_folder(inbox, folder)
    target = unique_path(failed / name)
    os.rename(inbox / name, target)
    atomic_write_text(target.with_name(target.name + ".result.md"), result_text)
    return target


def requeue_active(inbox: Path) -> list[str]:
    """Put items left in .active/ by a crash back in the queue."""
    active = inbox / ".active"
    if active.is_symlink() or not active.is_dir():
        return []  # never what a link points to
    moved: list[str] = []
    for entry in sorted(active.iterdir()):
        target = unique_path(inbox / entry.name)
        os.rename(entry, target)
        moved.append(target.name)
    return moved


def write_task(inbox: Path, text: str, priority: str = "normal", title: str = "") -> Path:
    """Write a new task atomically (what `seed.py add` does): the daemon sees it moved in, whole."""
    Priority(priority)
    if not text.strip():
        raise InboxError("the task says nothing")
    inbox.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    slug = (
        "".join(c if c.isalnum() else "-" for c in (title or text).lower())[:40].strip("-")
        or "task"
    )
    path = unique_path(inbox / f"{stamp}-{slug}.md")
    front = f'+++\npriority = "{priority}"\n'
    if title:
        front += f"title = {json.dumps(title, ensure_ascii=False)}\n"
    front += "+++\n"
    atomic_write_text(path, front + text.strip() + "\n")
    return path


def peek(
    inbox: Path, known: Sequence[str], read: Reader, limit: int
) -> tuple[set[str], list[InboxItem]]:
    """The task names in inbox/ now (claimed ones too), and the tasks among them not in
    `known`, read as the modules read them (at most `limit`, oldest first): nothing is moved,
    a file that cannot be read is left out (the daemon sets it aside with its reason)."""
    if not inbox.is_dir():
        return set(), []
    active = inbox / ".active"
    names = {e.name for e in active.iterdir()} if active.is_dir() else set[str]()
    fresh: list[tuple[str, Path, os.stat_result]] = []
    for name, entry, info in _entries(inbox):
        if name_problem(name) or _kind_problem(entry, info):
            continue
        names.add(name)
        if name not in known and len(fresh) < limit:
            fresh.append((name, entry, info))
    items: list[InboxItem] = []
    for name, entry, info in fresh:
        with contextlib.suppress(OSError, InboxError):
            moment = datetime.fromtimestamp(info.st_mtime, UTC)
            items.append(parse_item(name, _read_bounded(entry), moment, read=read))
    return names, items
