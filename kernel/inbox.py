"""Inbox intake: read what people drop into inbox/, set bad input aside, move claimed items.

Nothing here deletes a file. Bad input moves to inbox/rejected/ with NAME.reason.txt beside
it; a claimed item moves to inbox/.active/, then to done/ or failed/ (or back to the queue).
"""

from __future__ import annotations

import hashlib
import json
import os
import tomllib
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from domain import InboxItem, Priority
from kernel.fsutil import atomic_write_text, unique_path

MAX_BYTES = 256 * 1024
SUFFIXES = (".md", ".txt")
FOLDERS = ("done", "failed", "rejected", ".active")
FRONT_KEYS = {"title", "priority", "acceptance", "allowed", "forbidden"}
QUIET_S = 1.0
"""A file changed more recently than this may still be being written: leave it for now."""


class InboxError(ValueError):
    """Why an inbox file cannot be taken as a task."""


@dataclass(frozen=True)
class Rejection:
    """A file set aside, and why."""

    name: str
    moved_to: Path
    reason: str


def ignored(name: str) -> bool:
    """Editor temporaries, dotfiles and the inbox's own README are not tasks."""
    return (
        name.startswith((".", "#"))
        or name.endswith(("~", ".swp", ".swx", ".tmp", ".part", ".crdownload"))
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


def parse_item(name: str, data: bytes, received_at: datetime) -> InboxItem:
    """One inbox file as an InboxItem, or InboxError saying what is wrong with it."""
    if not data.strip():
        raise InboxError("the file is empty")
    if len(data) > MAX_BYTES:
        raise InboxError(f"the file is {len(data)} bytes; the limit is {MAX_BYTES}")
    if b"\0" in data:
        raise InboxError("the file is binary (it contains NUL bytes)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InboxError(f"the file is not valid UTF-8 (byte {exc.start})") from exc
    text = text.lstrip("\ufeff")
    front: dict[str, Any] = {}
    body = text
    if text.startswith("+++"):
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
        body = "".join(lines[end + 1 :])
        unknown = sorted(set(front) - FRONT_KEYS)
        if unknown:
            raise InboxError(
                f"unknown front matter key(s): {', '.join(unknown)}; known: {', '.join(sorted(FRONT_KEYS))}"
            )
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
    if not title:
        first = next(
            (line.strip().lstrip("#").strip() for line in body.splitlines() if line.strip()), ""
        )
        title = first or Path(name).stem
    if not body.strip() and not title:
        raise InboxError("the task says nothing")
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


def scan(
    inbox: Path, now: datetime | None = None, quiet_s: float = QUIET_S
) -> tuple[list[InboxItem], list[Rejection]]:
    """The queued tasks, oldest first; bad entries are moved aside and reported."""
    items: list[InboxItem] = []
    rejections: list[Rejection] = []
    if not inbox.is_dir():
        return items, rejections
    moment = (now or datetime.now(UTC)).timestamp()
    for entry in sorted(inbox.iterdir()):
        name = entry.name
        if ignored(name):
            continue
        try:
            if entry.is_symlink():
                rejections.append(
                    set_aside(
                        inbox, entry, "it is a symlink; put the task's text in a regular file"
                    )
                )
                continue
            if entry.is_dir():
                rejections.append(
                    set_aside(inbox, entry, "it is a directory; tasks are .md or .txt files")
                )
                continue
            if entry.suffix.lower() not in SUFFIXES:
                rejections.append(
                    set_aside(
                        inbox, entry, f"{entry.suffix or 'no suffix'}: tasks are .md or .txt files"
                    )
                )
                continue
            stat = entry.stat()
            if moment - stat.st_mtime < quiet_s:
                continue  # still being written, perhaps; the next scan takes it
            data = entry.read_bytes()
            items.append(parse_item(name, data, datetime.fromtimestamp(stat.st_mtime, UTC)))
        except InboxError as exc:
            rejections.append(set_aside(inbox, entry, str(exc)))
        except FileNotFoundError:
            continue  # moved away while we looked
    items.sort(key=lambda item: (item.received_at, item.name))
    return items, rejections


def claim(inbox: Path, name: str) -> Path:
    """Move a queued item to inbox/.active/ while its iteration runs."""
    active = inbox / ".active"
    active.mkdir(parents=True, exist_ok=True)
    target = active / name
    os.rename(inbox / name, target)
    return target


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
    """Write a new task atomically (what `seed.py add` does)."""
    Priority(priority)
    inbox.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    slug = (
        "".join(c if c.isalnum() else "-" for c in (title or text).lower())[:40].strip("-")
        or "task"
    )
    path = unique_path(inbox / f"{stamp}-{slug}.md")
    front = f'+++\npriority = "{priority}"\n'
    if title:
        front += f"title = {json.dumps(title)}\n"
    front += "+++\n"
    atomic_write_text(path, front + text.strip() + "\n")
    return path
