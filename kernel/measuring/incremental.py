"""Incremental measurement: after a small change, ruff and pyright look only at what changed.

ruff judges one file at a time, so it re-checks the changed files (and, when files come
or go, their neighbours, for rules about packages). pyright's verdict on a file depends on
what it imports, so it re-checks the changed files and every file that imports them,
directly or through others. Findings in the files not re-checked are carried over from the
earlier measurement. A change to tool configuration, to the set of top-level names, or to
more than half of the files means a full run; so does every Nth measurement (the caller
counts). pytest re-runs only the tests the test map says ran a changed file (kernel/measuring/testmap.py),
and only when analysing a commit: a candidate always gets the whole suite.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from domain import Diagnostic, Measurement
from kernel.isolation import gitops
from kernel.measuring.gate import GATE_FILES, Gate, in_pyright_scope, pyright_scope
from kernel.measuring.testmap import ANY_FILE, Selection, TestFiles

CODE_SUFFIXES = (".py", ".pyi")
"""Files pyright checks and imports resolve to."""
RUFF_SUFFIXES = (".py", ".pyi", ".ipynb")
"""Files ruff checks by default."""
FULL_FRACTION = 0.5
"""Re-checking more than this share of the files is no cheaper than a full run."""

_LINE = r"(?:[^\n#;\\]|\\[\s\S])*"
"""The rest of a logical line: up to a comment or `;`, across backslash continuations."""
_IMPORT = re.compile(
    rf"^[ \t]*(?:from[ \t]+(?P<base>\.*[\w.]*)[ \t]+import[ \t]+(?P<names>\([^)]*\)|{_LINE})"
    rf"|import[ \t]+(?P<modules>{_LINE}))",
    re.MULTILINE,
)
_NAME = re.compile(r"^\.*[A-Za-z_][\w.]*$")


@dataclass(frozen=True)
class Delta:
    """What changed between a measured tree and the tree to measure."""

    base_tree: str
    changed: tuple[str, ...]
    """Paths added or modified (they exist in the new tree)."""
    deleted: tuple[str, ...]

    def touches_config(self) -> bool:
        """Whether tool configuration or conftest.py changed (the next run must be full)."""
        names = {PurePosixPath(p).name for p in (*self.changed, *self.deleted)}
        return bool(names & {*GATE_FILES, "conftest.py"})


@dataclass(frozen=True)
class Scope:
    """What an incremental measurement re-checks; None for a tool means a full run."""

    ruff: tuple[str, ...] | None
    pyright: tuple[str, ...] | None
    deleted: tuple[str, ...] = ()
    reason: str = ""
    tests: Selection | None = None
    """The tests to re-run (from the test map); None: the whole suite."""

    @property
    def full(self) -> bool:
        """Nothing is carried over."""
        return self.ruff is None and self.pyright is None


FULL = Scope(ruff=None, pyright=None, reason="full run")


def tree_delta(root: Path, old_tree: str, new_tree: str) -> Delta | None:
    """The files that differ between two git trees, or None when git cannot tell."""
    result = gitops.git(
        root,
        "diff-tree",
        "-r",
        "--no-renames",
        "--name-status",
        "-z",
        old_tree,
        new_tree,
        check=False,
    )
    if not result.ok:
        return None
    fields = result.text().split("\0")
    changed: list[str] = []
    deleted: list[str] = []
    for status, path in zip(fields[0::2], fields[1::2], strict=False):
        if not path:
            continue
        (deleted if status.startswith("D") else changed).append(path)
    return Delta(old_tree, tuple(changed), tuple(deleted))


def tree_files(root: Path, tree: str) -> list[str]:
    """Every file path of a git tree."""
    result = gitops.git(root, "ls-tree", "-r", "--name-only", "-z", tree, check=False)
    return [p for p in result.text().split("\0") if p] if result.ok else []


def _dotted(path: str) -> tuple[str, ...]:
    parts = PurePosixPath(path).with_suffix("").parts
    return parts[:-1] if parts and parts[-1] == "__init__" else parts


def module_names(path: str) -> set[str]:
    """Every name under which a file could be imported (from any folder that is a root)."""
    parts = _dotted(path)
    return {".".join(parts[i:]) for i in range(len(parts)) if parts[i:]}


def _with_parents(name: str) -> set[str]:
    pieces = name.split(".")
    return {".".join(pieces[: i + 1]) for i in range(len(pieces))}


def imported_names(text: str, path: str) -> set[str]:
    """Module names a file may import, with their parent packages (relative imports resolved)."""
    parts = _dotted(path)
    package = list(parts if PurePosixPath(path).stem == "__init__" else parts[:-1])
    found: set[str] = set()
    for match in _IMPORT.finditer(text):
        if match.group("modules") is not None:
            for chunk in match.group("modules").replace("\\", " ").split(","):
                name = chunk.split(" as ")[0].strip()
                if _NAME.match(name):
                    found |= _with_parents(name)
            continue
        base = match.group("base")
        level = len(base) - len(base.lstrip("."))
        stem = base.lstrip(".")
        if level:
            anchor = package[: len(package) - (level - 1)] if level - 1 <= len(package) else []
            stem = ".".join([*anchor, stem] if stem else anchor)
        if not stem:
            continue
        found |= _with_parents(stem)
        names = match.group("names").strip("()").replace("\\", " ")
        for chunk in names.split(","):
            name = chunk.split(" as ")[0].strip()
            if name and name != "*" and name.isidentifier():
                found.add(f"{stem}.{name}")
    return found


def dependents(tree_dir: Path, code_files: Sequence[str], changed: Iterable[str]) -> set[str]:
    """Files that import any of the changed files, directly or through other files."""
    importers: dict[str, set[str]] = defaultdict(set)
    for path in code_files:
        try:
            text = (tree_dir / path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for name in imported_names(text, path):
            importers[name].add(path)
    found: set[str] = set()
    frontier = {name for path in changed for name in module_names(path)}
    seen_names: set[str] = set()
    while frontier:
        seen_names |= frontier
        fresh = {f for name in frontier for f in importers.get(name, ())} - found
        found |= fresh
        frontier = {name for f in fresh for name in module_names(f)} - seen_names
    return found


def import_map(texts: Mapping[str, str], test_files: Iterable[str]) -> TestFiles:
    """The test map where no run traced one: per test file, the project files it imports,
    directly or through others, with each conftest.py above it and what that imports (a
    test file that is not Python may run anything: ANY_FILE). `texts`: the code files."""
    by_name: dict[str, set[str]] = defaultdict(set)
    for path in texts:
        for name in module_names(path):
            by_name[name].add(path)
    direct: dict[str, set[str]] = {}

    def imports(path: str) -> set[str]:
        if path not in direct:
            names = imported_names(texts.get(path, ""), path)
            direct[path] = {f for name in names for f in by_name.get(name, ())}
        return direct[path]

    conftests = [p for p in texts if PurePosixPath(p).name == "conftest.py"]
    found: TestFiles = {}
    for test in sorted(set(test_files)):
        if not test.endswith(CODE_SUFFIXES):
            found[test] = frozenset({ANY_FILE})
            continue
        folder = PurePosixPath(test).parent
        above = {c for c in conftests if PurePosixPath(c).parent in (folder, *folder.parents)}
        seen, frontier = {test, *above}, [test, *above]
        while frontier:
            fresh = imports(frontier.pop()) - seen
            seen |= fresh
            frontier.extend(fresh)
        found[test] = frozenset(seen)
    return found


def _top_level(paths: Iterable[str]) -> set[str]:
    """The top-level names Python code could import (first-party modules and packages)."""
    names: set[str] = set()
    for path in paths:
        if path.endswith(CODE_SUFFIXES):
            parts = PurePosixPath(path).parts
            names.add(parts[0] if len(parts) > 1 else PurePosixPath(path).stem)
    return names


def plan_scope(root: Path, tree_dir: Path, tree: str, delta: Delta, gate: Gate) -> Scope:
    """Which files ruff and pyright must re-check after this change."""
    if delta.touches_config():
        return Scope(ruff=None, pyright=None, reason="tool configuration changed")
    files = tree_files(root, tree)
    if not files:
        return FULL
    before = set(tree_files(root, delta.base_tree))
    moved = {*(p for p in delta.changed if p not in before), *delta.deleted}
    ruff: tuple[str, ...] | None
    if _top_level(files) != _top_level(before):
        ruff = None  # first-party import sorting depends on the top-level names
    else:
        lint = {p for p in delta.changed if p.endswith(RUFF_SUFFIXES)}
        folders = {str(PurePosixPath(p).parent) for p in moved}
        lint |= {f for f in files if f.endswith(".py") and str(PurePosixPath(f).parent) in folders}
        ruff = tuple(sorted(lint))
        if len(ruff) > FULL_FRACTION * max(1, sum(f.endswith(RUFF_SUFFIXES) for f in files)):
            ruff = None
    scope = pyright_scope(gate)
    code = [f for f in files if f.endswith(CODE_SUFFIXES) and in_pyright_scope(f, scope)]
    touched_code = [p for p in (*delta.changed, *delta.deleted) if p.endswith(CODE_SUFFIXES)]
    pyright: tuple[str, ...] | None = ()
    if touched_code:
        wanted = {p for p in delta.changed if p in set(code)}
        wanted |= dependents(tree_dir, code, touched_code) & set(code)
        pyright = tuple(sorted(wanted))
        if len(pyright) > FULL_FRACTION * max(1, len(code)):
            pyright = None
    reason = (
        f"{len(delta.changed) + len(delta.deleted)} file(s) changed: "
        f"ruff {'all' if ruff is None else len(ruff)}, "
        f"pyright {'all' if pyright is None else len(pyright)}"
    )
    return Scope(ruff=ruff, pyright=pyright, deleted=delta.deleted, reason=reason)


def merge(
    previous: Measurement, fresh: Measurement, rechecked: Iterable[str], deleted: Iterable[str]
) -> Measurement:
    """The fresh findings for the re-checked files, the previous ones for every other file."""
    if not fresh.ran:
        return fresh
    replaced = set(rechecked) | set(deleted)
    kept = [d for d in previous.diagnostics if d.file not in replaced]
    diagnostics = sorted((*kept, *fresh.diagnostics), key=_order)
    hidden = [d for d in previous.suppressed if d.file not in replaced]
    errors = any(d.severity == "error" for d in diagnostics)
    return fresh.model_copy(
        update={
            "diagnostics": tuple(diagnostics),
            "suppressed": tuple(sorted((*hidden, *fresh.suppressed), key=_order)),
            "exit_code": 1 if errors else 0,
            "incremental": True,
        }
    )


def merge_tests(
    previous: Measurement,
    fresh: Measurement | None,
    selection: Selection,
    deleted: Iterable[str] = (),
) -> Measurement:
    """The re-run tests' results over the earlier run's, which stand for every other test
    (`fresh` None: nothing needed re-running)."""
    if fresh is not None and not fresh.ran:
        return fresh
    base = fresh or previous.model_copy(update={"duration_s": 0.0})
    rerun = set(fresh.collected) if fresh is not None else set[str]()
    gone = set(deleted)

    def kept(node: str) -> bool:
        return node not in rerun and not selection.covers(node) and node.split("::")[0] not in gone

    collected = (
        *(n for n in previous.collected if kept(n)),
        *(fresh.collected if fresh is not None else ()),
    )
    old = tuple(d for d in previous.diagnostics if d.node_id and kept(d.node_id))
    passed = (
        *(n for n in previous.passed if kept(n)),
        *(fresh.passed if fresh is not None else ()),
    )
    diagnostics = (*old, *(fresh.diagnostics if fresh is not None else ()))
    failing = any(d.rule in ("failed", "error", "collection-error") for d in diagnostics)
    return base.model_copy(
        update={
            "diagnostics": diagnostics,
            "collected": collected,
            "passed": passed,
            "exit_code": 1 if failing else 0,
            "incremental": True,
            "localised": previous.localised if fresh is None else False,
        }
    )


def carried(previous: Measurement, deleted: Iterable[str] = ()) -> Measurement:
    """The previous findings (less those of deleted files), for a tool with nothing to re-check."""
    gone = set(deleted)
    kept = tuple(d for d in previous.diagnostics if d.file not in gone)
    hidden = tuple(d for d in previous.suppressed if d.file not in gone)
    return previous.model_copy(
        update={"diagnostics": kept, "suppressed": hidden, "duration_s": 0.0, "incremental": True}
    )


def _order(d: Diagnostic) -> tuple[str, int, int, str, str]:
    return (d.file, d.line, d.column, d.rule, d.message)
