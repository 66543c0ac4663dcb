"""The paths a plan lets its agent change: globs derived from the gap, never from free text."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import PurePosixPath

from kernel.contracts import ALWAYS_PROTECTED, matches_any
from modules.planner.fsport import FileSystemPort, safe_relative

MODULE_DOCS = ("CONTRACT.md", "SPEC.md")
_GLOB_CHARS = frozenset("*?[]")


def is_protected(path: str, protected: Sequence[str]) -> bool:
    """Whether a path, or the folder a glob ends in, is always protected or falls under one
    of the given patterns (the kernel passes them in ProjectState.protected)."""
    base = path.rstrip("/").removesuffix("/**").rstrip("/")
    return matches_any(base or path, (*ALWAYS_PROTECTED, *protected))


def clean_path(path: str) -> str | None:
    """A path or glob fit for a plan: relative, inside the repository, one line."""
    trailing = "/" if path.strip().endswith("/") else ""
    rel = safe_relative(path)
    return None if rel is None else rel + trailing


def unique(paths: Iterable[str]) -> tuple[str, ...]:
    """Paths in first-seen order without repeats."""
    return tuple(dict.fromkeys(paths))


def is_test_path(path: str) -> bool:
    """Whether a file is a test: test_*.py, *_test.py, conftest.py, or anything under tests/."""
    parts = PurePosixPath(path).parts
    name = parts[-1] if parts else ""
    return (
        name.startswith("test_")
        or name.endswith("_test.py")
        or name == "conftest.py"
        or any(p in ("tests", "test") for p in parts[:-1])
    )


def module_of(path: str, fs: FileSystemPort) -> str | None:
    """The module folder a file belongs to: the nearest folder with a CONTRACT.md or SPEC.md,
    else modules/<name> for a file under modules/."""
    parts = PurePosixPath(path.rstrip("/")).parts
    for end in range(len(parts) - 1, 0, -1):
        folder = "/".join(parts[:end])
        if any(fs.is_file(f"{folder}/{doc}") for doc in MODULE_DOCS):
            return folder
    if len(parts) >= 3 and parts[0] == "modules":
        return "/".join(parts[:2])
    return None


def package_of(path: str, fs: FileSystemPort) -> str | None:
    """The Python package a source file belongs to (its folder, when that holds an
    __init__.py): a fix often spans the package's modules beyond the ones a test ran."""
    parent = PurePosixPath(path).parent
    if not path.endswith(".py") or is_test_path(path) or str(parent) in ("", "."):
        return None
    return str(parent) if fs.is_file(f"{parent}/__init__.py") else None


def globs_for_tests(path: str) -> tuple[str, ...]:
    """Globs for the tests of a source file (the file itself when it is a test)."""
    if is_test_path(path):
        return (path,)
    pure = PurePosixPath(path)
    stem = pure.stem
    if not path.endswith(".py") or _GLOB_CHARS & set(path):
        return ()
    globs = [f"tests/**/test_{stem}.py", f"tests/**/test_{stem}_*.py"]
    parent = str(pure.parent)
    if parent not in ("", "."):
        globs += [f"{parent}/tests/**", f"{parent}/test_{stem}.py"]
    return tuple(globs)


def derive(
    files: Sequence[str],
    fs: FileSystemPort,
    protected: Sequence[str],
    *,
    wide: bool,
) -> tuple[str, ...]:
    """The allowlist for a gap's files: the files; when wide, also their module folders (or
    their Python package) and tests."""
    out: list[str] = []
    for path in files:
        if path.endswith("/"):
            out.append(path + "**")
            continue
        out.append(path)
        if not wide:
            continue
        module = module_of(path, fs) or package_of(path, fs)
        if module is not None:
            out.append(f"{module}/**")
        out.extend(globs_for_tests(path))
    return unique(p for p in out if not is_protected(p, protected))


def covered(path: str, allowed: Sequence[str]) -> bool:
    """Whether a path is inside an allowlist (an empty allowlist covers everything)."""
    return not allowed or matches_any(path.rstrip("/"), allowed)


ROOT_DOCS = ("*.md", "*.rst", "*.txt", "CHANGELOG*", "CHANGES*", "NEWS*", "HISTORY*")
"""Documentation at the root: README, CHANGELOG/NEWS and the like (by name and suffix)."""
STUBS = "**/*.pyi"
EXAMPLES = ("examples", "example")
MKDOCS = ("mkdocs.yml", "mkdocs.yaml")
VERIFICATION = (
    "conftest.py",
    "**/conftest.py",
    "pytest.ini",
    "**/pytest.ini",
    ".pytest.ini",
    "tox.ini",
    "noxfile.py",
    "setup.cfg",
    "setup.py",
    "pyproject.toml",
    "MANIFEST.in",
    ".coveragerc",
    "mypy.ini",
    "pyrightconfig.json",
    "ruff.toml",
    ".ruff.toml",
    "requirements*.txt",
    "constraints*.txt",
    ".github/**",
    ".gitlab-ci.yml",
    ".circleci/**",
    ".travis.yml",
    ".pre-commit-config.yaml",
)
"""Files that decide verification (pytest and tool configuration, conftest files, CI,
packaging metadata): out of every derived allowlist unless the task names them."""
_NOT_DOC_NAMES = ("requirements", "constraints")
_MKDOCS_DIR = re.compile(r"^docs_dir:\s*['\"]?([^'\"#\s]+)", re.MULTILINE)


def docs_folders(fs: FileSystemPort) -> tuple[str, ...]:
    """The docs folder the project's config names (Sphinx conf.py's folder, mkdocs.yml's
    docs_dir), else docs/ and doc/ where they exist."""
    found: list[str] = []
    mkdocs = next((t for m in MKDOCS if (t := fs.read_text(m)) is not None), None)
    if mkdocs is not None:
        named = _MKDOCS_DIR.search(mkdocs)
        found.append(clean_path(named.group(1)) or "docs" if named else "docs")
    for path in fs.files():
        parts = PurePosixPath(path).parts
        if parts[-1] == "conf.py" and 2 <= len(parts) <= 3 and not is_test_path(path):
            found.append(str(PurePosixPath(path).parent))
    if not found:
        found = [d for d in ("docs", "doc") if fs.is_dir(d)]
    return unique(f.rstrip("/") for f in found if f and fs.is_dir(f.rstrip("/")))


def docs_globs(fs: FileSystemPort, protected: Sequence[str]) -> tuple[str, ...]:
    """The documentation that goes with a change's code: the docs folder, the root's docs,
    examples and type stubs (a Python file among them is code, judged like any code)."""
    globs = [
        *(f"{d}/**" for d in docs_folders(fs)),
        *ROOT_DOCS,
        *(f"{e}/**" for e in EXAMPLES if fs.is_dir(e)),
        *(m for m in MKDOCS if fs.is_file(m)),  # a new docs page is listed in its nav
        STUBS,
    ]
    return unique(g for g in globs if not is_protected(g, protected))


def verification_files(named: Sequence[str], words: str) -> tuple[str, ...]:
    """VERIFICATION less what the task names (in its `allowed` list or its words)."""
    return tuple(
        v
        for v in VERIFICATION
        if not any(matches_any(n, (v,)) for n in named)
        and PurePosixPath(v.removesuffix("/**")).name.replace("*", "") not in words
    )


def is_doc_path(path: str, fs: FileSystemPort) -> bool:
    """Whether a path is documentation by its name and place: *.md, *.rst, *.txt (not a
    requirements list), or anything in the project's docs folder."""
    name = PurePosixPath(path.rstrip("/")).name.lower()
    if name.endswith((".md", ".rst", ".txt")) and not name.startswith(_NOT_DOC_NAMES):
        return True
    return any(matches_any(path.rstrip("/"), (f"{d}/**",)) for d in docs_folders(fs))
