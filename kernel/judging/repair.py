"""Mechanical repair: the catalogue's own fixers on the files the agent touched, before judging.

A real agent that leaves two blank lines where an import was, or an import it no longer
uses, should not lose its whole run to `ruff format` or F401: ruff fixes those itself. The
kernel runs ruff's safe fixes for the findings the change added, then, only where the project
adopted ruff format, `ruff format --range` on the lines the change wrote (never the lines the
person wrote). Both run in a lint view of the
candidate's export (the baseline's ruff configuration in place); the repaired bytes go back
into the export. The repaired tree is what is guarded, verified and committed.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from domain import Measurements, Tool
from kernel.fsutil import plain_file
from kernel.isolation import gitops, procs, trees
from kernel.measuring.gate import Gate, lint_view
from kernel.measuring.measure import ruff_argv, run_ruff, tool_env

FIX_FLAGS: tuple[str, ...] = ("check", "--fix-only", "--no-unsafe-fixes", "--no-cache", "--quiet")
"""ruff's safe fixes only; nothing is reported."""
FORMAT_FLAGS: tuple[str, ...] = ("format", "--no-cache", "--quiet")


@dataclass(frozen=True)
class Repair:
    """What the kernel's fixers changed: the repaired tree, what they did, the new bytes."""

    tree: str
    notes: tuple[str, ...] = ()
    files: dict[str, bytes] = field(default_factory=dict[str, bytes])
    """Repaired files' new bytes (written back into the worktree before a repair round)."""


def _ruff(
    flags: Sequence[str], gate: Gate, files: Sequence[str], tree: Path, timeout: float
) -> None:
    argv = ruff_argv(gate, flags, files)
    if isinstance(argv, str):
        return  # no ruff, or none that has these flags (`--range` before 0.2.2): nothing fixed
    env = {k: v for k, v in tool_env().items() if not k.startswith("RUFF_")}
    # a fixer that fails or times out changes nothing worth keeping: the verifier judges as is
    procs.run(argv, cwd=tree, timeout_s=timeout, env=env)


def written_ranges(old: str | None, new: str) -> list[tuple[int, int]]:
    """The 1-based line ranges (first, last) of `new` that the change wrote, last first."""
    lines = new.splitlines(keepends=True)
    if old is None:
        return [(1, len(lines))] if lines else []
    matcher = difflib.SequenceMatcher(None, old.splitlines(keepends=True), lines, autojunk=False)
    ranges = [
        (j1 + 1, j2) for tag, _, _, j1, j2 in matcher.get_opcodes() if tag in ("replace", "insert")
    ]
    return sorted(ranges, reverse=True)  # bottom up: a range formatted never moves the next


def _read(export: Path, files: Sequence[str]) -> dict[str, bytes]:
    return {f: (export / f).read_bytes() for f in files}


def _new_fixable(
    baseline: Measurements, gate: Gate, files: Sequence[str], tree: Path, timeout: float
) -> dict[str, list[str]]:
    """Per touched file, the fixable rules whose count the change made grow."""
    before = baseline.get(Tool.RUFF)
    after = run_ruff(tree, gate, timeout, files, view=tree)
    if before is None or not after.ran:
        return {}
    had = Counter((d.file, d.rule) for d in before.diagnostics)
    has = Counter((d.file, d.rule) for d in after.diagnostics)
    grown: dict[str, list[str]] = {}
    for d in after.diagnostics:
        key = (d.file, d.rule)
        if d.fixable and has[key] > had[key] and d.rule not in grown.get(d.file, []):
            grown.setdefault(d.file, []).append(d.rule)
    return grown


def repair(
    root: Path,
    store: trees.ObjectStore,
    tree: str,
    export: Path,
    touched: Sequence[str],
    baseline: Measurements,
    gate: Gate,
    timeout: float,
    base: str = "",
) -> Repair:
    """Run the fixers on the touched Python files in `export` (holding `tree`, which changes
    `base`): the new tree."""
    tools = gate.adoption.tools
    # the fixers run outside the sandbox: never on a file reached through a link
    files = sorted(f for f in touched if f.endswith(".py") and plain_file(export, f))
    if not files:
        return Repair(tree)
    before = _read(export, files)
    notes: list[str] = []
    with lint_view(export, gate) as view:
        fixed = before
        if "ruff" in tools:
            grown = _new_fixable(baseline, gate, files, view, timeout)
            for path, rules in sorted(grown.items()):
                _ruff((*FIX_FLAGS, "--select", ",".join(rules)), gate, [path], view, timeout)
            fixed = _read(view, files)
            notes += [
                f"ruff's safe fixes for {', '.join(rules)}: {path}"
                for path, rules in sorted(grown.items())
                if fixed[path] != before[path]
            ]
        if "ruff-format" in tools:
            for path in files:
                text = fixed[path].decode("utf-8", errors="replace")
                for first, last in written_ranges(
                    gitops.as_text(gitops.blob_at(root, base, path)), text
                ):
                    flags = (*FORMAT_FLAGS, f"--range={first}-{last + 1}")  # end exclusive
                    _ruff(flags, gate, [path], view, timeout)
        after = _read(view, files)
    notes += [f"ruff format: {f}" for f in files if after[f] != fixed[f]]
    changed = {f: data for f, data in after.items() if data != before[f]}
    for path, data in sorted(changed.items()):
        (export / path).unlink()
        (export / path).write_bytes(data)  # the export holds the repaired tree from here on
        tree = trees.with_file(root, tree, path, data, store)
    return Repair(tree, tuple(notes), changed)
