"""Path globs with `**`: the kernel's own matcher for protected paths and allowlists."""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

ALWAYS_PROTECTED: tuple[str, ...] = (
    "seed.py",
    "VISION.md",
    "kernel/**",
    "history/**",
    ".git/**",
    "seed.toml",
)
"""Paths no agent may change, whatever the config says."""


@lru_cache(maxsize=1024)
def _compile(pattern: str) -> re.Pattern[str]:
    pattern = pattern.strip().removeprefix("./")
    pattern = pattern.rstrip("/")
    if pattern.endswith("/**"):
        pattern = pattern[:-3]  # "dir/**" covers dir itself too: see the suffix below
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    body = "".join(out)
    # a plain directory name covers everything below it
    return re.compile(f"^{body}(?:/.*)?$")


def matches(path: str, pattern: str) -> bool:
    """Whether a repository-relative POSIX path matches a glob (`**` spans directories)."""
    return bool(_compile(pattern).match(path.lstrip("/")))


def matches_any(path: str, patterns: Iterable[str]) -> bool:
    """Whether the path matches one of the globs."""
    return any(matches(path, p) for p in patterns)


def protected_patterns(configured: Iterable[str]) -> tuple[str, ...]:
    """The always-protected paths plus the configured ones."""
    return tuple(dict.fromkeys((*ALWAYS_PROTECTED, *configured)))
