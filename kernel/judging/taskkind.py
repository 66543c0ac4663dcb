"""A plan's task kind as the kernel fixes it before the agent runs, and the documentation
check: a docs task leaves every Python syntax tree equal once docstrings and comments go.

The kind comes from the task itself (its front matter, the paths it allows, its title), never
from the planner's answer or the agent's output: the planner may propose a kind, but only the
kernel's reading makes a task a documentation task, the one kind that needs no new test.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import cast

from domain import CheckName, Gap, GapCategory, IterationPlan, TaskKind
from kernel.isolation import gitops

DOC_SUFFIXES = (".md", ".rst", ".txt")
"""Files that are documentation by their name (requirements and constraints lists are not)."""
_NOT_DOCS = re.compile(r"^(requirements|constraints)", re.IGNORECASE)
_DOC_WORDS = re.compile(
    r"\b(docstrings?|documentation|docs|comments|readme|typos?)\b", re.IGNORECASE
)
_GLOB_CHARS = frozenset("*?[")
_UNTESTED = re.compile(
    r"^\W*(refactor|rename|move|extract|split|simplify|clean\s*up|reorgani[sz]e|restructure|tidy"
    r"|all code (passes|is))\b",
    re.IGNORECASE,
)
"""A person's task that may land without a new test: a refactor (the tests that pass must
still pass) or a roadmap line asking that all code passes a tool (the tool judges it)."""
DOCS_CLOSED = (
    "the gap is closed: a documentation change (docstrings, comments, doc files) "
    "that changes no code; no new test is needed"
)
"""The gap-closed criterion's text for a docs task (the planner's text assumes its own kind)."""


def is_doc_file(path: str) -> bool:
    """Whether a file is documentation by its name alone (*.md, *.rst, *.txt)."""
    name = PurePosixPath(path).name
    return name.lower().endswith(DOC_SUFFIXES) and not _NOT_DOCS.match(name)


def _doc_glob(pattern: str) -> bool:
    """An allowed glob that can only match documentation: docs files, or a literal .py file
    (whose docstrings and comments a docs task may edit)."""
    name = PurePosixPath(pattern.rstrip("/")).name
    if is_doc_file(name):
        return True
    return name.endswith(".py") and not _GLOB_CHARS & set(pattern)


def docs_reason(gap: Gap) -> str:
    """Why a person's task is documentation only ('' when it is not): front matter `kind`
    decides when present, else every allowed path being documentation, else its title."""
    if gap.category == GapCategory.QUALITY:
        return ""
    item = gap.inbox
    if item is not None and item.kind:
        return 'its front matter says kind = "docs"' if item.kind == "docs" else ""
    allowed = item.allowed if item is not None else ()
    if allowed and all(is_doc_file(p) for p in allowed):
        return f"every path it allows is documentation ({', '.join(allowed)})"
    found = _DOC_WORDS.search(_words(gap))
    if found and (not allowed or all(_doc_glob(p) for p in allowed)):
        return f"its title asks for {found.group(0).lower()}"
    return ""


def _words(gap: Gap) -> str:
    return gap.roadmap.text if gap.roadmap is not None else gap.title


def fix_kind(plan: IterationPlan) -> IterationPlan:
    """The plan with the kernel's kind: docs when the task says so, and never docs otherwise;
    a person's task is a feature (which needs a test) unless its words ask for a refactor or
    that all code passes a tool, whatever kind the planner proposed."""
    reason = docs_reason(plan.gap)
    proposed = plan.task_kind
    if reason:
        kind = TaskKind.DOCS
    elif proposed == TaskKind.DOCS or (
        plan.gap.category != GapCategory.QUALITY
        and proposed != TaskKind.FEATURE
        and not _UNTESTED.match(_words(plan.gap))
    ):
        kind = TaskKind.FEATURE
    else:
        return plan
    note = (
        f"kind docs (fixed by the kernel: {reason}): no new test is needed, and every Python "
        "syntax tree must stay the same once docstrings and comments are stripped"
        if kind == TaskKind.DOCS
        else f"kind feature (fixed by the kernel: the planner said {proposed.value}, "
        "which the task's words do not ask for; a feature needs a new or changed test)"
    )
    criteria = tuple(
        c.model_copy(update={"text": DOCS_CLOSED})
        if c.check == CheckName.GAP_CLOSED and kind == TaskKind.DOCS
        else c
        for c in plan.criteria
    )
    return plan.model_copy(
        update={"task_kind": kind, "criteria": criteria, "notes": (note, *plan.notes)}
    )


class _Strip(ast.NodeTransformer):
    """Drops bare string statements (docstrings, attribute docs): they run no code."""

    def generic_visit(self, node: ast.AST) -> ast.AST:
        super().generic_visit(node)
        for field in ("body", "orelse", "finalbody"):
            body: object = getattr(node, field, None)
            if isinstance(body, list):
                statements = cast(list[ast.stmt], body)
                kept = [s for s in statements if not _is_doc(s)]
                setattr(node, field, kept or [ast.Pass()])
        return node


def _is_doc(node: object) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def code_shape(source: bytes | None) -> str | None:
    """The file's syntax tree without docstrings (comments never reach it), as text; "" for
    no file, None when it does not parse."""
    if source is None:
        return ""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return None
    try:
        return ast.dump(_Strip().visit(tree), include_attributes=False)
    except RecursionError:
        return None


def _blob(repo: Path, base: str, path: str) -> bytes | None:
    result = gitops.git(repo, "show", f"{base}:{path}", check=False)
    return result.stdout if result.ok else None


def _now(worktree: Path, change: gitops.Change) -> bytes | None:
    path = worktree / change.path
    if change.status == "D" or path.is_symlink() or not path.is_file():
        return None
    return path.read_bytes()


def code_changes(
    repo: Path, base: str, worktree: Path, changes: Sequence[gitops.Change]
) -> list[tuple[str, str]]:
    """(path, why) for each change a documentation task may not make: a file that is neither
    a doc file nor Python, or Python whose syntax tree changed beyond docstrings and comments."""
    found: list[tuple[str, str]] = []
    for change in changes:
        names = [n for n in (change.old_path, change.path) if n]
        if all(is_doc_file(n) for n in names):
            continue
        if not all(n.endswith(".py") for n in names):
            found.append((change.path, "not a documentation file (*.md, *.rst, *.txt) or Python"))
            continue
        before = _blob(repo, base, change.old_path or change.path)
        after = _now(worktree, change)
        shape = code_shape(after)
        if shape is None:
            found.append((change.path, "it does not parse"))
        elif shape != code_shape(before):
            found.append((change.path, "its code changed, not only docstrings and comments"))
    return found
