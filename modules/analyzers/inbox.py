"""Inbox tasks: the reading of one task's +++ TOML front matter and body (the kernel reads the
file within its bounds and checks the item that comes back), and one gap per queued task."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from domain import AnalysisInput, Gap, GapCategory, InboxItem, InboxText, Priority, Severity

FRONT_KEYS = {"title", "priority", "kind", "acceptance", "allowed", "forbidden"}
KINDS = ("docs", "feature")
"""What front matter `kind` may say: docs (no new test, no code changed) or feature."""

_SEVERITY = {
    Priority.CRITICAL: Severity.CRITICAL,
    Priority.HIGH: Severity.HIGH,
    Priority.NORMAL: Severity.NORMAL,
    Priority.LOW: Severity.LOW,
}


class InboxAnalyzer:
    """One gap per inbox item."""

    name = "inbox"
    contract_version = 1

    def analyze(self, inputs: AnalysisInput) -> Sequence[Gap]:
        """Inbox items as gaps, keyed by their file name."""
        return [
            Gap(
                key=f"inbox:{item.name}",
                category=GapCategory.INBOX,
                source="inbox",
                severity=_SEVERITY[item.priority],
                title=item.title,
                description=item.body,
                files=item.allowed,
                inbox=item,
            )
            for item in inputs.inbox
        ]


ANALYZER = InboxAnalyzer()


class InboxRejected(ValueError):
    """Why an inbox file cannot be taken as a task (shown to the person who wrote it)."""


def _strings(value: Any, key: str, task: InboxText) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in cast(list[Any], value)):
        raise InboxRejected(f"front matter key '{key}' must be a string or a list of strings")
    found = cast(list[str], value)
    if len(found) > task.list_max:
        raise InboxRejected(
            f"front matter key '{key}' has {len(found)} entries; the limit is {task.list_max}"
        )
    if any(len(v) > task.string_max for v in found):
        raise InboxRejected(
            f"front matter key '{key}' has an entry over {task.string_max} characters"
        )
    return tuple(found)


def _yaml_scalar(raw: str, where: str) -> str:
    """A YAML scalar as the front matter takes it: plain, 'single' or "double" quoted."""
    raw = raw.strip()
    if raw.startswith('"'):
        try:
            value = json.loads(raw)
        except ValueError as exc:
            raise InboxRejected(f"{where}: a double-quoted string that does not end") from exc
        if not isinstance(value, str):
            raise InboxRejected(f"{where}: not a string")
        return value
    if raw.startswith("'"):
        if len(raw) < 2 or not raw.endswith("'"):
            raise InboxRejected(f"{where}: a single-quoted string that does not end")
        return raw[1:-1].replace("''", "'")
    if raw[:1] in _YAML_UNTAKEN or ": " in raw or raw.endswith(":"):
        raise InboxRejected(f"{where}: {raw[:40]!r} is more YAML than front matter takes")
    return raw.split(" #", 1)[0].rstrip()


_YAML_UNTAKEN = ("&", "*", "!", "|", ">", "{", "@", "`", "%")
"""How a YAML value starts that the front matter does not take (anchors, aliases, tags,
block strings, maps): refused with the reason, never guessed at."""


def _yaml_front(block: str) -> dict[str, Any]:
    """YAML front matter as GitHub and static-site tools write it, for the keys seed reads:
    `key: value` lines, lists as `[a, b]` or `- item` lines under `key:`."""
    front: dict[str, Any] = {}
    key = ""
    for number, line in enumerate(block.splitlines(), start=2):
        where = f"YAML front matter line {number}"
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if line[0] in " \t-":
            item = line.strip()
            if not key or not item.startswith("- ") or not isinstance(front[key], list):
                raise InboxRejected(f"{where}: only `- item` lines may follow a `key:` line")
            cast(list[str], front[key]).append(_yaml_scalar(item[2:], where))
            continue
        name, colon, value = line.partition(":")
        if not colon or not name.strip() or name != name.strip():
            raise InboxRejected(f"{where}: not a `key: value` line")
        key = name
        if name in front:
            raise InboxRejected(f"{where}: key '{name}' is set twice")
        value = value.strip()
        if not value:
            front[key] = list[str]()
        elif value.startswith("[") and value.endswith("]"):
            inner = value[1:-1].strip()
            front[key] = [_yaml_scalar(v, where) for v in inner.split(",")] if inner else []
        else:
            front[key] = _yaml_scalar(value, where)
    return front


def _front_matter(text: str, task: InboxText) -> tuple[dict[str, Any], str]:
    fence = next((f for f in ("+++", "---") if text.startswith(f)), "")
    if not fence:
        return {}, text
    lines = text.splitlines(keepends=True)
    if lines[0].strip() != fence:
        raise InboxRejected(f"front matter must start with a line holding only {fence}")
    end = next((i for i, line in enumerate(lines[1:], start=1) if line.strip() == fence), None)
    if end is None:
        raise InboxRejected(f"front matter is not closed by a {fence} line")
    block = "".join(lines[1:end])
    size = len(block.encode("utf-8", "surrogatepass"))
    if size > task.front_matter_max_bytes:
        raise InboxRejected(
            f"the front matter is {size} bytes; the limit is {task.front_matter_max_bytes}"
        )
    try:
        front = tomllib.loads(block) if fence == "+++" else _yaml_front(block)
    except tomllib.TOMLDecodeError as exc:
        raise InboxRejected(f"front matter is not valid TOML: {exc}") from exc
    except RecursionError as exc:
        raise InboxRejected("front matter is not valid TOML: it is nested too deeply") from exc
    unknown = sorted(set(front) - FRONT_KEYS)
    if unknown:
        raise InboxRejected(
            f"unknown front matter key(s): {', '.join(unknown)}; known: {', '.join(sorted(FRONT_KEYS))}"
        )
    return front, "".join(lines[end + 1 :])


def _cap(text: str, width: int) -> str:
    """At most width characters, saying how many were left out (as kernel/bounds.py cap_line)."""
    if len(text) <= width:
        return text
    cut = max(width - 40, width // 2)
    return f"{text[:cut]}... ({len(text) - cut:,} more characters)"


class InboxReader:
    """Reads one inbox task's text: front matter (title, priority, kind, acceptance, allowed,
    forbidden) and body."""

    contract_version = 1

    def read(self, task: InboxText) -> InboxItem:
        """The task as an InboxItem, or InboxRejected saying what is wrong with it."""
        front, body = _front_matter(task.text.lstrip("\ufeff"), task)
        priority_raw = front.get("priority", "normal")
        try:
            priority = Priority(str(priority_raw).lower())
        except ValueError as exc:
            raise InboxRejected(
                f"priority must be one of critical, high, normal, low (got {_cap(repr(priority_raw), 80)})"
            ) from exc
        kind = front.get("kind", "")
        if kind not in ("", *KINDS):
            raise InboxRejected(
                f"kind must be one of {', '.join(KINDS)} (got {_cap(repr(kind), 80)})"
            )
        title = front.get("title")
        if title is not None and not isinstance(title, str):
            raise InboxRejected("front matter key 'title' must be a string")
        if not body.strip() and not title:
            raise InboxRejected("the task says nothing (front matter only)")
        if not title:
            first = next(
                line.strip().lstrip("#").strip() for line in body.splitlines() if line.strip()
            )
            title = first or Path(task.name).stem
        return InboxItem(
            name=task.name,
            title=str(title)[: task.title_max],
            body=body.strip(),
            priority=priority,
            kind=kind,
            acceptance=_strings(front.get("acceptance", []), "acceptance", task),
            allowed=_strings(front.get("allowed", []), "allowed", task),
            forbidden=_strings(front.get("forbidden", []), "forbidden", task),
            received_at=task.received_at,
        )


READER = InboxReader()
