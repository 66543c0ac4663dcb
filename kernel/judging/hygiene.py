"""Test weakening, read from syntax trees: what a change did to a test file's tests.

A test may be fixed, moved or extended; it may not be deleted, skipped, or made to prove
less. Each test function is reduced to facts (its asserts and how strong they are, the
skips around it) and the facts before and after a change are compared.
"""

from __future__ import annotations

import ast
import tomllib
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import cast

_MARKS = {"skip", "skipif", "xfail"}
_SKIP_ATTRS = {
    "skip",
    "xfail",
    "importorskip",
    "skipIf",
    "skipUnless",
    "expectedFailure",
    "skipTest",
}
_SKIP_NAMES = {"skip", "skipif", "xfail", "importorskip", "skipIf", "skipUnless", "expectedFailure"}
_SKIP_OWNERS = {"pytest", "unittest", "self", "cls"}
_EXACT_OPS = (ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.In, ast.NotIn)
_SWALLOWING = {"Exception", "BaseException", "AssertionError"}

PYTEST_FILES = {"pytest.ini", ".pytest.ini", "pytest.toml", ".pytest.toml", "conftest.py"}
"""Files that are pytest configuration whatever they hold (pytest.toml wins even when empty)."""
_SECTIONED = {"pyproject.toml", "tox.ini", "setup.cfg"}


def is_skip(node: ast.expr) -> bool:
    """A skip, skipif, xfail or importorskip marker, decorator or call."""
    target = node.func if isinstance(node, ast.Call) else node
    if isinstance(target, ast.Attribute):
        if (
            target.attr in _MARKS
            and isinstance(target.value, ast.Attribute)
            and target.value.attr == "mark"
        ):
            return True
        if target.attr in _SKIP_ATTRS:
            base = target.value
            return isinstance(base, ast.Name) and base.id in _SKIP_OWNERS
    return isinstance(target, ast.Name) and target.id in _SKIP_NAMES


def skip_mentions(node: ast.AST) -> int:
    """How many skip, skipif, xfail or importorskip references a piece of code holds."""
    return sum(
        1
        for n in ast.walk(node)
        if (
            isinstance(n, ast.Attribute)
            or (isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load))
        )
        and is_skip(n)
    )


def _truthy_constant(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and bool(node.value)


def assert_strength(test: ast.expr) -> int:
    """0: proves nothing (a truthy constant, `x or True`, `x == x`); 1: a check; 2: an exact one."""
    if _truthy_constant(test):
        return 0
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
        if any(_truthy_constant(v) for v in test.values):
            return 0
        return 1  # an `or` accepts more than either side alone
    if isinstance(test, ast.BoolOp):
        return max(assert_strength(v) for v in test.values)  # `and`: its strongest part holds
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        if isinstance(test.operand, ast.Constant) and not test.operand.value:
            return 0
        return 2 if assert_strength(test.operand) == 2 else 1
    if isinstance(test, ast.Compare):
        sides = [test.left, *test.comparators]
        if all(ast.dump(s) == ast.dump(sides[0]) for s in sides) and all(
            isinstance(op, ast.Eq | ast.Is | ast.LtE | ast.GtE) for op in test.ops
        ):
            return 0
        if any(isinstance(op, _EXACT_OPS) for op in test.ops):
            return 2
        if any(
            isinstance(c, ast.Constant) and c.value is not None for c in test.comparators
        ) and any(isinstance(op, ast.Is | ast.IsNot) for op in test.ops):
            return 2  # `is True`, `is False`
        return 1
    return 1


@dataclass
class TestFacts:
    """What one test function proves."""

    asserts: int = 0
    exact: int = 0
    trivial: int = 0
    skips: int = 0
    body: str = field(default="", compare=False)
    """Its body's syntax tree, without its name, arguments and decorators (ast.dump)."""


@dataclass
class FileFacts:
    """The tests of one file and the file-wide skips."""

    tests: dict[str, TestFacts] = field(default_factory=dict[str, TestFacts])
    module_skips: int = 0


def _swallows(handler: ast.ExceptHandler) -> bool:
    kinds = handler.type
    if kinds is None:
        return True
    names = kinds.elts if isinstance(kinds, ast.Tuple) else [kinds]
    return any(isinstance(n, ast.Name) and n.id in _SWALLOWING for n in names)


def _test_body(facts: TestFacts, body: list[ast.stmt]) -> None:
    """Count what a test body proves; asserts after an early return or inside a try that
    swallows AssertionError prove nothing."""

    def visit(nodes: list[ast.stmt], counted: bool) -> None:
        for stmt in nodes:
            if isinstance(stmt, ast.Return) and counted:
                counted = False  # what follows never runs
                continue
            if isinstance(stmt, ast.Assert):
                strength = assert_strength(stmt.test)
                if strength == 0:
                    facts.trivial += 1
                elif counted:
                    facts.asserts += 1
                    facts.exact += strength == 2
                continue
            if isinstance(stmt, ast.Try):
                swallowed = any(_swallows(h) for h in stmt.handlers)
                visit(stmt.body, counted and not swallowed)
                for handler in stmt.handlers:
                    visit(handler.body, counted)
                visit(stmt.orelse, counted)
                visit(stmt.finalbody, counted)
                continue
            if isinstance(stmt, ast.With | ast.AsyncWith):
                for item in stmt.items:
                    func = (
                        item.context_expr.func if isinstance(item.context_expr, ast.Call) else None
                    )
                    if isinstance(func, ast.Attribute) and func.attr in ("raises", "warns"):
                        facts.asserts += counted
                        facts.exact += counted
                visit(stmt.body, counted)
                continue
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                facts.skips += skip_mentions(stmt)  # a helper defined inside the test
                continue
            bodies: list[list[ast.stmt]] = []
            for name, value in ast.iter_fields(stmt):
                if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                    bodies.append(cast(list[ast.stmt], value))
                elif isinstance(value, list) and value and isinstance(value[0], ast.match_case):
                    for case in cast(list[ast.match_case], value):
                        facts.skips += skip_mentions(case.pattern)
                        bodies.append(case.body)
                elif isinstance(value, ast.AST) and name != "body":
                    facts.skips += skip_mentions(value)
                elif isinstance(value, list):
                    for item in cast(list[object], value):
                        if isinstance(item, ast.AST):
                            facts.skips += skip_mentions(item)
            for inner in bodies:
                visit(inner, counted)

    visit(body, True)


def file_facts(source: str) -> FileFacts | None:
    """The facts of a test module (None when it does not parse: the verifier reports that)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    facts = FileFacts()

    def visit(node: ast.AST, prefix: str, inherited: int) -> None:
        children = list(ast.iter_child_nodes(node))
        if isinstance(node, ast.ClassDef):
            # pytestmark inside a class skips all its tests
            inherited += sum(
                skip_mentions(c) for c in children if isinstance(c, ast.Assign | ast.AnnAssign)
            )
        for child in children:
            if isinstance(child, ast.ClassDef):
                own = sum(skip_mentions(d) for d in child.decorator_list)
                visit(child, f"{prefix}{child.name}.", inherited + own)
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                if not child.name.startswith("test"):
                    continue
                test = TestFacts(skips=inherited)
                test.skips += sum(skip_mentions(d) for d in child.decorator_list)
                _test_body(test, child.body)
                test.body = ast.dump(ast.Module(body=child.body, type_ignores=[]))
                facts.tests[f"{prefix}{child.name}"] = test
            elif not prefix and isinstance(child, ast.Assign | ast.AnnAssign | ast.Expr):
                facts.module_skips += skip_mentions(child)  # pytestmark, importorskip
            elif not prefix and isinstance(child, ast.If | ast.Try):
                visit(child, prefix, inherited)

    visit(tree, "", 0)
    return facts


def _moved(old: FileFacts, new: FileFacts) -> dict[str, str]:
    """Tests gone under their name whose very body a new test of the file holds: renamed or
    moved into a class, not lost (old name: new name, one to one)."""
    fresh: dict[str, list[str]] = {}
    for name in sorted(set(new.tests) - set(old.tests)):
        fresh.setdefault(new.tests[name].body, []).append(name)
    found: dict[str, str] = {}
    for name in sorted(set(old.tests) - set(new.tests)):
        same = fresh.get(old.tests[name].body)
        if same:
            found[name] = same.pop(0)
    return found


def renamed(before: str | None, after: str | None) -> dict[str, str]:
    """The tests of one file the change renamed with their bodies unchanged (old: new)."""
    old, new = file_facts(before or ""), file_facts(after or "")
    return _moved(old, new) if old is not None and new is not None and after else {}


def weakening(before: str | None, after: str | None) -> list[str]:
    """How a change weakened the tests of one file (empty when it did not)."""
    if before is None:
        return []
    if after is None:
        return ["a test file was deleted"] if file_facts(before) != FileFacts() else []
    old, new = file_facts(before), file_facts(after)
    if old is None or new is None:
        return []
    moved = _moved(old, new)
    found: list[str] = []
    for name in sorted(set(old.tests) - set(new.tests) - set(moved)):
        found.append(f"test {name} was deleted or renamed away")
    if new.module_skips > old.module_skips:
        found.append(
            f"module-level skips went from {old.module_skips} to {new.module_skips} (pytestmark or importorskip)"
        )
    pairs = [(n, n) for n in sorted(set(old.tests) & set(new.tests))] + sorted(moved.items())
    for was_name, name in pairs:
        was, now = old.tests[was_name], new.tests[name]
        if now.skips > was.skips:
            found.append(f"{name}: a skip, skipif or xfail was added")
        if now.asserts < was.asserts:
            found.append(f"{name} lost assertions ({was.asserts} -> {now.asserts})")
        elif now.exact < was.exact:
            found.append(f"{name}: an exact assertion was loosened ({was.exact} -> {now.exact})")
        if now.trivial > was.trivial:
            found.append(
                f"{name}: an assertion that proves nothing was added (assert True, x or True)"
            )
    kept = set(old.tests) | set(moved.values())
    added_trivial = sum(t.trivial for n, t in new.tests.items() if n not in kept and t.trivial)
    if added_trivial:
        found.append("a new test asserts nothing real (assert True, x or True)")
    return found


def pytest_config_changed(path: str, before: str | None, after: str | None) -> bool:
    """Whether a change to this file changes pytest's configuration."""
    name = PurePosixPath(path).name
    if name in PYTEST_FILES:
        return before != after
    if name not in _SECTIONED:
        return False
    if name == "pyproject.toml":
        return _pytest_tables(before) != _pytest_tables(after)
    marker = "[pytest]" if name == "tox.ini" else "[tool:pytest]"
    return _section(before, marker) != _section(after, marker)


def _pytest_tables(text: str | None) -> str:
    if text is None:
        return ""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return text
    tool = doc.get("tool", {})
    if not isinstance(tool, dict):
        return ""
    tables = cast(dict[str, object], tool)
    return repr({k: v for k, v in tables.items() if k.startswith("pytest")})


def _section(text: str | None, marker: str) -> str:
    if text is None or marker not in text:
        return ""
    return text.split(marker, 1)[1].split("\n[", 1)[0]
