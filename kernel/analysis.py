"""The baseline: a clean worktree at HEAD, measured by the kernel and judged by the analysers."""

from __future__ import annotations

import contextlib
import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from domain import AnalysisInput, GapReport, InboxItem, Measurements
from kernel import gitops, inbox
from kernel.context import Context
from kernel.fsutil import atomic_write_text
from kernel.measure import Gate, freeze_gate, measure

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


def _cache_key(ctx: Context, tree: str, gate: Gate) -> str:
    material = json.dumps(
        {
            "tree": tree,
            "ruff": gate.ruff_config.read_text(encoding="utf-8"),
            "pyright": gate.pyright_config,
            "quality": ctx.config.quality.model_dump(mode="json"),
            "strict": ctx.target.strict,
            "python": ctx.target.python,
            "root": str(ctx.paths.root),
        },
        sort_keys=True,
    )
    return hashlib.sha256(material.encode("utf-8")).hexdigest()[:24]


def measure_cached(
    ctx: Context, tree_dir: Path, tree: str, gate: Gate, work_dir: Path
) -> Measurements:
    """Measurements of a tree, from the cache when this exact tree and config were measured."""
    key = _cache_key(ctx, tree, gate)
    path = ctx.paths.cache / f"{key}.json"
    if path.exists():
        with contextlib.suppress(ValueError, OSError):
            return Measurements.model_validate_json(path.read_bytes())
    result = measure(tree_dir, ctx.target, gate, work_dir, tree_id=tree)
    if all(m.ran or m.timed_out for m in result.items):
        atomic_write_text(path, result.model_dump_json())
        entries = sorted(ctx.paths.cache.glob("*.json"), key=lambda p: p.stat().st_mtime)
        for old in entries[:-_CACHE_KEEP]:
            old.unlink(missing_ok=True)
    return result


def read_inbox(ctx: Context, now: datetime) -> list[InboxItem]:
    """Queued inbox items; bad files are set aside, logged and recorded as events."""
    items, rejected = inbox.scan(ctx.paths.inbox, now)
    for rejection in rejected:
        message = f"inbox/{rejection.name} set aside in {rejection.moved_to.parent.name}/: {rejection.reason}"
        ctx.log(message)
        ctx.store.event("inbox_rejected", message, name=rejection.name, reason=rejection.reason)
    return items


def analyse(
    ctx: Context, worktree: Path, head: str, now: datetime, quarantined: tuple[str, ...] = ()
) -> Baseline:
    """Measure the clean worktree at head, read inbox and roadmap, and rank the gaps."""
    tree = gitops.tree_of(ctx.paths.root, head)
    gate = freeze_gate(worktree, ctx.paths.gate / worktree.name, ctx.config.quality)
    measurements = measure_cached(ctx, worktree, tree, gate, ctx.paths.runs / "pytest")
    items = read_inbox(ctx, now)
    roadmap_path = worktree / "ROADMAP.md"
    roadmap = (
        roadmap_path.read_text(encoding="utf-8", errors="replace") if roadmap_path.is_file() else ""
    )
    ctx.start_host()
    report = ctx.host.analyze(
        AnalysisInput(
            measurements=measurements,
            inbox=tuple(items),
            roadmap=roadmap,
            now=now,
            quarantined=quarantined,
        )
    )
    return Baseline(worktree, head, tree, gate, measurements, report, items, roadmap)
