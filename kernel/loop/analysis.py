"""The analysis: an export of HEAD measured (baseline.py), inbox and roadmap read from HEAD,
and the gaps ranked by the modules.
"""

from __future__ import annotations

import contextlib
import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any, cast

from domain import (
    AnalysisInput,
    Diagnostic,
    GapReport,
    InboxItem,
    IterationOutcome,
    Measurement,
    Measurements,
    Tool,
)
from kernel.bounds import (
    INBOX_MAX_QUEUED,
    INBOX_MAX_QUEUED_BYTES,
    ROADMAP_MAX_BYTES,
    ROADMAP_MAX_ITEMS,
)
from kernel.fsutil import atomic_write_text
from kernel.host import answers
from kernel.host.context import Context, log_line
from kernel.isolation import gitops, ignored, jails, trees
from kernel.isolation.exports import Export
from kernel.measuring import installed, plainrun, pytestconfig
from kernel.measuring.baseline import Baseline, measure_cached
from kernel.measuring.gate import freeze_gate_at, read_at
from kernel.measuring.offline import split_offline
from kernel.measuring.suppressions import without_suppressed
from kernel.records import inbox

_FAILED = (IterationOutcome.FAILURE, IterationOutcome.ROLLBACK, IterationOutcome.NO_CHANGE)


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
    ctx: Context, tree: str, measurements: Measurements, *, own_imports: bool = False
) -> tuple[Measurements, list[str]]:
    """The test run's findings that are the environment's, not the code's, taken out of what
    gaps come from and each said once with what to run: modules of the project imported from
    outside the tree under test (seed's problem, never an agent's), and a module the
    repository holds that the test environment cannot import (the person's setup, unless
    `own_imports`: the project's own run imports every test module, so it is seed's)."""
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
        said = installed.cannot_import(python, root, name, where)
        problems.append(_seeds_own(name, where) if own_imports else said)
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


def _seeds_own(name: str, where: str) -> str:
    """The line for a module seed's runs cannot import where the project's own run can."""
    return (
        f"setup: seed's runs cannot import `{name}` ({where}), though the project's own "
        "`python -m pytest` imports every test module: this is seed's to solve, not your "
        "setup (please report it); until then those tests are not measured"
    )


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


def measure_base(ctx: Context, worktree: Path, head: str, *, map_run: bool = True) -> Baseline:
    """The measurements of an export of head (cached), and nothing else: no inbox read, no
    gaps ranked (its report is empty). What a replay judges against. Without `map_run`, no
    traced test run of its own makes the test map (baseline.measure_cached)."""
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
            map_run=map_run,
        )
    finally:
        place.close()
    return Baseline(worktree, head, tree, gate, measurements, GapReport(tree=tree), written=written)


def analyse(
    ctx: Context,
    worktree: Path,
    head: str,
    now: datetime,
    quarantined: tuple[str, ...] = (),
    *,
    map_run: bool = True,
) -> Baseline:
    """Measure an export of head (never the agent's worktree), read inbox and roadmap from
    HEAD, and rank the gaps."""
    root = ctx.paths.root
    measured_only = measure_base(ctx, worktree, head, map_run=map_run)
    tree, gate, measurements = measured_only.tree, measured_only.gate, measured_only.measurements
    written = measured_only.written
    items = read_inbox(ctx, now)
    roadmap, left_out = read_roadmap(root, head)
    for note in left_out:
        ctx.log(note)
    pytest = measurements.get(Tool.PYTEST)
    plain = plain_differences(ctx, head, tree, pytest)  # before setup_problems, which reads it
    own = bool(plain_ran(ctx, pytest) and plainrun.collected_all(ctx.paths.state))
    measured, setup = setup_problems(ctx, tree, measurements, own_imports=own)
    _tell_setup(ctx, setup)
    left_out = [*setup, *left_out]
    ctx.start_host()
    # with the test runs given the network, a refused connection is the test's own failure
    cut = jails.active(ctx.config.guard) and ctx.config.quality.test_network != "full"
    measured, offline = split_offline(measured, cut)
    given = AnalysisInput(
        measurements=without_suppressed(measured),  # gaps never come from them
        inbox=tuple(items),
        roadmap=roadmap,
        now=now,
        quarantined=quarantined,
        order=tuple(ctx.config.analysis.order),
    )
    report = ctx.host.analyze(given)
    # a gap's files are the tree's paths, never a tool's words (answers.real_files)
    report = answers.real_files(report, [p for _, _, p in trees.entries(root, tree)])
    pytest = measurements.get(Tool.PYTEST)
    tampering = [f"the test run of HEAD: {t.what}" for t in pytest.tampering] if pytest else []
    for note in tampering:
        ctx.log(note)
    left_out += tampering  # evidence for people, never a gap
    if left_out:
        report = report.model_copy(update={"errors": (*report.errors, *left_out)})
    differences = (
        *ignored.said(root, jails.active(ctx.config.guard)),
        *skip_lines(pytest),
        *offline,
        # tox's default posargs select other tests than seed's run does
        *(pytestconfig.tox_selection(read_at(root, head)) if pytest else ()),
        *plain,
    )
    if differences:
        report = report.model_copy(update={"differences": differences})
    return Baseline(
        worktree, head, tree, gate, measurements, report, items, roadmap, written, given
    )


def plain_ran(ctx: Context, pytest: Measurement | None) -> bool:
    """Whether this analysis has a plain run of its own (run now, or kept for the same key)."""
    return ctx.config.analysis.plain_run and pytest is not None and not pytest.timed_out


def plain_differences(
    ctx: Context, head: str, tree: str, pytest: Measurement | None
) -> tuple[str, ...]:
    """What the project's own pytest run (plainrun.py) finds that seed's run of the same tree
    does not: none where seed's run gave nothing to compare with."""
    if pytest is None or not plain_ran(ctx, pytest):
        return ()
    place = Export(ctx.paths.root, ctx.paths.exports, tree, "plain")
    try:
        sandboxed = jails.active(ctx.config.guard)
        return plainrun.said(
            ctx.paths.state, ctx.paths.root, head, ctx.target, sandboxed, pytest, place
        )
    finally:
        place.close()


def skip_lines(pytest: Measurement | None) -> tuple[str, ...]:
    """What `differences` says of the tests that skip in seed's run, with each reason."""
    if pytest is None:
        return ()
    return tuple(f"{n} tests skip in seed's runs: {reason}" for reason, n in pytest.skips)
