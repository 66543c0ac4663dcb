"""The base's tests judge: the candidate's code is run against the base commit's own test files.

"Test files" are the files pytest collected at the base, every conftest.py, pytest's
configuration, everything under a tests folder, and the data modules only tests read (a
module only test files import, whose code no test ran by the base's test map, or that defines
no function or class when there is no map). The judged tree is the candidate's tree with each
of them put back to its base bytes, and the test-kind files the candidate adds (a conftest.py,
a pytest configuration, a file pytest would collect) left out. When the candidate touches
none of them, the judged tree is the candidate's own and one test run serves both.
"""

from __future__ import annotations

import ast
from collections.abc import Collection, Iterable, Sequence
from pathlib import Path, PurePosixPath

from domain import Measurement
from kernel.isolation import trees
from kernel.judging.guard import is_test_path
from kernel.judging.hygiene import PYTEST_FILES, pytest_config_changed, renamed
from kernel.measuring.doctests import edited, is_doctest
from kernel.measuring.incremental import imported_names, module_names
from kernel.measuring.testmap import ANY_FILE, TestMap

_SECTIONED = ("pyproject.toml", "tox.ini", "setup.cfg")
"""Files that hold pytest's configuration in a section, beside other tools' settings."""


def _test_kind(path: str) -> bool:
    """A file that is a test, a conftest or pytest configuration by its name or folder."""
    name = PurePosixPath(path).name
    return name in PYTEST_FILES or is_test_path(path)


def _data_modules(
    files: dict[str, bytes], tests: set[str], executed: frozenset[str] | None
) -> set[str]:
    """Python modules that only test files import and whose code no test ran (data)."""
    importers: dict[str, set[str]] = {}
    for path, data in files.items():
        text = data.decode("utf-8", errors="replace")
        for name in imported_names(text, path):
            importers.setdefault(name, set()).add(path)
    found: set[str] = set()
    while True:
        known = tests | found
        fresh = {
            path
            for path, data in files.items()
            if path not in known
            and (users := {u for n in module_names(path) for u in importers.get(n, ())})
            and users <= known
            and _no_code(path, data, executed)
        }
        if not fresh:
            return found
        found |= fresh


def _no_code(path: str, data: bytes, executed: frozenset[str] | None) -> bool:
    """No test ran code of this file (by the map; without one: it defines no function or class)."""
    if executed is not None:
        return path not in executed
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError):
        return False
    return not any(
        isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda)
        for n in ast.walk(tree)
    )


def base_test_files(
    root: Path,
    base_tree: str,
    baseline: Measurement | None,
    test_map: TestMap | None,
    among: Collection[str] | None = None,
) -> set[str]:
    """The base tree's test files (see the module's docstring). With `among` (the paths a
    candidate changes), data modules are looked for only when one of them may be one: a
    change to code alone costs no more than listing the tree."""
    base = trees.entry_map(root, base_tree, None)
    tests = {p for p in base if _test_kind(p)}
    if baseline is not None:
        named = [*baseline.collected, *(d.node_id for d in baseline.diagnostics if d.node_id)]
        # a module holding doctests is code: its examples change with it (edited_doctests)
        named = [n for n in named if n.split("::")[0] in tests or not is_doctest(n)]
        tests |= {n.split("::")[0] for n in named if n.split("::")[0] in base}
    python = [p for p, (m, _) in base.items() if p.endswith(".py") and m != "120000"]
    # a map of another tree knows nothing of a module added since: it would call the new
    # code data and judge the base's bytes in its place; such a map is not read here, and
    # neither is a map of imports (importing a data module is not running code of it)
    current = test_map if test_map is not None and test_map.tree == base_tree else None
    current = None if current is not None and current.imports else current
    mapped = {f for files in current.tests.values() for f in files} if current else set[str]()
    executed = frozenset(mapped) if current is not None and ANY_FILE not in mapped else None
    if among is not None:
        maybe = [p for p in python if p in set(among) and p not in tests]
        blobs = trees.read_blobs(root, [base[p][1] for p in maybe])
        if not any(_no_code(p, b, executed) for p, b in zip(maybe, blobs, strict=True)):
            return tests
    blobs = trees.read_blobs(root, [base[p][1] for p in python])
    return tests | _data_modules(dict(zip(python, blobs, strict=True)), tests, executed)


def judged_tree(
    root: Path,
    base_tree: str,
    candidate_tree: str,
    store: trees.ObjectStore,
    tests: Iterable[str],
    collected: Sequence[str] = (),
) -> str:
    """The candidate's tree with the base's test files at their base bytes and the test-kind
    files it adds left out (`collected`: node ids of the candidate's own run); the candidate's
    own tree when that changes nothing."""
    env = store.env()
    base = trees.entry_map(root, base_tree, None)
    now = trees.entry_map(root, candidate_tree, env)
    judged = dict(now)
    wanted = set(tests)
    for path in wanted:
        if path in base:
            judged[path] = base[path]
        else:
            judged.pop(path, None)
    ran = {n.split("::")[0] for n in collected}
    for path in now:
        if path in base:
            continue
        if _test_kind(path) or path in ran or PurePosixPath(path).name in _SECTIONED:
            judged.pop(path, None)
    for path in _SECTIONED:
        if path in base and path in now and path not in wanted:
            before, after = trees.read_texts(root, [base[path][1], now[path][1]], env)
            if pytest_config_changed(path, before, after):
                judged[path] = base[path]
    judged = _without_clashes(judged, wanted)
    if judged == now:
        return candidate_tree
    return trees.tree_from_entries(root, judged, store)


def _without_clashes(
    entries: dict[str, tuple[str, str]], keep: set[str]
) -> dict[str, tuple[str, str]]:
    """A file where a restored test file needs a folder (or the other way round) gives way."""
    folders = {str(p) for path in entries for p in PurePosixPath(path).parents if str(p) != "."}
    return {p: e for p, e in entries.items() if p not in folders or p in keep}


def renamed_tests(
    root: Path, base_tree: str, candidate_tree: str, store: trees.ObjectStore, edited: Iterable[str]
) -> frozenset[str]:
    """The base's test functions (node ids without parameters) that the change renamed in
    their file with their bodies kept (hygiene.renamed): moved, not lost."""
    env = store.env()
    base, now = trees.entry_map(root, base_tree, None), trees.entry_map(root, candidate_tree, env)
    paths = sorted(p for p in edited if p.endswith(".py") and p in base and p in now)
    texts = trees.read_texts(root, [o for p in paths for o in (base[p][1], now[p][1])], env)
    return frozenset(
        f"{path}::{old.replace('.', '::')}"
        for i, path in enumerate(paths)
        for old in renamed(texts[2 * i], texts[2 * i + 1])
    )


def edited_doctests(
    root: Path,
    base_tree: str,
    candidate_tree: str,
    store: trees.ObjectStore,
    baseline: Measurement | None,
) -> frozenset[str]:
    """The base's doctests whose docstring the change edited: changed test expectations."""
    env = store.env()
    base, now = trees.entry_map(root, base_tree, None), trees.entry_map(root, candidate_tree, env)
    nodes: dict[str, list[str]] = {}
    for node in baseline.collected if baseline is not None else ():
        path = node.split("::")[0]
        if is_doctest(node) and path in base and base[path] != now.get(path):
            nodes.setdefault(path, []).append(node)
    paths = sorted(p for p in nodes if p in now)
    texts = trees.read_texts(root, [o for p in paths for o in (base[p][1], now[p][1])], env)
    found = {n for p in nodes if p not in now for n in nodes[p]}  # the module is gone
    for i, path in enumerate(paths):
        found |= edited(nodes[path], texts[2 * i], texts[2 * i + 1])
    return frozenset(found)
