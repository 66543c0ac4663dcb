"""Doctests: tests that live in the docstrings of source modules.

pytest's `--doctest-modules` collects `src/pkg/mod.py::pkg.mod.func`: the module is code,
not a test file, so a change to its behaviour and to its examples comes in one file. The
judge keeps the candidate's bytes of such a module and reads, per doctest, whether the
change edited its docstring (a changed test expectation) or left it alone.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import PurePosixPath


def is_doctest(node_id: str) -> bool:
    """A node id of a doctest: `file.py::dotted.name` (a test function's name has no dot;
    a module's own docstring is named after the module)."""
    path, sep, name = node_id.partition("::")
    if not sep or not path.endswith(".py") or "::" in name or "[" in name:
        return False
    return "." in name or name == PurePosixPath(path).stem


def docstrings(text: str | None) -> dict[str, str] | None:
    """Every docstring of a module by qualified name ("" for the module's own; None when
    the text does not parse)."""
    try:
        tree = ast.parse(text or "")
    except (SyntaxError, ValueError):
        return None
    found = {"": ast.get_docstring(tree, clean=False) or ""}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                found[prefix + child.name] = ast.get_docstring(child, clean=False) or ""
                visit(child, f"{prefix}{child.name}.")

    visit(tree, "")
    return found


def _owner(name: str, known: Iterable[str]) -> str:
    """The qualified name a doctest's dotted name ends with (the longest), "" for the module."""
    ends = [k for k in known if k and (name == k or name.endswith("." + k))]
    return max(ends, key=len, default="")


def edited(node_ids: Iterable[str], before: str | None, after: str | None) -> set[str]:
    """The doctests (node ids of one module) whose docstring differs between two texts."""
    old, new = docstrings(before), docstrings(after)
    if old is None or new is None:
        return set(node_ids)  # a module that does not parse: every example is in question
    return {
        n for n in node_ids if old.get(key := _owner(n.partition("::")[2], old)) != new.get(key)
    }
