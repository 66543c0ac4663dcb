"""Risk: what the actions touch, whether the gap failed before, and what memory says."""

from __future__ import annotations

from collections.abc import Sequence

from domain import ActionType, PlannedAction, Risk
from modules.planner.allowlist import is_test_path

_ORDER = (Risk.LOW, Risk.MEDIUM, Risk.HIGH)


def higher(a: Risk, b: Risk) -> Risk:
    """The riskier of two."""
    return a if _ORDER.index(a) >= _ORDER.index(b) else b


def _touches_domain(path: str) -> bool:
    return path == "domain" or path.startswith("domain/")


def structural(
    actions: Sequence[PlannedAction], allowed: Sequence[str], failed_before: bool
) -> Risk:
    """high: domain/ or a gap that failed before; low: only new files or test files;
    medium: anything else, including actions whose files the agent chooses."""
    targets = [f for a in actions for f in a.target_files]
    if failed_before or any(_touches_domain(p) for p in (*targets, *allowed)):
        return Risk.HIGH
    if not actions or any(not a.target_files for a in actions):
        return Risk.MEDIUM
    for action in actions:
        if action.action_type == ActionType.CREATE:
            continue
        if all(is_test_path(f) and not f.endswith("/") for f in action.target_files):
            continue
        return Risk.MEDIUM
    return Risk.LOW


def assess(
    actions: Sequence[PlannedAction],
    allowed: Sequence[str],
    failed_before: bool,
    memory_floor: Risk,
) -> Risk:
    """The plan's risk: the structural one, raised (never lowered) by memory."""
    return higher(structural(actions, allowed, failed_before), memory_floor)
