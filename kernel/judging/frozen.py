"""Tests are the specification: the tests a failing-test gap names are frozen, and an
assertion that compares an expression with itself proves nothing.

Both rules read syntax trees, never text: moving or reformatting a frozen test is allowed,
any change to what it does (its body, decorators, parametrize cases, signature, its class's
decorators) is not, and neither is deleting it and writing it again under the same name.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterator, Sequence

_SAME_ARGS = frozenset(
    {
        "assertEqual",
        "assertEquals",
        "assertIs",
        "assertCountEqual",
        "assertListEqual",
        "assertDictEqual",
        "assertSetEqual",
        "assertTupleEqual",
        "assertSequenceEqual",
        "assertMultiLineEqual",
        "assertAlmostEqual",
        "assertGreaterEqual",
        "assertLessEqual",
    }
)
"""unittest assertions that pass whenever their first two arguments are the same expression."""


def frozen_names(node_ids: Sequence[str]) -> dict[str, set[tuple[str, ...]]]:
    """The test functions named by node ids, by file: `f.py::TestA::test_b[1-2]` gives
    ("TestA", "test_b") in f.py."""
    found: dict[str, set[tuple[str, ...]]] = {}
    for node in node_ids:
        parts = node.split("::")
        if len(parts) < 2 or not parts[0].endswith(".py"):
            continue
        names = tuple(p.split("[", 1)[0] for p in parts[1:])
        found.setdefault(parts[0], set()).add(names)
    return found


def _parse(text: str | None) -> ast.Module | None:
    if text is None:
        return None
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError):
        return None


def _find(tree: ast.Module, names: tuple[str, ...]) -> list[ast.AST] | None:
    """The chain of definitions (classes, then the function) that names point at."""
    scope: list[ast.stmt] = list(tree.body)
    chain: list[ast.AST] = []
    for name in names:
        match = next(
            (
                n
                for n in reversed(scope)
                if isinstance(n, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                and n.name == name
            ),
            None,
        )
        if match is None:
            return None
        chain.append(match)
        scope = list(match.body) if isinstance(match, ast.ClassDef) else []
    return chain


def _meaning(chain: list[ast.AST]) -> str:
    """What a test is, without where it stands: its classes' decorators, its own whole def."""
    parts: list[str] = []
    for node in chain[:-1]:
        if isinstance(node, ast.ClassDef):
            parts += [ast.dump(d) for d in node.decorator_list]
            parts += [ast.dump(b) for b in node.bases]
    parts.append(ast.dump(chain[-1]))
    return "\n".join(parts)


def frozen_changes(
    path: str, before: str | None, after: str | None, tests: set[tuple[str, ...]]
) -> list[str]:
    """What changed in the frozen tests of one file (a message per test)."""
    old, new = _parse(before), _parse(after)
    if old is None:
        return []
    messages: list[str] = []
    for names in sorted(tests):
        was = _find(old, names)
        if was is None:
            continue
        label = "::".join((path, *names))
        now = _find(new, names) if new is not None else None
        if now is None:
            messages.append(f"{label} is a test the gap names (frozen), and it was removed")
        elif _meaning(was) != _meaning(now):
            messages.append(
                f"{label} is a test the gap names (frozen): its body, decorators, cases or "
                "signature changed; fix the code under test, not the test"
            )
    return messages


def _asserts(tree: ast.Module) -> Iterator[ast.AST]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert) or (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _SAME_ARGS
        ):
            yield node


def _proves_nothing(node: ast.AST) -> str:
    """Why an assertion cannot fail ('' when it can)."""
    if isinstance(node, ast.Call):
        if len(node.args) >= 2 and ast.dump(node.args[0]) == ast.dump(node.args[1]):
            return "compares an expression with itself"
        return ""
    assert isinstance(node, ast.Assert)
    test = node.test
    while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test = test.operand
    if isinstance(node.test, ast.Constant) and node.test.value:
        return "asserts a constant"
    if isinstance(test, ast.Compare):
        operands = [test.left, *test.comparators]
        if any(ast.dump(a) == ast.dump(b) for a, b in itertools.pairwise(operands)):
            return "compares an expression with itself"
    return ""


def empty_assertions(path: str, before: str | None, after: str | None) -> list[str]:
    """New or changed assertions of a test file that cannot fail (a message each)."""
    new = _parse(after)
    if new is None:
        return []
    old = _parse(before)
    known = {ast.dump(n) for n in _asserts(old)} if old is not None else set[str]()
    messages: list[str] = []
    for node in _asserts(new):
        why = _proves_nothing(node)
        if why and ast.dump(node) not in known:
            line = getattr(node, "lineno", 0)
            messages.append(f"{path}:{line}: an assertion that {why} proves nothing")
    return messages
