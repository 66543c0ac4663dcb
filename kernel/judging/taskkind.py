"""The documentation check: a docs task leaves every Python syntax tree equal once docstrings
and comments go. The task's kind itself is read below the audit core (kernel/asks.py).
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from pathlib import Path
from typing import cast

from kernel.asks import is_doc_file
from kernel.isolation import gitops


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
        before = gitops.blob_at(repo, base, change.old_path or change.path)
        after = gitops.written(worktree, change)
        shape = code_shape(after)
        if shape is None:
            found.append((change.path, "it does not parse"))
        elif shape != code_shape(before):
            found.append((change.path, "its code changed, not only docstrings and comments"))
    return found
