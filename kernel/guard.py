"""The guard: every diff is inspected before the verifier runs anything on it.

Protected paths and path safety are SANDBOX_VIOLATION, a path outside the plan's allowlist
is ALLOWLIST_VIOLATION, weakened tests are HYGIENE_VIOLATION (read from syntax trees, not
text), and growth over the risk class's limits is GROWTH_LIMIT.
"""

from __future__ import annotations

import ast
import os
import tomllib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import cast

from domain import FailureCategory, IterationPlan, Risk
from kernel import gitops
from kernel.globs import matches_any

GROWTH_LIMITS: dict[Risk, tuple[int, int]] = {
    Risk.LOW: (5, 300),
    Risk.MEDIUM: (10, 800),
    Risk.HIGH: (20, 1500),
}
"""(new files, changed lines) an iteration of each risk class may add."""

_SKIP_MARKS = {"skip", "skipif", "xfail"}
_SKIP_CALLS = {"skip", "xfail", "importorskip"}
_SKIP_NAMES = {"skip", "skipif", "xfail", "importorskip", "skipIf", "skipUnless", "expectedFailure"}
_PYTEST_CONFIG_FILES = {"pytest.ini", "tox.ini", "setup.cfg", "conftest.py"}


@dataclass(frozen=True)
class Finding:
    """One thing the guard refuses."""

    category: FailureCategory
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.category.value}: {self.path}: {self.message}"


def is_test_path(path: str) -> bool:
    """Test modules and their helpers, by the conventions pytest collects."""
    pure = PurePosixPath(path)
    name = pure.name
    if name == "conftest.py":
        return True
    if name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py")):
        return True
    return any(part in ("tests", "test") for part in pure.parts[:-1])


def _read_at(worktree: Path, rev: str, path: str) -> str | None:
    result = gitops.git(worktree, "show", f"{rev}:{path}", check=False)
    return result.stdout.decode("utf-8", errors="replace") if result.ok else None


@dataclass(frozen=True)
class _TestShape:
    tests: frozenset[str]
    skips: int
    asserts: Counter[str]
    trivial_asserts: int


def _is_skip(node: ast.expr) -> bool:
    target = node.func if isinstance(node, ast.Call) else node
    if isinstance(target, ast.Attribute):
        if (
            target.attr in _SKIP_MARKS
            and isinstance(target.value, ast.Attribute)
            and target.value.attr == "mark"
        ):
            return True
        if target.attr in _SKIP_CALLS | {"skipIf", "skipUnless", "expectedFailure"}:
            base = target.value
            return isinstance(base, ast.Name) and base.id in ("pytest", "unittest")
    return isinstance(target, ast.Name) and target.id in _SKIP_NAMES


def _shape(source: str) -> _TestShape | None:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    tests: set[str] = set()
    skips = 0
    asserts: Counter[str] = Counter()
    trivial = 0

    def visit(node: ast.AST, prefix: str) -> None:
        nonlocal skips, trivial
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                name = f"{prefix}{child.name}"
                if child.name.startswith("Test"):
                    tests.add(name)
                skips += sum(1 for d in child.decorator_list if _is_skip(d))
                visit(child, name + ".")
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                if child.name.startswith("test"):
                    tests.add(name)
                skips += sum(1 for d in child.decorator_list if _is_skip(d))
                for sub in ast.walk(child):
                    if isinstance(sub, ast.Assert):
                        asserts[name] += 1
                        if isinstance(sub.test, ast.Constant) and bool(sub.test.value):
                            trivial += 1
                    elif isinstance(sub, ast.Call) and _is_skip(sub):
                        skips += 1
                    elif isinstance(sub, ast.withitem) and isinstance(sub.context_expr, ast.Call):
                        func = sub.context_expr.func
                        if isinstance(func, ast.Attribute) and func.attr in ("raises", "warns"):
                            asserts[name] += 1
            elif isinstance(child, ast.Assign | ast.Expr):
                for sub in ast.walk(child):
                    if isinstance(sub, ast.Call | ast.Attribute) and _is_skip(sub):
                        skips += 1  # module-level pytestmark or pytest.importorskip
                        break

    visit(tree, "")
    return _TestShape(frozenset(tests), skips, asserts, trivial)


def _weakening(path: str, before: str | None, after: str | None) -> list[Finding]:
    findings: list[Finding] = []
    if before is None:
        return findings
    if after is None:
        return [Finding(FailureCategory.HYGIENE_VIOLATION, path, "a test file was deleted")]
    old, new = _shape(before), _shape(after)
    if old is None or new is None:
        return findings  # a syntax error is the verifier's to report
    for name in sorted(old.tests - new.tests):
        findings.append(
            Finding(FailureCategory.HYGIENE_VIOLATION, path, f"test {name} was deleted")
        )
    if new.skips > old.skips:
        findings.append(
            Finding(
                FailureCategory.HYGIENE_VIOLATION,
                path,
                f"skip/xfail markers went from {old.skips} to {new.skips}",
            )
        )
    for name, count in sorted(old.asserts.items()):
        if name in new.tests and new.asserts.get(name, 0) < count:
            findings.append(
                Finding(
                    FailureCategory.HYGIENE_VIOLATION,
                    path,
                    f"{name} lost assertions ({count} -> {new.asserts.get(name, 0)})",
                )
            )
    if new.trivial_asserts > old.trivial_asserts:
        findings.append(
            Finding(
                FailureCategory.HYGIENE_VIOLATION, path, "an assertion was replaced by a constant"
            )
        )
    return findings


def _pytest_config_changed(path: str, before: str | None, after: str | None) -> bool:
    name = PurePosixPath(path).name
    if name == "conftest.py" or (name == "pytest.ini" and before != after):
        return True
    if name not in ("pyproject.toml", "tox.ini", "setup.cfg"):
        return False
    if name == "pyproject.toml":

        def tables(text: str | None) -> str:
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

        return tables(before) != tables(after)
    marker = "[pytest]" if name == "tox.ini" else "[tool:pytest]"

    def section(text: str | None) -> str:
        if text is None or marker not in text:
            return ""
        rest = text.split(marker, 1)[1]
        return rest.split("\n[", 1)[0]

    return section(before) != section(after)


def inspect_changes(
    worktree: Path,
    base: str,
    changes: Sequence[gitops.Change],
    plan: IterationPlan,
    protected: Sequence[str],
    inserted: int,
    deleted: int,
) -> list[Finding]:
    """Everything the guard refuses in a staged diff (empty when the diff may be verified)."""
    findings: list[Finding] = []
    real_root = os.path.realpath(worktree)
    for change in changes:
        for path in filter(None, (change.path, change.old_path)):
            if matches_any(path, protected):
                findings.append(
                    Finding(FailureCategory.SANDBOX_VIOLATION, path, "a protected path was changed")
                )
        if change.status != "D":
            full = worktree / change.path
            if full.is_symlink():
                target = os.path.realpath(full)
                if not (target == real_root or target.startswith(real_root + os.sep)):
                    findings.append(
                        Finding(
                            FailureCategory.SANDBOX_VIOLATION,
                            change.path,
                            f"a symlink points outside the worktree ({os.readlink(full)})",
                        )
                    )
        if plan.allowed_paths and not matches_any(change.path, plan.allowed_paths):
            findings.append(
                Finding(
                    FailureCategory.ALLOWLIST_VIOLATION,
                    change.path,
                    f"outside the plan's allowlist ({', '.join(plan.allowed_paths)})",
                )
            )
        if plan.forbidden_paths and matches_any(change.path, plan.forbidden_paths):
            findings.append(
                Finding(
                    FailureCategory.ALLOWLIST_VIOLATION,
                    change.path,
                    "a path the task forbids was changed",
                )
            )
    raw = gitops.git(
        worktree, "diff", "--cached", "--raw", "-z", "--no-renames", base
    ).stdout.decode("utf-8", errors="replace")
    parts = raw.split("\0")
    for i in range(0, len(parts) - 1, 2):
        meta, path = parts[i].split(), parts[i + 1]
        if (
            len(meta) >= 2
            and meta[1].endswith("755")
            and not meta[0].endswith("755")
            and is_test_path(path)
            and not path.endswith((".py", ".sh"))
        ):
            findings.append(
                Finding(FailureCategory.SANDBOX_VIOLATION, path, "test data was made executable")
            )
    for change in changes:
        names = [change.path] if not change.old_path else [change.old_path, change.path]
        if not any(is_test_path(n) for n in names):
            continue
        before = _read_at(worktree, base, change.old_path or change.path)
        after = (
            None
            if change.status == "D"
            else (worktree / change.path).read_text(encoding="utf-8", errors="replace")
        )
        if _pytest_config_changed(change.path, before, after):
            findings.append(
                Finding(
                    FailureCategory.HYGIENE_VIOLATION,
                    change.path,
                    "test configuration (conftest.py or pytest settings) was changed",
                )
            )
        if change.path.endswith(".py") and PurePosixPath(change.path).name != "conftest.py":
            findings.extend(_weakening(change.path, before, after))
    for change in changes:
        if change.path in (
            "pyproject.toml",
            "pytest.ini",
            "tox.ini",
            "setup.cfg",
        ) and not is_test_path(change.path):
            before = _read_at(worktree, base, change.path)
            after = (
                None
                if change.status == "D"
                else (worktree / change.path).read_text(encoding="utf-8", errors="replace")
            )
            if _pytest_config_changed(change.path, before, after):
                findings.append(
                    Finding(
                        FailureCategory.HYGIENE_VIOLATION,
                        change.path,
                        "pytest configuration was changed",
                    )
                )
    new_files = sum(1 for c in changes if c.status == "A")
    max_files, max_lines = GROWTH_LIMITS[plan.estimated_risk]
    if new_files > max_files:
        findings.append(
            Finding(
                FailureCategory.GROWTH_LIMIT,
                ".",
                f"{new_files} new files; a {plan.estimated_risk.value}-risk plan may add {max_files}",
            )
        )
    if inserted + deleted > max_lines:
        findings.append(
            Finding(
                FailureCategory.GROWTH_LIMIT,
                ".",
                f"{inserted + deleted} changed lines; a {plan.estimated_risk.value}-risk plan may change {max_lines}",
            )
        )
    return findings


_ORDER = (
    FailureCategory.SANDBOX_VIOLATION,
    FailureCategory.HYGIENE_VIOLATION,
    FailureCategory.ALLOWLIST_VIOLATION,
    FailureCategory.GROWTH_LIMIT,
)


def worst(findings: Sequence[Finding]) -> FailureCategory:
    """The category that decides the outcome when the guard finds several things."""
    present = {f.category for f in findings}
    return next(c for c in _ORDER if c in present)
