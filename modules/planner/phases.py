"""Phases for a failing test: reproduce, localise, patch, verify the test, then the whole suite."""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

from domain import Diagnostic, Executed, Gap, Tool
from modules.planner.allowlist import clean_path, is_protected, is_test_path, unique
from modules.planner.fsport import FileSystemPort

# pytest's own location lines ("calc.py:5: in add", "tests/test_a.py:9: AssertionError"); the
# exception's message is printed on lines starting with "E", so it cannot pose as a location
_PYTEST_LOCATION = re.compile(r"^(?P<path>[A-Za-z0-9_./-]+\.py):(?P<line>\d+): ", re.MULTILINE)
_PYTHON_LOCATION = re.compile(r'^\s*File "(?P<path>[^"\n]+\.py)", line (?P<line>\d+)', re.MULTILINE)
MAX_IMPORTED = 5
"""Imported project files a failing test adds to its suspects at most."""
MAX_SHOWN = 5
"""Suspects whose lines the prompt shows."""
MAX_RANGES = 8
_SAFE_NODE = re.compile(r"^[A-Za-z0-9_./-]+\.py(?:::[A-Za-z0-9_.\[\]-]+)*$")


def safe_node(node_id: str) -> str:
    """The node id if it can be shown as part of a command line, else ""."""
    return node_id if _SAFE_NODE.match(node_id) else ""


def failing_test_of(gap: Gap) -> Diagnostic | None:
    """The failing test behind a pytest gap, if it has one."""
    if gap.source != "pytest":
        return None
    return next(
        (
            d
            for d in gap.evidence
            if d.tool == Tool.PYTEST
            and d.node_id
            and d.rule in ("failed", "error", "collection-error")
        ),
        None,
    )


def _relative(path: str, worktree: str) -> str | None:
    if path.startswith("/"):
        root = worktree.rstrip("/") + "/"
        if not worktree or not path.startswith(root):
            return None
        path = path[len(root) :]
    if "site-packages/" in path or "dist-packages/" in path:
        return None
    return clean_path(path)


def trace_frames(detail: str, worktree: str) -> list[str]:
    """Project files named by the traceback's location lines, innermost first."""
    found: list[tuple[int, str]] = []
    for pattern in (_PYTEST_LOCATION, _PYTHON_LOCATION):
        for match in pattern.finditer(detail):
            rel = _relative(match.group("path"), worktree)
            if rel is not None:
                found.append((match.start(), rel))
    found.sort()
    return [path for _, path in reversed(found)]


def imported_files(test_file: str, fs: FileSystemPort) -> list[str]:
    """Project files a test file imports (its own import statements, resolved in the worktree)."""
    text = fs.read_text(test_file)
    if not text:
        return []
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    package = str(PurePosixPath(test_file).parent)
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
        elif isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            names.append(
                f"{package.replace('/', '.')}.{node.module}" if package != "." else node.module
            )
    found: list[str] = []
    for name in names:
        base = name.replace(".", "/")
        for root in ("", "src/"):
            for candidate in (f"{root}{base}.py", f"{root}{base}/__init__.py"):
                if fs.is_file(candidate):
                    found.append(candidate)
                    break
    return found[:MAX_IMPORTED]


@dataclass(frozen=True)
class Ranked:
    """Suspect files, most likely first, and the most suspicious lines of the first ones."""

    files: tuple[str, ...] = ()
    lines: tuple[str, ...] = ()


def ochiai(executed: Sequence[Executed]) -> dict[str, tuple[float, tuple[int, ...]]]:
    """Per file a failing test executed: its best Ochiai score and the lines that have it.

    With one failing test, a line's score is 1/sqrt(1 + p), p the passing tests that ran it:
    lines only the failing test reached come first."""
    scores: dict[str, tuple[float, tuple[int, ...]]] = {}
    for e in executed:
        if not e.lines or len(e.passing) != len(e.lines):
            continue
        per_line = [1 / math.sqrt(1 + max(p, 0)) for p in e.passing]
        best = max(per_line)
        hot = tuple(n for n, s in zip(e.lines, per_line, strict=True) if s == best)
        scores[e.file] = (best, hot)
    return scores


def ranges(lines: Sequence[int], limit: int = MAX_RANGES) -> str:
    """Line numbers as ranges: "3-5, 9"."""
    spans: list[list[int]] = []
    for n in sorted(set(lines)):
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    text = [f"{a}-{b}" if a != b else f"{a}" for a, b in spans[:limit]]
    return ", ".join(text) + (", ..." if len(spans) > limit else "")


def rank_suspects(gap: Gap, fs: FileSystemPort, protected: Sequence[str], worktree: str) -> Ranked:
    """Suspect files of a failing test, most likely first. With the kernel's record of what
    the test executed: every project file it ran, by Ochiai (ties: traceback order). Without
    it: the first project frame of the traceback (counted from the failure), the other
    frames, the project files the test imports. The test file itself comes last."""
    evidence = failing_test_of(gap)
    if evidence is None:
        return Ranked()
    test_file = evidence.node_id.split("::")[0]
    frames: list[str] = []
    if evidence.frame_file:
        frames.append(evidence.frame_file)
    # frames read from text must exist in the worktree; the measured ones are facts already
    frames += [f for f in trace_frames(evidence.detail, worktree) if fs.is_file(f)]
    scores = ochiai(evidence.executed)
    order = {f: i for i, f in reversed(list(enumerate(frames)))}
    by_score = sorted(scores, key=lambda f: (-scores[f][0], order.get(f, len(order)), f))
    ranked = [*by_score, *frames, *imported_files(test_file, fs), test_file]
    cleaned = unique(c for f in ranked if (c := clean_path(f)) is not None)
    kept = [f for f in cleaned if not is_protected(f, protected)]
    files = (*(f for f in kept if not is_test_path(f)), *(f for f in kept if is_test_path(f)))
    lines = tuple(ranges(scores[f][1]) if f in scores else "" for f in files[:MAX_SHOWN])
    return Ranked(files, lines)


def _run(node: str) -> str:
    safe = safe_node(node)
    return f"`python -m pytest {safe}`" if safe else "pytest on the failing test named in the gap"


def failing_test_phases(gap: Gap, ranked: Sequence[str]) -> tuple[str, ...]:
    """The five phases of fixing a failing test."""
    evidence = failing_test_of(gap)
    if evidence is None:
        return ()
    where = (
        f"`{evidence.frame_file}:{evidence.frame_line}`"
        if evidence.frame_file and evidence.frame_line
        else "not known"
    )
    order = ", ".join(f"`{f}`" for f in ranked) or "the files the test imports"
    return (
        f"reproduce: run {_run(evidence.node_id)} and see it fail the way the gap shows",
        f"localise: the first project frame of the traceback is {where}; read the suspect files in this order: {order}",
        "patch: change the code at the fault, as little as needed; never what the test asserts",
        f"verify: run {_run(evidence.node_id)} again until it passes",
        "full suite: run the whole test suite (`python -m pytest`); nothing that passed before may fail",
    )


def isolation_phases(gap: Gap, ranked: Sequence[str]) -> tuple[str, ...]:
    """Phases for a test that flaked: reproduce it alone, find what it depends on, remove that."""
    evidence = failing_test_of(gap)
    run = _run(evidence.node_id) if evidence is not None else "the failing test alone"
    order = ", ".join(f"`{f}`" for f in ranked) or "the files the test imports"
    return (
        f"reproduce in isolation: run {run} alone several times and note when it fails",
        f"localise: find what the test depends on besides its inputs (time, order, randomness, shared files or state), starting with {order}",
        "patch: remove that dependency; never retry, sleep or loosen the assertion to hide it",
        f"verify: run {run} alone ten times; it must pass every time",
        "full suite: run the whole test suite (`python -m pytest`); nothing that passed before may fail",
    )
