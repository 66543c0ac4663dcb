"""The baseline and every candidate measured alike: by the kernel, on an export of a tree.

Measurements are cached by (tool configuration, git tree). A tree not measured yet is
measured incrementally from a related measured tree when it can be (see incremental.py),
with a full measurement at least once every `[analysis] full_every` measurements.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol, cast

from domain import AnalysisInput, GapReport, InboxItem, Measurements, Tool
from kernel.config import Config
from kernel.fsutil import atomic_write_text
from kernel.isolation import seal, trees
from kernel.isolation.exports import Export
from kernel.isolation.paths import Paths
from kernel.measuring import mypyrun, testmap
from kernel.measuring.gate import Gate, ruff_material
from kernel.measuring.incremental import (
    CODE_SUFFIXES,
    FULL,
    Delta,
    Scope,
    import_map,
    plan_scope,
    tree_delta,
)
from kernel.measuring.localise import localise
from kernel.measuring.measure import Target, failed_ids, measure, run_pytest
from kernel.measuring.testmap import Selection, TestFiles, TestMap


class Setting(Protocol):
    """What measuring a tree needs of the command's context (kernel.host.context.Context is one)."""

    @property
    def paths(self) -> Paths: ...
    @property
    def config(self) -> Config: ...
    @property
    def target(self) -> Target: ...


_CACHE_KEEP = 32


@dataclass
class Baseline:
    """What an iteration is judged against."""

    worktree: Path
    head: str
    tree: str
    gate: Gate
    measurements: Measurements
    report: GapReport
    inbox: list[InboxItem] = field(default_factory=list[InboxItem])
    roadmap: str = ""
    written: dict[str, str] = field(default_factory=dict[str, str])
    """Files the baseline's test run wrote, path -> blob id (a candidate's untracked file
    with exactly those bytes is the run's output, not the agent's work)."""
    given: AnalysisInput | None = None
    """What the analysers were given (kept for `seed.py fitness` to replay their ranking)."""


@dataclass(frozen=True)
class _Entry:
    """A cached measurement and how many incremental ones led to it since the last full one."""

    tree: str
    measurements: Measurements
    since_full: int
    written: dict[str, str] = field(default_factory=dict[str, str])
    """Files the test run wrote in the tree, path -> blob id ('' unknown)."""


def config_key(ctx: Setting, gate: Gate) -> str:
    """Everything besides the tree that decides what the tools report."""
    material = json.dumps(
        {
            "ruff": ruff_material(gate),
            "pyright": gate.pyright_config,
            "mypy": mypyrun.material(gate.mypy, gate.mypy_dir),
            "tools": [gate.adoption.tools, gate.adoption.advisory],
            "quality": ctx.config.quality.model_dump(mode="json"),
            "strict": ctx.target.strict,
            "python": ctx.target.python,
            "root": str(ctx.paths.root),
            "suppressed": 1,  # measurements carry what suppressions hide (suppressions.py)
            "outcomes": 1,  # measurements carry per-test "passed" outcomes since issue 23
            "tampering": 1,  # tampering is evidence of its own since issue 24, not a Diagnostic
        },
        sort_keys=True,
    )
    return hashlib.sha256(material.encode("utf-8")).hexdigest()[:16]


def _load(ctx: Setting, path: Path) -> _Entry | None:
    try:
        sealed = cast(dict[str, Any], json.loads(path.read_bytes()))
        body = str(sealed["body"])
        if not seal.valid(ctx.paths.state, body.encode("utf-8"), str(sealed["seal"])):
            return None  # not written by this kernel: never trusted
        raw = cast(dict[str, Any], json.loads(body))
        measurements = Measurements.model_validate(raw["measurements"])
        found = raw.get("written", {})
        # an entry of an older kernel lists names only: their bytes are unknown
        written = (
            {str(k): str(v) for k, v in cast(dict[Any, Any], found).items()}
            if isinstance(found, dict)
            else dict.fromkeys((str(p) for p in cast(list[Any], found)), "")
        )
        return _Entry(measurements.tree, measurements, int(raw.get("since_full", 0)), written)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _store(ctx: Setting, path: Path, entry: _Entry) -> None:
    body = json.dumps(
        {
            "since_full": entry.since_full,
            "measurements": entry.measurements.model_dump(mode="json"),
            "written": entry.written,
        }
    )
    atomic_write_text(
        path, json.dumps({"body": body, "seal": seal.seal(ctx.paths.state, body.encode())})
    )
    entries = sorted(ctx.paths.cache.glob("*.json"), key=lambda p: p.stat().st_mtime)
    for old in entries[:-_CACHE_KEEP]:
        old.unlink(missing_ok=True)


def _base(ctx: Setting, key: str, tree: str, candidates: tuple[str, ...]) -> _Entry | None:
    """The measured tree to start from: a named candidate, else the latest one measured."""
    for candidate in candidates:
        if candidate and candidate != tree:
            entry = _load(ctx, ctx.paths.cache / f"{key}-{candidate}.json")
            if entry is not None:
                return entry
    measured: list[tuple[float, Path]] = []
    for path in ctx.paths.cache.glob(f"{key}-*.json"):
        with contextlib.suppress(OSError):
            measured.append((path.stat().st_mtime, path))
    return _load(ctx, max(measured)[1]) if measured else None


def measure_cached(
    ctx: Setting,
    place: Export,
    tree: str,
    gate: Gate,
    work_dir: Path,
    related: tuple[str, ...] = (),
    *,
    localising: bool = False,
    mapping: bool = False,
    map_run: bool = True,
) -> tuple[Measurements, dict[str, str]]:
    """Measurements of a tree, and the files its test run wrote: cached, incremental from a
    related measured tree, or full. `localising` (the baseline): failing tests are re-run
    under coverage so that each carries what it executed. `mapping` (the baseline): a full
    test run records the test map, and an incremental one runs only the tests it selects;
    otherwise (a candidate) the whole suite always runs. Without `map_run`, a map that takes
    a traced run of its own (before Python 3.12) is not made.

    `place` exports the tree when the tools must run; `related` names trees to start from,
    best first (the baseline for a changed tree, the parent commit's tree for a new HEAD).
    """
    key = config_key(ctx, gate)
    path = ctx.paths.cache / f"{key}-{tree}.json"
    hit = _load(ctx, path)
    if hit is not None and not (localising and _unlocalised(hit.measurements)):
        return hit.measurements, hit.written
    if hit is not None:  # measured while verifying a candidate: only the localisation is new
        result, since, written = hit.measurements, hit.since_full, hit.written
    else:
        result, since = _measure(ctx, place, tree, gate, work_dir, related, mapping, map_run)
        written = {}
    if localising and _unlocalised(result):
        result = Measurements(
            tree=result.tree,
            items=tuple(
                localise(place(), ctx.target, work_dir, m) if m.tool == Tool.PYTEST else m
                for m in result.items
            ),
        )
    written = {**written, **place.written()}
    if all(m.ran or m.timed_out for m in result.items):
        _store(ctx, path, _Entry(tree, result, since, written))
    return result, written


def _unlocalised(measurements: Measurements) -> bool:
    pytest = measurements.get(Tool.PYTEST)
    return pytest is not None and pytest.ran and not pytest.localised and bool(failed_ids(pytest))


def _measure(
    ctx: Setting,
    place: Export,
    tree: str,
    gate: Gate,
    work_dir: Path,
    related: tuple[str, ...],
    mapping: bool,
    map_run: bool = True,
) -> tuple[Measurements, int]:
    """A full or incremental measurement, and how many incremental ones since the last full."""
    key = config_key(ctx, gate)
    base = _base(ctx, key, tree, related) if ctx.config.analysis.incremental else None
    scope: Scope = FULL
    tree_dir = place()
    if base is not None and base.since_full + 1 < ctx.config.analysis.full_every:
        delta = tree_delta(ctx.paths.root, base.tree, tree)
        if delta is not None:
            scope = plan_scope(ctx.paths.root, tree_dir, tree, delta, gate)
            if mapping:
                scope = replace(scope, tests=_selection(ctx, key, tree, base, delta))
    executed = _mapper(ctx, key, tree, map_run) if mapping else None  # a whole suite maps

    def fill(view: Path) -> None:
        # ruff's files from git objects, never from the export, where tests have run
        trees.export_tree(ctx.paths.root, place.tree, view, place.store)

    if scope.full or base is None:
        result = measure(
            tree_dir,
            ctx.target,
            gate,
            work_dir,
            tree_id=tree,
            executed=executed,
            fill=fill,
        )
        if executed is not None:
            _import_map(ctx, key, tree, result)
        return result, 0
    result = measure(
        tree_dir,
        ctx.target,
        gate,
        work_dir,
        tree_id=tree,
        base=base.measurements,
        scope=scope,
        executed=executed,
        fill=fill,
    )
    return _whole_suite_decides(ctx, tree_dir, work_dir, base.measurements, result), (
        base.since_full + 1
    )


def _whole_suite_decides(
    ctx: Setting, tree_dir: Path, work_dir: Path, before: Measurements, result: Measurements
) -> Measurements:
    """Like for like: a test that passed in the earlier run and fails in a selection of the
    suite is judged by the whole suite (it may lean on a test the selection left out)."""
    now, earlier = result.get(Tool.PYTEST), before.get(Tool.PYTEST)
    if now is None or earlier is None or not now.incremental:
        return result
    if not failed_ids(now) & set(earlier.passed):
        return result
    timeout = ctx.config.quality.tool_timeout_s
    whole = run_pytest(tree_dir, ctx.target, work_dir, timeout)
    whole = whole.model_copy(update={"advisory": now.advisory})
    items = tuple(whole if m.tool == Tool.PYTEST else m for m in result.items)
    return Measurements(tree=result.tree, items=items)


def _mapper(
    ctx: Setting, key: str, tree: str, map_run: bool = True
) -> Callable[[TestFiles], None] | None:
    """What stores the test map of a full run (None: the map is off; a FreeMap without
    `map_run`)."""
    if not ctx.config.analysis.test_map:
        return None

    def keep(tests: TestFiles) -> None:
        if tests:
            testmap.save(ctx.paths.state, key, TestMap(tree, tests))

    return keep if map_run else testmap.FreeMap(keep)


def _import_map(ctx: Setting, key: str, tree: str, result: Measurements) -> None:
    """Where a whole run made no map (before Python 3.12, without a traced run of its own),
    the tree's imports make one (read from git, never from the export the tests ran in); a
    traced map, even of an older tree, is finer and stays."""
    found = testmap.load(ctx.paths.state, key)
    pytest = result.get(Tool.PYTEST)
    if (found is not None and not found.imports) or pytest is None or not pytest.ran:
        return
    entries = trees.entry_map(ctx.paths.root, tree)
    code = sorted(p for p, (m, _) in entries.items() if p.endswith(CODE_SUFFIXES) and m != "120000")
    texts = trees.read_texts(ctx.paths.root, [entries[p][1] for p in code])
    tests = {n.split("::")[0] for n in pytest.collected}
    made = import_map(dict(zip(code, texts, strict=True)), tests)
    testmap.save(ctx.paths.state, key, TestMap(tree, made, imports=True))


def _selection(ctx: Setting, key: str, tree: str, base: _Entry, delta: Delta) -> Selection | None:
    """The tests to re-run after this change, from the test map (None: the whole suite)."""
    if not ctx.config.analysis.test_map or delta.touches_config():
        return None
    found = testmap.load(ctx.paths.state, key)
    if found is None:
        return None
    since = delta
    if found.tree != base.tree:  # the map is older than the measurement it goes with
        older = tree_delta(ctx.paths.root, found.tree, tree)
        if older is None:
            return None
        since = older
    selection = testmap.select(found, since.changed, since.deleted, strict=True)
    pytest = base.measurements.get(Tool.PYTEST)
    if selection is None or pytest is None:
        return selection
    # a file that could not be collected ran no test the map knows: it runs again whole
    broken = {d.file for d in pytest.diagnostics if d.rule == "collection-error"}
    broken = {f for f in broken if f.endswith(".py") and f not in since.deleted}
    return replace(selection, files=tuple(sorted({*selection.files, *broken})))
