"""The test map: per test, the project files it ran, from the latest traced full test run.

Kept in the kernel's state (sealed, one per tool configuration), never in the tree. It
decides which tests run first, never what lands: verification runs the affected tests
first to refuse a breaking candidate in seconds, and a candidate that passes them still
gets the whole suite (a selection misses import-time effects, data files and subprocesses).
Re-analysis of a commit made outside the daemon may run only the affected tests, with a
full run at least every `[analysis] full_every` analyses.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, cast

from kernel.fsutil import atomic_write_text
from kernel.isolation import seal

TestFiles = dict[str, frozenset[str]]
"""Per test node id: the project files (repository-relative) whose code the test ran."""
ANY_FILE = "*"
"""The map's entry for a test that ran more files than it keeps: any change selects it."""
SHARE = 0.5
"""A selection of more than this share of the tests is no cheaper than the whole suite."""
_MAX_BYTES = 256 * 1024 * 1024
"""A map file larger than this is not read."""


@dataclass(frozen=True)
class TestMap:
    """Which project files each test ran, on one tree."""

    tree: str
    tests: TestFiles
    imports: bool = False
    """Made from the tree's imports, not a traced run (incremental.import_map): keyed by test
    file, each with the project files it imports, directly or through others."""


@dataclass(frozen=True)
class FreeMap:
    """Takes a test map only where the measured run makes it itself (sys.monitoring, 3.12+),
    never from a traced run of its own (before 3.12, a second whole suite): for a look at the
    gaps, which the daemon's next whole run maps."""

    keep: Callable[[TestFiles], None]

    def __call__(self, tests: TestFiles) -> None:
        self.keep(tests)


@dataclass(frozen=True)
class Selection:
    """The tests a change can affect: node ids from the map, and test files run whole."""

    nodes: tuple[str, ...]
    files: tuple[str, ...]
    """Test files added or changed: every test in them runs (new tests are in no map)."""
    reason: str

    def argv(self) -> list[str]:
        """pytest arguments: the whole files, then the node ids outside them."""
        inside = set(self.files)
        return [*self.files, *(n for n in self.nodes if n.split("::")[0] not in inside)]

    def covers(self, node: str) -> bool:
        """Whether a test of the earlier run is re-run by this selection."""
        return node in set(self.nodes) or node.split("::")[0] in set(self.files)


def _path(state: Path, key: str) -> Path:
    return state / "testmap" / f"{key}.json"


def save(state: Path, key: str, test_map: TestMap) -> None:
    """Store the map for a tool configuration, sealed."""
    names = sorted({f for files in test_map.tests.values() for f in files})
    index = {name: i for i, name in enumerate(names)}
    body = json.dumps(
        {
            "tree": test_map.tree,
            "imports": test_map.imports,
            "files": names,
            "tests": {n: sorted(index[f] for f in fs) for n, fs in test_map.tests.items()},
        }
    )
    path = _path(state, key)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps({"body": body, "seal": seal.seal(state, body.encode())}))


def load(state: Path, key: str) -> TestMap | None:
    """The stored map, or None when there is none or it was not written by this kernel."""
    path = _path(state, key)
    try:
        if path.stat().st_size > _MAX_BYTES:
            return None
        sealed = cast(dict[str, Any], json.loads(path.read_bytes()))
        body = str(sealed["body"])
        if not seal.valid(state, body.encode("utf-8"), str(sealed["seal"])):
            return None
        raw = cast(dict[str, Any], json.loads(body))
        names = [str(n) for n in cast(list[Any], raw["files"])]
        tests = cast(dict[str, list[int]], raw["tests"])
        return TestMap(
            str(raw["tree"]),
            {n: frozenset(names[i] for i in ids) for n, ids in tests.items()},
            raw.get("imports") is True,
        )
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return None


def _test_module(path: str) -> bool:
    name = PurePosixPath(path).name
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def select(
    test_map: TestMap,
    changed: Sequence[str],
    deleted: Sequence[str],
    *,
    strict: bool,
    capped: bool = True,
) -> Selection | None:
    """The tests a change can affect, or None when the map cannot tell.

    `strict` (re-analysis, where the selection stands in for the suite): a change to anything
    but Python code, or to a conftest.py, means the whole suite. Otherwise (verification's
    first pass) only Python files count and the whole suite follows anyway. Without `capped`
    (which tests can vouch for changed lines), a selection of most tests is still one.
    """
    touched = {*changed, *deleted}
    if any(PurePosixPath(p).name == "conftest.py" for p in touched):
        return None
    if strict and any(not p.endswith((".py", ".pyi")) for p in touched):
        return None
    if test_map.imports and not _imported(test_map, touched):
        return None
    gone = set(deleted)
    files = tuple(sorted(p for p in changed if _test_module(p)))
    nodes = tuple(
        sorted(
            node
            for node, ran in test_map.tests.items()
            if node.split("::")[0] not in gone and (ANY_FILE in ran or not ran.isdisjoint(touched))
        )
    )
    if not nodes and not files:
        return Selection((), (), "no test ran a changed file")
    if capped and len(nodes) > SHARE * max(1, len(test_map.tests)):
        return None
    if test_map.imports:  # its keys are test files: each runs whole
        files, nodes = tuple(sorted({*files, *nodes})), ()
    reason = f"{len(nodes)} of {len(test_map.tests)} tests ran a changed file"
    if files:
        reason += f"; {len(files)} changed test file(s) run whole"
    return Selection(nodes, files, reason)


def _imported(test_map: TestMap, touched: set[str]) -> bool:
    """Whether every changed Python file is one some test file imports (else a test may load
    it another way, by a name in a string, and only the whole suite can tell)."""
    known = {f for files in test_map.tests.values() for f in files}
    code = (p for p in touched if p.endswith((".py", ".pyi")) and not _test_module(p))
    return ANY_FILE in known or all(p in known for p in code)
