"""Localisation by execution: what each failing test ran, as a kernel fact.

After a baseline run with failing tests, the kernel runs the test files that hold them
again under coverage.py, one context per test, in the same sandbox. Every failing test's
diagnostic then carries the project files and lines it executed, and for each line how many
passing tests of that run executed it too: the spectrum the planner ranks suspects by.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
from collections import Counter
from pathlib import Path

from domain import Executed, Measurement
from kernel.isolation import readback
from kernel.isolation.paths import PLUGIN_DIR
from kernel.measuring.measure import Target, failed_ids, run_pytest

MAX_TEST_FILES = 5
"""Test files re-run under coverage at most (those with the most failing tests first)."""
MAX_FILES = 40
"""Project files kept per failing test (the ones with the fewest lines passing tests share)."""
MAX_LINES = 1000
"""Lines kept per file and failing test."""
TIMEOUT_S = 300.0
MAX_DATA_BYTES = 256 * 1024 * 1024
"""A larger coverage data file is not read (it is the sandboxed run's output, not the kernel's)."""


Raw = dict[str, dict[int, list[str]]]
"""Per repository-relative file: the contexts (test node ids) that executed each line."""


def read_contexts(data_file: Path, tree: Path) -> Raw:
    """The per-test line data of a coverage file, for the project files under `tree`; {}
    when the file is not coverage.py's (the sandboxed run wrote it: code under test can too)."""
    from coverage import CoverageData
    from coverage.exceptions import CoverageException

    root = os.path.realpath(tree)
    raw: Raw = {}
    # sqlite opens the data file by name, and its journals beside it: it reads a copy the
    # kernel made (a regular file, no link, bounded) in a folder of the kernel's own
    with tempfile.TemporaryDirectory(prefix="seed-coverage-") as private:
        copied = Path(private) / "coverage.db"
        found = readback.copy(Path(data_file.name), copied, MAX_DATA_BYTES, within=data_file.parent)
        if not found.ok or found.truncated:
            return {}
        try:
            data = CoverageData(basename=str(copied))
            data.read()
            for measured in sorted(data.measured_files()):
                real = os.path.realpath(measured)
                if real.startswith(root + os.sep) and not real.startswith(str(PLUGIN_DIR)):
                    rel = os.path.relpath(real, root).replace(os.sep, "/")
                    raw[rel] = {n: list(c) for n, c in data.contexts_by_lineno(measured).items()}
        except (OSError, sqlite3.Error, CoverageException):
            return {}
    return raw


def spectrum(raw: Raw, node: str, passed: set[str]) -> tuple[Executed, ...]:
    """The files and lines one failing test executed, with the passing tests per line."""
    found: list[Executed] = []
    for rel, by_line in raw.items():
        lines = sorted(n for n, contexts in by_line.items() if node in contexts)
        if not lines:
            continue
        passing = [sum(1 for c in by_line[n] if c in passed) for n in lines]
        # the lines passing tests run least are the ones worth keeping
        kept = sorted(sorted(zip(passing, lines, strict=True))[:MAX_LINES], key=lambda p: p[1])
        found.append(
            Executed(file=rel, lines=tuple(n for _, n in kept), passing=tuple(p for p, _ in kept))
        )
    found.sort(key=lambda e: (min(e.passing, default=0), e.file))
    return tuple(found[:MAX_FILES])


def localise(tree: Path, target: Target, work_dir: Path, measurement: Measurement) -> Measurement:
    """The pytest measurement with what each failing test executed (unchanged when none fail,
    the run fails, or coverage.py recorded nothing)."""
    nodes = failed_ids(measurement)
    if not measurement.ran or not nodes or measurement.localised:
        return measurement
    per_file = Counter(n.split("::")[0] for n in nodes)
    files = [f for f, _ in per_file.most_common(MAX_TEST_FILES) if (tree / f).is_file()]
    if not files:
        return measurement.model_copy(update={"localised": True})
    raw: Raw = {}

    def cover(data_file: Path, seen: Path) -> None:
        raw.update(read_contexts(data_file, seen))

    timeout = min(TIMEOUT_S, target.quality.tool_timeout_s)
    rerun = run_pytest(tree, target, work_dir, timeout, files, cover=cover)
    failed = failed_ids(rerun) | nodes
    passed = {c for by_line in raw.values() for cs in by_line.values() for c in cs} - failed
    passed.discard("")
    count = len(set(rerun.collected) - failed) if rerun.collected else len(passed)
    diagnostics = tuple(
        d.model_copy(update={"executed": spectrum(raw, d.node_id, passed), "passing_tests": count})
        if d.node_id in nodes
        else d
        for d in measurement.diagnostics
    )
    return measurement.model_copy(update={"diagnostics": diagnostics, "localised": True})
