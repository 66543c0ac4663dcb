"""Repository text a plan quotes: VISION.md's summary, module docs, declared dependencies.

Everything is read through the file-system port and carried as data; none of it changes what
the plan allows or checks.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Sequence
from typing import Any, cast

from domain import PlanDocument
from modules.planner.allowlist import MODULE_DOCS, module_of, unique
from modules.planner.fsport import FileSystemPort

VISION_CHARS = 1500
DOC_CHARS = 6000
MAX_MODULES = 2
_HEADING = re.compile(r"^#{1,6}\s+(?P<title>.*?)\s*#*\s*$")
REQUIREMENT_FILES = ("requirements.txt", "requirements-dev.txt", "requirements-test.txt")


def cap(text: str, limit: int) -> str:
    """Text cut to a limit, saying so."""
    text = text.strip()
    return text if len(text) <= limit else text[:limit].rstrip() + "\n[... cut]"


def vision_summary(fs: FileSystemPort) -> str:
    """The section of VISION.md headed "Summary", else its first paragraph; "" without one."""
    text = fs.read_text("VISION.md")
    if not text:
        return ""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        heading = _HEADING.match(line)
        if heading and "summary" in heading.group("title").lower():
            body: list[str] = []
            for rest in lines[i + 1 :]:
                if _HEADING.match(rest):
                    break
                body.append(rest)
            if "\n".join(body).strip():
                return cap("\n".join(body), VISION_CHARS)
    paragraph: list[str] = []
    for line in lines:
        if _HEADING.match(line) or (not line.strip() and not paragraph):
            continue
        if not line.strip():
            break
        paragraph.append(line)
    return cap("\n".join(paragraph), VISION_CHARS)


def module_folders(paths: Sequence[str], fs: FileSystemPort) -> tuple[str, ...]:
    """The module folders the plan targets, in order of first mention."""
    found: list[str] = []
    for path in paths:
        base = path.removesuffix("**").rstrip("/")
        if path.endswith("/") or path.endswith("/**"):
            if any(fs.is_file(f"{base}/{doc}") for doc in MODULE_DOCS):
                found.append(base)
                continue
            base = f"{base}/_"
        module = module_of(base, fs)
        if module is not None:
            found.append(module)
    return unique(found)[:MAX_MODULES]


def module_docs(paths: Sequence[str], fs: FileSystemPort) -> tuple[PlanDocument, ...]:
    """CONTRACT.md and SPEC.md of each module the plan targets."""
    docs: list[PlanDocument] = []
    for folder in module_folders(paths, fs):
        for name in MODULE_DOCS:
            path = f"{folder}/{name}"
            text = fs.read_text(path)
            if text and text.strip():
                docs.append(PlanDocument(label=path, path=path, text=cap(text, DOC_CHARS)))
    return tuple(docs)


def _declared(fs: FileSystemPort) -> list[str]:
    text = fs.read_text("pyproject.toml")
    if not text:
        return []
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return []
    project = cast(dict[str, Any], data.get("project") or {})
    lines: list[str] = []
    deps = project.get("dependencies")
    if isinstance(deps, list):
        lines += [f"dependency: {d}" for d in cast(list[Any], deps) if isinstance(d, str)]
    extras = project.get("optional-dependencies")
    if isinstance(extras, dict):
        for name, items in sorted(cast(dict[str, Any], extras).items()):
            if isinstance(items, list):
                lines += [
                    f"optional ({name}): {d}" for d in cast(list[Any], items) if isinstance(d, str)
                ]
    return lines


def dependency_context(fs: FileSystemPort) -> tuple[PlanDocument, ...]:
    """What the project declares it depends on (pyproject.toml, requirements files)."""
    docs: list[PlanDocument] = []
    declared = _declared(fs)
    if declared:
        docs.append(
            PlanDocument(
                label="dependencies declared in pyproject.toml",
                path="pyproject.toml",
                text=cap("\n".join(declared), 3000),
            )
        )
    for name in REQUIREMENT_FILES:
        text = fs.read_text(name)
        if text and text.strip():
            head = "\n".join(text.splitlines()[:40])
            docs.append(PlanDocument(label=f"{name} (head)", path=name, text=cap(head, 3000)))
    return tuple(docs)
