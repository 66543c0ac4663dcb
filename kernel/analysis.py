"""The baseline: a clean worktree at HEAD, measured by the kernel and judged by the analysers.

Measurements are cached by (tool configuration, git tree). A tree not measured yet is
measured incrementally from a related measured tree when it can be (see incremental.py),
with a full measurement at least once every `[analysis] full_every` measurements.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any, cast

from domain import (
    AnalysisInput,
    Diagnostic,
    GapReport,
    InboxItem,
    IterationOutcome,
    Measurements,
    Tool,
)
from kernel import answers, gitops, inbox, jails, seal, testmap, trees
from kernel.bounds import (
    INBOX_MAX_QUEUED,
    INBOX_MAX_QUEUED_BYTES,
    ROADMAP_MAX_BYTES,
    ROADMAP_MAX_ITEMS,
)
from kernel.context import Context, log_line
from kernel.exports import Export
from kernel.fsutil import atomic_write_text
from kernel.gate import Gate, freeze_gate_at, ruff_material
from kernel.incremental import FULL, Delta, Scope, plan_scope, tree_delta
from kernel.localise import localise
from kernel.measure import failed_ids, measure, run_pytest
from kernel.suppressions import without_suppressed
from kernel.testmap import Selection, TestFiles, TestMap

_CACHE_KEEP = 32
_FAILED = (IterationOutcome.FAILURE, IterationOutcome.ROLLBACK, IterationOutcome.NO_CHANGE)


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


@dataclass(frozen=True)
class _Entry:
    """A cached measurement and how many incremental ones led to it since the last full one."""

    tree: str
    measurements: Measurements
    since_full: int
    written: dict[str, str] = field(default_factory=dict[str, str])
    """Files the test run wrote in the tree, path -> blob id ('' unknown)."""


def config_key(ctx: Context, gate: Gate) -> str:
    """Everything besides the tree that decides what the tools report."""
    material = json.dumps(
        {
            "ruff": ruff_material(gate),
            "pyright": gate.pyright_config,
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


def _load(ctx: Context, path: Path) -> _Entry | None:
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


def _store(ctx: Context, path: Path, entry: _Entry) -> None:
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


def _base(ctx: Context, key: str, tree: str, candidates: tuple[str, ...]) -> _Entry | None:
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
    ctx: Context,
    place: Export,
    tree: str,
    gate: Gate,
    work_dir: Path,
    related: tuple[str, ...] = (),
    *,
    localising: bool = False,
    mapping: bool = False,
) -> tuple[Measurements, dict[str, str]]:
    """Measurements of a tree, and the files its test run wrote: cached, incremental from a
    related measured tree, or full. `localising` (the baseline): failing tests are re-run
    under coverage so that each carries what it executed. `mapping` (the baseline): a full
    test run records the test map, and an incremental one runs only the tests it selects;
    otherwise (a candidate) the whole suite always runs.

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
        result, since = _measure(ctx, place, tree, gate, work_dir, related, mapping)
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
    ctx: Context,
    place: Export,
    tree: str,
    gate: Gate,
    work_dir: Path,
    related: tuple[str, ...],
    mapping: bool,
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
    executed = _mapper(ctx, key, tree) if mapping else None  # a whole suite maps the tests

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
    ctx: Context, tree_dir: Path, work_dir: Path, before: Measurements, result: Measurements
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


def _mapper(ctx: Context, key: str, tree: str) -> Callable[[TestFiles], None] | None:
    """What stores the test map of a full run (None: the map is off)."""
    if not ctx.config.analysis.test_map:
        return None

    def keep(tests: TestFiles) -> None:
        if tests:
            testmap.save(ctx.paths.state, key, TestMap(tree, tests))

    return keep


def _selection(ctx: Context, key: str, tree: str, base: _Entry, delta: Delta) -> Selection | None:
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


def _attempts(ctx: Context, items: list[InboxItem]) -> list[InboxItem]:
    """Each item with the number of failed iterations at it so far."""
    keys = [f"inbox:{item.name}" for item in items]
    if not keys:
        return items
    failed: dict[str, int] = {}
    for record in ctx.store.for_gaps(keys, per_gap=20):
        if record.outcome in _FAILED:
            failed[record.gap.key] = failed.get(record.gap.key, 0) + 1
    return [
        item.model_copy(update={"attempts": failed.get(f"inbox:{item.name}", 0)}) for item in items
    ]


def read_inbox(ctx: Context, now: datetime) -> list[InboxItem]:
    """Queued inbox items; bad files are set aside, logged and recorded as events."""
    ctx.start_host()  # the modules read the tasks' front matter
    intake = inbox.scan(ctx.paths.inbox, now, ready=ctx.inbox_ready(), read=ctx.host.read_inbox)
    for rejection in intake.rejected:
        where = f"inbox/{rejection.moved_to.parent.name}/{rejection.moved_to.name}"
        message = f"inbox/{rejection.name} set aside as {where}: {rejection.reason}"
        ctx.log(message)
        ctx.store.event("inbox_rejected", message, name=rejection.name, reason=rejection.reason)
    for name in intake.pending:
        ctx.log(f"inbox/{name} is still being written; it is read once it is closed")
    if intake.waiting:
        ctx.log(
            f"{intake.waiting:,} more inbox tasks wait for a later look (at most "
            f"{INBOX_MAX_QUEUED:,} tasks or {INBOX_MAX_QUEUED_BYTES // 1024 // 1024} MiB are read at once)"
        )
    return _attempts(ctx, intake.items)


_ITEM_LINE = re.compile(r"\s*[-*]\s+\[ \]\s+\S")
"""An unchecked item's line as the roadmap analyser reads it (counted here, never parsed;
an item in a code block counts too, so the analyser never gets more than the bound)."""


def read_roadmap(root: Path, head: str) -> tuple[str, list[str]]:
    """ROADMAP.md of head, bounded (see bound_roadmap); never more than
    ROADMAP_MAX_BYTES of it in memory."""
    shown = gitops.git(
        root, "cat-file", "blob", f"{head}:ROADMAP.md", check=False, max_bytes=ROADMAP_MAX_BYTES
    )
    if not shown.ok:
        return "", []
    return bound_roadmap(shown.stdout, max(shown.output_bytes, len(shown.stdout)))


def bound_roadmap(data: bytes, total: int) -> tuple[str, list[str]]:
    """The first bytes of a ROADMAP.md of `total` bytes as text, bounded to ROADMAP_MAX_BYTES
    (whole lines) and ROADMAP_MAX_ITEMS unchecked items; and what was left out, counted."""
    notes: list[str] = []
    if total > len(data) or len(data) > ROADMAP_MAX_BYTES:
        data = data[:ROADMAP_MAX_BYTES]
        data = data[: data.rfind(b"\n") + 1]  # whole lines only
        notes.append(
            f"ROADMAP.md is {total:,} bytes; only the first {len(data):,} are read "
            f"({total - len(data):,} bytes left out)"
        )
    text = data.decode("utf-8", errors="replace")
    items, end = 0, len(text)
    at = 0
    for line in text.splitlines(keepends=True):  # the lines the analyser will see
        if _ITEM_LINE.match(line):
            items += 1
            if items == ROADMAP_MAX_ITEMS + 1:
                end = at
        at += len(line)
    if items > ROADMAP_MAX_ITEMS:
        text = text[:end]
        notes.append(
            f"ROADMAP.md has {items:,} unchecked items in what is read; only the first "
            f"{ROADMAP_MAX_ITEMS:,} are taken ({items - ROADMAP_MAX_ITEMS:,} left out)"
        )
    return text, notes


_MISSING = re.compile(r"No module named '([A-Za-z_][\w.]*)'")
SETUP_FILE = "setup.json"
"""The setup problems of the latest analysis, in the kernel's state (`status` shows them)."""


def setup_problems(
    ctx: Context, tree: str, measurements: Measurements
) -> tuple[Measurements, list[str]]:
    """The test run's findings that are the environment's, not the code's, taken out of what
    gaps come from and each said once with what to run: modules of the project imported from
    outside the tree under test (seed's problem, never an agent's), and a module the
    repository holds that the test environment cannot import (the person's setup)."""
    pytest = measurements.get(Tool.PYTEST)
    if pytest is None:
        return measurements, []
    python, root = ctx.target.python, ctx.paths.root
    problems: list[str] = []
    outside = [d for d in pytest.diagnostics if d.rule == "outside-import"]
    if outside:
        problems.append(_outside_text(ctx, outside))
    kept = [d for d in pytest.diagnostics if d.rule != "outside-import"]
    missing: dict[str, str] = {}
    for d in kept:
        found = _MISSING.search(d.message) if d.exc_type in ("", "ModuleNotFoundError") else None
        name = found.group(1).split(".")[0] if found else ""
        where = missing.get(name) or (_held(root, tree, name) if name else "")
        if where:
            missing[name] = where
    if not pytest.ran:
        found = _MISSING.search(pytest.error)
        name = found.group(1).split(".")[0] if found else ""
        if name and (where := _held(root, tree, name)):
            missing[name] = where
        elif name in ("pytest", "_pytest"):
            # the suite runs with unittest or tox elsewhere: seed's runs need pytest there
            problems.append(
                f"setup: the test environment ({python}) has no pytest, which seed runs the "
                f"tests with (it runs unittest suites too): install it (`{python} -m pip "
                "install pytest`), or set `python` under [quality] in seed.toml to an "
                "interpreter that has it; until then the tests are not measured"
            )
    for name, where in sorted(missing.items()):
        problems.append(
            f"setup: the test environment ({python}) cannot import {name}, which this "
            f"repository holds ({where}): install the project into it (`{python} -m pip "
            f"install -e .` in {root}), or set `python` under [quality] in seed.toml to an "
            "interpreter that has it installed; until then its test results are not gaps"
        )
    if not problems:
        return measurements, []
    if missing or not pytest.ran:  # the suite's results say nothing about the code
        items = tuple(m for m in measurements.items if m.tool != Tool.PYTEST)
    else:
        items = tuple(
            m.model_copy(update={"diagnostics": tuple(kept)}) if m.tool == Tool.PYTEST else m
            for m in measurements.items
        )
    return Measurements(tree=measurements.tree, items=items), problems


def _outside_text(ctx: Context, outside: list[Diagnostic]) -> str:
    """One line for modules of the project imported from outside the tree under test."""
    names = sorted({d.file for d in outside})
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    where = outside[0].message
    if jails.active(ctx.config.guard):
        return (
            f"setup: tests imported {shown} from a copy outside the tree under test ({where}): "
            f"install the project editable (`{ctx.target.python} -m pip install -e .` in "
            f"{ctx.paths.root}) so the tests run the tree's code"
        )
    return (
        f"setup: tests imported {shown} from your checkout, not the tree under test "
        f"({where}): with the sandbox off seed cannot put the tree in the checkout's place, "
        'so they are not gaps; turn the sandbox on (remove `sandbox = "off"` under [guard] in '
        "seed.toml; it needs bubblewrap) to test the tree's own code"
    )


def _held(root: Path, tree: str, name: str) -> str:
    """Where the tree holds a top-level module of this name ('' when it does not)."""
    if not name.isidentifier():
        return ""
    places = (name, f"{name}.py", f"src/{name}", f"src/{name}.py")
    found = gitops.git(root, "ls-tree", "--name-only", tree, "--", *places, check=False)
    listed = found.text().split() if found.ok else []
    return listed[0] if listed else ""


def _tell_setup(ctx: Context, problems: list[str]) -> None:
    """Setup problems for `status` (the state's setup.json) and, when they change, the log."""
    path = ctx.paths.state / SETUP_FILE
    before: object = None
    with contextlib.suppress(OSError, ValueError):
        before = json.loads(path.read_text(encoding="utf-8"))
    if before == problems:
        return
    with contextlib.suppress(OSError):
        atomic_write_text(path, json.dumps(problems))
    for line in problems:
        log_line(ctx.paths, line)


def read_setup(ctx: Context) -> tuple[str, ...]:
    """The setup problems of the latest analysis (none when there was none or it is unread)."""
    with contextlib.suppress(OSError, ValueError):
        found = json.loads((ctx.paths.state / SETUP_FILE).read_text(encoding="utf-8"))
        if isinstance(found, list):
            return tuple(str(line)[:2000] for line in cast(list[Any], found)[:20])
    return ()


def _parent_tree(root: Path, head: str) -> str:
    result = gitops.git(root, "rev-parse", "--verify", "--quiet", f"{head}^^{{tree}}", check=False)
    return result.text().strip() if result.ok else ""


def analyse(
    ctx: Context, worktree: Path, head: str, now: datetime, quarantined: tuple[str, ...] = ()
) -> Baseline:
    """Measure an export of head (never the agent's worktree), read inbox and roadmap from
    HEAD, and rank the gaps."""
    root = ctx.paths.root
    tree = gitops.tree_of(root, head)
    # a ruff version HEAD pins is installed here, once, never while measuring
    gate = freeze_gate_at(
        root, head, ctx.paths.gate / worktree.name, ctx.config.quality, install=True
    )
    place = Export(root, ctx.paths.exports, tree, "base")
    try:
        measurements, written = measure_cached(
            ctx,
            place,
            tree,
            gate,
            ctx.paths.runs / "pytest",
            related=(_parent_tree(root, head),),
            localising=True,
            mapping=True,
        )
    finally:
        place.close()
    items = read_inbox(ctx, now)
    roadmap, left_out = read_roadmap(root, head)
    for note in left_out:
        ctx.log(note)
    measured, setup = setup_problems(ctx, tree, measurements)
    _tell_setup(ctx, setup)
    left_out = [*setup, *left_out]
    ctx.start_host()
    report = ctx.host.analyze(
        AnalysisInput(
            measurements=without_suppressed(measured),  # gaps never come from them
            inbox=tuple(items),
            roadmap=roadmap,
            now=now,
            quarantined=quarantined,
            order=tuple(ctx.config.analysis.order),
        )
    )
    # a gap's files are the tree's paths, never a tool's words (answers.real_files)
    report = answers.real_files(report, [p for _, _, p in trees.entries(root, tree)])
    pytest = measurements.get(Tool.PYTEST)
    tampering = [f"the test run of HEAD: {t.what}" for t in pytest.tampering] if pytest else []
    for note in tampering:
        ctx.log(note)
    left_out += tampering  # evidence for people, never a gap
    if left_out:
        report = report.model_copy(update={"errors": (*report.errors, *left_out)})
    return Baseline(worktree, head, tree, gate, measurements, report, items, roadmap, written)
