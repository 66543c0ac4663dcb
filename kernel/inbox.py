"""Inbox intake: read what people drop into inbox/, set bad input aside, move claimed items.

Nothing here deletes a file. Bad input moves to inbox/rejected/ with NAME.reason.txt beside
it; a claimed item moves to inbox/.active/, then to done/ or failed/ (or back to the queue)
with NAME.result.md beside it. A file is read only when it is complete: the watcher saw it
closed after writing or moved in, or no process has it open for writing.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from domain import InboxItem, Priority
from kernel.fsutil import atomic_write_text, unique_path
from kernel.openfiles import open_for_writing

MAX_BYTES = 256 * 1024
SUFFIXES = (".md", ".txt")
FOLDERS = ("done", "failed", "rejected", ".active")
FRONT_KEYS = {"title", "priority", "acceptance", "allowed", "forbidden"}
QUIET_S = 1.0
"""When nobody can tell whether a file is still being written (another user's writer we may
not look at), one unchanged for this long is taken as complete."""


class InboxError(ValueError):
    """Why an inbox file cannot be taken as a task."""


@dataclass(frozen=True)
class Rejection:
    """A file set aside, and why."""

    name: str
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


def _strings(value: Any, key: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in cast(list[Any], value)):
        return tuple(cast(list[str], value))
    raise InboxError(f"front matter key '{key}' must be a string or a list of strings")


def _front_matter(text: str) -> tuple[dict[str, Any], str]:
    if not text.startswith("+++"):
        return {}, text
    lines = text.splitlines(keepends=True)
    if lines[0].strip() != "+++":
        raise InboxError("front matter must start with a line holding only +++")
    end = next((i for i, line in enumerate(lines[1:], start=1) if line.strip() == "+++"), None)
    if end is None:
        raise InboxError("front matter is not closed by a +++ line")
    try:
        front = tomllib.loads("".join(lines[1:end]))
    except tomllib.TOMLDecodeError as exc:
        raise InboxError(f"front matter is not valid TOML: {exc}") from exc
    unknown = sorted(set(front) - FRONT_KEYS)
    if unknown:
        raise InboxError(
            f"unknown front matter key(s): {', '.join(unknown)}; known: {', '.join(sorted(FRONT_KEYS))}"
        )
    return front, "".join(lines[end + 1 :])


def parse_item(name: str, data: bytes, received_at: datetime) -> InboxItem:
    """One inbox file as an InboxItem, or InboxError saying what is wrong with it."""
    if len(data) > MAX_BYTES:
        raise InboxError(f"the file is {len(data)} bytes; the limit is {MAX_BYTES}")
    if not data.strip():
        raise InboxError("the file is empty")
    if b"\0" in data:
        raise InboxError("the file is binary (it contains NUL bytes)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InboxError(f"the file is not valid UTF-8 (byte {exc.start})") from exc
    front, body = _front_matter(text.lstrip("\ufeff"))
    priority_raw = front.get("priority", "normal")
    try:
        priority = Priority(str(priority_raw).lower())
    except ValueError as exc:
        raise InboxError(
            f"priority must be one of critical, high, normal, low (got {priority_raw!r})"
        ) from exc
    title = front.get("title")
    if title is not None and not isinstance(title, str):
        raise InboxError("front matter key 'title' must be a string")
    if not body.strip() and not title:
        raise InboxError("the task says nothing (front matter only)")
    if not title:
        first = next(line.strip().lstrip("#").strip() for line in body.splitlines() if line.strip())
        title = first or Path(name).stem
    return InboxItem(
        name=name,
        title=str(title)[:200],
        body=body.strip(),
        priority=priority,
        acceptance=_strings(front.get("acceptance", []), "acceptance"),
        allowed=_strings(front.get("allowed", []), "allowed"),
        forbidden=_strings(front.get("forbidden", []), "forbidden"),
        received_at=received_at,
        sha256=hashlib.sha256(data).hexdigest(),
    )


def set_aside(inbox: Path, entry: Path, reason: str) -> Rejection:
    """Move a bad entry to inbox/rejected/ with NAME.reason.txt beside it."""
    rejected = inbox / "rejected"
    rejected.mkdir(parents=True, exist_ok=True)
    target = unique_path(rejected / entry.name)
    os.rename(entry, target)  # renames a symlink itself, never what it points to
    atomic_write_text(target.with_name(target.name + ".reason.txt"), reason + "\n")
    return Rejection(entry.name, target, reason)


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


def _complete(entry: Path, info: os.stat_result, moment: float, ready: bool) -> bool:
    """Whether the file may be read now (never while some process may still be writing it)."""
    if ready:
        return True
    writing = open_for_writing(entry)
    if writing is None:
        return moment - info.st_mtime >= QUIET_S
    return not writing


def scan(inbox: Path, now: datetime | None = None, ready: frozenset[str] = frozenset()) -> Intake:
    """The queued tasks, oldest first; bad entries are moved aside and reported.

    `ready` names files the watcher saw closed after writing or moved in.
    """
    intake = Intake([], [], [])
    if not inbox.is_dir():
        return intake
    moment = (now or datetime.now(UTC)).timestamp()
    for entry in sorted(inbox.iterdir()):
        name = entry.name
        if ignored(name):
            continue
        try:
            info = entry.lstat()
            problem = _kind_problem(entry, info)
            if problem:
                intake.rejected.append(set_aside(inbox, entry, problem))
                continue
            if not _complete(entry, info, moment, name in ready):
                intake.pending.append(name)  # its close event wakes the daemon again
                continue
            data = entry.read_bytes()
            after = entry.lstat()
            if (after.st_size, after.st_mtime_ns) != (info.st_size, info.st_mtime_ns):
                intake.pending.append(name)  # written to while we read: take it next time
                continue
            received = datetime.fromtimestamp(info.st_mtime, UTC)
            intake.items.append(parse_item(name, data, received))
        except InboxError as exc:
            intake.rejected.append(set_aside(inbox, entry, str(exc)))
        except FileNotFoundError:
            continue  # moved away while we looked
        except OSError as exc:
            reason = f"it cannot be read: {exc.strerror or exc}"
            intake.rejected.append(set_aside(inbox, entry, reason))
    intake.items.sort(key=lambda item: (item.received_at, item.name))
    return intake


def claim(inbox: Path, name: str) -> Path:
    """Move a queued item to inbox/.active/ while its iteration runs."""
    active = inbox / ".active"
    active.mkdir(parents=True, exist_ok=True)
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
    destination_dir = inbox / folder if folder else inbox
    destination_dir.mkdir(parents=True, exist_ok=True)
    target = unique_path(destination_dir / name)
    if source.exists():
        os.rename(source, target)
    if folder and result_text:
        atomic_write_text(target.with_name(target.name + ".result.md"), result_text)
    return target


def fail_queued(inbox: Path, name: str, result_text: str) -> Path:
    """Move a queued (not active) item to failed/ with its result note."""
    failed = inbox / "failed"
    failed.mkdir(parents=True, exist_ok=True)
    target = unique_path(failed / name)
    os.rename(inbox / name, target)
    atomic_write_text(target.with_name(target.name + ".result.md"), result_text)
    return target


def requeue_active(inbox: Path) -> list[str]:
    """Put items left in .active/ by a crash back in the queue."""
    active = inbox / ".active"
    if not active.is_dir():
        return []
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
