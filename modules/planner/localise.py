"""Localisation over a person's words: the files of the tree a task in plain words names.

The words never supply a path themselves: each word is looked up among the tree's own files
(a path or file name, a dotted module, a function, class or test it defines), and only
files found there are kept, each with the word that found it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

from domain import Gap
from modules.planner.allowlist import is_protected, is_test_path, unique
from modules.planner.fsport import FileSystemPort

MAX_NAMED = 12
"""Files a task's words may name at most (more say too little about where the work is)."""
MAX_SCANNED = 3_000
"""Python files searched for the definitions a task names."""
_PATH = re.compile(r"(?<![\w/.-])[\w./-]*\w\.(?:py|pyi|md|rst|txt|toml|cfg|ini)\b")
_DOTTED = re.compile(r"(?<![\w.])[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
_CODE_WORD = re.compile(
    r"`([A-Za-z_]\w*)(?:\(\))?`"  # `name` or `name()`
    r"|\b([A-Za-z_]\w*)\("  # name(
    r"|\b([a-z]\w*_\w+|_\w+|[A-Z][a-z0-9]+[A-Z]\w*)\b"  # snake_case, _private, CamelCase
)
_WORD = re.compile(r"\b[a-z][a-z0-9_]{3,}\b")


@dataclass(frozen=True)
class Located:
    """The files a task names, and which word found each ("word → file (how)")."""

    files: tuple[str, ...] = ()
    matches: tuple[str, ...] = ()

    def note(self) -> str:
        """How the allowlist was derived, for the plan's notes (and so the report)."""
        if not self.files:
            return (
                "allowlist: no file of the tree matches the task's words (paths, modules, "
                "functions, classes, tests); falling back to any non-protected file"
            )
        return "allowlist from the task's words: " + "; ".join(self.matches)


def _python(files: Sequence[str]) -> list[str]:
    return [f for f in files if f.endswith(".py")]


def _by_path(word: str, files: Sequence[str]) -> list[str]:
    clean = word.strip("./")
    return [f for f in files if f == clean or f.endswith("/" + clean)]


def _by_module(dotted: str, files: Sequence[str]) -> tuple[str, list[str]]:
    """The longest leading part of a dotted name that is a module of the tree."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        base = "/".join(parts[:end])
        found = [
            f
            for f in files
            if f.endswith((f"{base}.py", f"{base}/__init__.py")) and _whole(f, base)
        ]
        if found:
            return ".".join(parts[:end]), found
    return "", []


def _whole(path: str, base: str) -> bool:
    """Whether base starts at a folder boundary of path (shapes/x.py, not myshapes/x.py)."""
    at = path.rfind(base)
    return at == 0 or path[at - 1] == "/"


def _definitions(
    names: Iterable[str], fs: FileSystemPort, files: Sequence[str]
) -> dict[str, list[str]]:
    """name -> the Python files that define it (def or class), tests after the others."""
    wanted = sorted(set(names))
    if not wanted:
        return {}
    pattern = re.compile(
        r"^[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]+(" + "|".join(map(re.escape, wanted)) + r")\b",
        re.MULTILINE,
    )
    found: dict[str, list[str]] = {}
    for path in _python(files)[:MAX_SCANNED]:
        text = fs.read_text(path) or ""
        for name in dict.fromkeys(m.group(1) for m in pattern.finditer(text)):
            found.setdefault(name, []).append(path)
    return {n: sorted(p, key=is_test_path) for n, p in found.items()}


def _code_words(text: str) -> list[str]:
    return [next(g for g in m.groups() if g) for m in _CODE_WORD.finditer(text)]


def locate(gap: Gap, fs: FileSystemPort, protected: Sequence[str]) -> Located:
    """The tree's files that a task's title and body name, each with the word behind it."""
    text = f"{gap.title}\n{gap.description}"
    files = [f for f in fs.files() if not is_protected(f, protected)]
    matches: list[tuple[str, str, str]] = []  # (word, file, how)
    for word in unique(_PATH.findall(text)):
        matches += [(word, f, "names it") for f in _by_path(word, files)]
    python = _python(files)
    for dotted in unique(_DOTTED.findall(text)):
        if _PATH.fullmatch(dotted):
            continue
        module, found = _by_module(dotted, python)
        matches += [(module, f, "the module") for f in found]
    defined = _definitions(_code_words(text), fs, files)
    for name, found in defined.items():
        matches += [(name, f, "defines it") for f in found]
    stems: dict[str, list[str]] = {}
    for f in python:
        if not is_test_path(f) and PurePosixPath(f).stem != "__init__":
            stems.setdefault(PurePosixPath(f).stem, []).append(f)
    for word in unique(_WORD.findall(text.lower())):
        if word not in defined:
            matches += [(word, f, "the module") for f in stems.get(word, ())]
    kept = unique(f for _, f, _ in matches)[:MAX_NAMED]
    notes = unique(f"{w} → {f} ({how})" for w, f, how in matches if f in kept)
    return Located(kept, notes)
