"""Actions by gap category, and the task kind of a gap.

Free text (inbox bodies, roadmap lines) never supplies a path: it can only pick among
module folders that exist in the worktree, and domain/.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from domain import ActionType, Gap, GapCategory, GapReport, PlannedAction, TaskKind
from modules.planner.allowlist import clean_path, is_protected, unique
from modules.planner.fsport import FileSystemPort

_REFACTOR = re.compile(
    r"^\W*(refactor|rename|move|extract|split|simplify|clean\s*up|reorgani[sz]e|restructure|tidy)\b",
    re.IGNORECASE,
)
_MODULE_NAMES = (
    re.compile(r"\bmodules/([A-Za-z_][A-Za-z0-9_]*)"),
    re.compile(r"\bmodule\s+[`'\"]?([A-Za-z_][A-Za-z0-9_]*)", re.IGNORECASE),
    re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\s+module\b", re.IGNORECASE),
)
_DOMAIN = re.compile(r"\bdomain\b", re.IGNORECASE)
_TOOLS: dict[str, tuple[str, ...]] = {
    "pyright": ("pyright",),
    "mypy": ("mypy",),
    "ruff format": ("ruff-format",),
    "format": ("ruff-format",),
    "ruff": ("ruff", "ruff-format"),
    "lint": ("ruff", "ruff-format"),
    "pytest": ("pytest",),
    "test": ("pytest",),
}
_QUALITY_KIND = {
    "pytest": TaskKind.FIX_TEST,
    "pyright": TaskKind.FIX_TYPES,
    "mypy": TaskKind.FIX_TYPES,
    "ruff": TaskKind.FIX_LINT,
    "ruff-format": TaskKind.FIX_LINT,
}


def _verb(gap: Gap) -> str:
    text = gap.roadmap.text if gap.roadmap is not None else gap.title
    lowered = text.strip().lower()
    if lowered.startswith("all code passes") or lowered.startswith("all code is"):
        return "passes"
    for verb in ("create", "add", "implement", "tests for", "test "):
        if lowered.startswith(verb):
            return verb.strip()
    return ""


def _named_sources(gap: Gap) -> tuple[str, ...]:
    text = (gap.roadmap.text if gap.roadmap is not None else gap.title).lower()
    for word, sources in _TOOLS.items():
        if word in text:
            return sources
    return ("pytest", "pyright", "ruff", "ruff-format")


def task_kind(gap: Gap) -> TaskKind:
    """fix_test, fix_types, fix_lint for quality gaps; refactor or feature for people's tasks."""
    if gap.category == GapCategory.QUALITY:
        return _QUALITY_KIND.get(gap.source, TaskKind.REFACTOR)
    if _verb(gap) == "passes":
        sources = _named_sources(gap)
        first = next(iter(sources), "") if len(sources) <= 2 else ""
        return _QUALITY_KIND.get(first, TaskKind.REFACTOR)
    text = gap.roadmap.text if gap.roadmap is not None else gap.title
    return TaskKind.REFACTOR if _REFACTOR.match(text) else TaskKind.FEATURE


def inferred_folders(gap: Gap, fs: FileSystemPort, protected: Sequence[str]) -> tuple[str, ...]:
    """Folders the text of a person's task points at, chosen among folders that exist."""
    text = f"{gap.title}\n{gap.description}"
    found: list[str] = []
    for pattern in _MODULE_NAMES:
        for match in pattern.finditer(text):
            folder = f"modules/{match.group(1)}"
            if fs.is_dir(folder):
                found.append(folder + "/")
    if _DOMAIN.search(text) and fs.is_dir("domain"):
        found.append("domain/")
    return unique(f for f in found if not is_protected(f, protected))


@dataclass(frozen=True)
class Drafted:
    """Actions for a gap, and whether the gap named files that were all protected."""

    actions: tuple[PlannedAction, ...]
    all_protected: bool = False


def _kind_of(path: str, fs: FileSystemPort) -> ActionType:
    exists = fs.is_dir(path.rstrip("/")) if path.endswith("/") else fs.is_file(path)
    return ActionType.MODIFY if exists else ActionType.CREATE


def _by_existence(files: Sequence[str], fs: FileSystemPort, what: str) -> tuple[PlannedAction, ...]:
    modify = tuple(f for f in files if _kind_of(f, fs) == ActionType.MODIFY)
    create = tuple(f for f in files if _kind_of(f, fs) == ActionType.CREATE)
    actions: list[PlannedAction] = []
    if modify:
        actions.append(
            PlannedAction(action_type=ActionType.MODIFY, target_files=modify, description=what)
        )
    if create:
        actions.append(
            PlannedAction(action_type=ActionType.CREATE, target_files=create, description=what)
        )
    return tuple(actions)


def _filter(files: Sequence[str], protected: Sequence[str]) -> tuple[tuple[str, ...], bool]:
    cleaned = unique(c for f in files if (c := clean_path(f)) is not None)
    kept = tuple(f for f in cleaned if not is_protected(f, protected))
    return kept, bool(cleaned) and not kept


def _quality(gap: Gap, suspects: Sequence[str], protected: Sequence[str]) -> Drafted:
    files = suspects if gap.source == "pytest" and suspects else gap.files
    kept, all_protected = _filter(files, protected)
    if all_protected:
        return Drafted((), all_protected=True)
    if gap.key == "pytest:run":
        what = "Make the test suite run again (see the gap quoted below)"
    else:
        what = f"Fix the {gap.source} failures quoted below"
    return Drafted(
        (PlannedAction(action_type=ActionType.MODIFY, target_files=kept, description=what),)
    )


def _people(gap: Gap, report: GapReport, fs: FileSystemPort, protected: Sequence[str]) -> Drafted:
    what = f"Carry out the {gap.category.value} item quoted below"
    if gap.inbox is not None and gap.inbox.allowed:
        concrete = [p for p in gap.inbox.allowed if not set("*?[") & set(p) and not p.endswith("/")]
        kept, all_protected = _filter(concrete, protected)
        if all_protected:
            return Drafted((), all_protected=True)
        if kept:
            return Drafted(_by_existence(kept, fs, what))
    verb = _verb(gap)
    if verb == "passes":
        sources = _named_sources(gap)
        failing = [f for g in report.gaps if g.source in sources for f in g.files]
        kept, _ = _filter(failing, protected)
        return Drafted(
            (PlannedAction(action_type=ActionType.MODIFY, target_files=kept, description=what),)
        )
    folders = inferred_folders(gap, fs, protected)
    if verb in ("tests for", "test"):
        modules = [f for f in folders if f.startswith("modules/")]
        folders = tuple(f"{m}tests/" for m in modules) or folders
        return Drafted(
            (PlannedAction(action_type=ActionType.CREATE, target_files=folders, description=what),)
        )
    if verb in ("create", "add"):
        return Drafted(
            (PlannedAction(action_type=ActionType.CREATE, target_files=folders, description=what),)
        )
    if folders:
        return Drafted(_by_existence(folders, fs, what))
    return Drafted(
        (PlannedAction(action_type=ActionType.CREATE, target_files=(), description=what),)
    )


def draft_actions(
    gap: Gap,
    report: GapReport,
    suspects: Sequence[str],
    fs: FileSystemPort,
    protected: Sequence[str],
) -> Drafted:
    """The actions for a gap; protected targets are removed, and so are actions left empty."""
    if gap.category == GapCategory.QUALITY:
        return _quality(gap, suspects, protected)
    return _people(gap, report, fs, protected)


def targets(actions: Sequence[PlannedAction]) -> tuple[str, ...]:
    """Every target of the actions, in order."""
    return unique(f for a in actions for f in a.target_files)
