"""What no test vouches for: the changed lines no passing test ran, and the public names a
change removes.

Lines are judged on the candidate's own tree (its source read from git objects, never from
an export where tests ran), with the lines each test ran from a traced run of the kernel's
(facts down its pipe). A line in a function counts as run when a test that passed ran it (a
`def` line or decorator: when a passing test ran any line of that function); a line the module
or a class body runs on import counts when a passing test ran code of its file. A deletion is
judged by its enclosing block: the function around the place the lines were removed from, else
the file.

A public name is a module-level function or class, not underscored or listed in `__all__`; it
is removed when no module-level function or class of that name is left anywhere in the tree
(a move or a duplicate removed is not a removal; an assignment of the name is no definition).
"""

from __future__ import annotations

import ast
import inspect
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import CodeType

from kernel.isolation import gitops, trees

_HUNK = re.compile(rb"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@", re.M)
MAX_SHOWN = 10
"""Places named in a reason (the record's list holds them all, capped by the recorder)."""


@dataclass(frozen=True)
class Changed:
    """One Python file's change, in the candidate's line numbers."""

    path: str
    lines: frozenset[int]
    """Lines added or rewritten."""
    cuts: frozenset[int]
    """Lines were removed right after each of these (0: at the top)."""


def changed_lines(
    repo: Path, base: str, tree: str, store: trees.ObjectStore, paths: Sequence[str]
) -> list[Changed]:
    """The lines the candidate tree adds or rewrites, and where it removes lines, per file."""
    found: list[Changed] = []
    for path in paths:
        diff = gitops.git(
            repo,
            "diff",
            "-U0",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            "--no-renames",
            base,
            tree,
            "--",
            f":(literal){path}",
            check=False,
            env=store.env(),
        )
        if not diff.ok:
            continue
        lines: set[int] = set()
        cuts: set[int] = set()
        for hunk in _HUNK.finditer(diff.stdout):
            start, count = int(hunk.group(1)), int(hunk.group(2) or b"1")
            if count:
                lines.update(range(start, start + count))
            else:
                cuts.add(start)
        found.append(Changed(path, frozenset(lines), frozenset(cuts)))
    return found


@dataclass(frozen=True)
class _Block:
    """One code object of a file: its lines, and whether it runs on import."""

    name: str
    first: int
    lines: frozenset[int]
    on_import: bool
    depth: int


def _walk(code: CodeType, depth: int = 0) -> Iterator[_Block]:
    lines = frozenset(n for _, _, n in code.co_lines() if n is not None)
    on_import = not code.co_flags & inspect.CO_OPTIMIZED  # the module, or a class body
    yield _Block(code.co_name, code.co_firstlineno, lines, on_import, depth)
    for const in code.co_consts:
        if isinstance(const, CodeType):
            yield from _walk(const, depth + 1)


def _blocks(source: bytes, path: str) -> list[_Block] | None:
    try:
        return list(_walk(compile(source, path, "exec", dont_inherit=True)))
    except (SyntaxError, ValueError):
        return None


def _functions(blocks: Sequence[_Block]) -> list[_Block]:
    """Named functions, innermost first (a comprehension or lambda is judged with its home)."""
    named = [b for b in blocks if not b.on_import and not b.name.startswith("<") and b.lines]
    return sorted(named, key=lambda b: -b.depth)


def _header(block: _Block, line: int) -> bool:
    """Whether a line that runs is the block's decorator or `def` line(s), before its body."""
    body = min((n for n in block.lines if n > block.first), default=block.first + 1)
    return block.first <= line < body


def not_run(
    changed: Sequence[Changed],
    sources: Mapping[str, bytes],
    ran: Mapping[str, frozenset[int]],
    imported: Mapping[str, frozenset[int]] | None = None,
) -> list[str]:
    """The changed places no passing test ran (`ran`: per file, the lines passing tests ran;
    `imported`: the lines that ran on import while they were collected), as `path:line`,
    `path:first-last` or `path: lines removed after line N`."""
    imported = imported or {}
    found: list[str] = []
    for change in changed:
        source = sources.get(change.path)
        blocks = _blocks(source, change.path) if source is not None else None
        if blocks is None:
            continue  # it does not compile: verification has said so already
        run = ran.get(change.path, frozenset())
        loaded = imported.get(change.path, frozenset())
        functions = _functions(blocks)
        runs = frozenset(n for b in blocks for n in b.lines)
        missed: list[int] = []
        for line in sorted(change.lines & runs):  # a blank line, a comment: nothing runs there
            home = next((f for f in functions if line in f.lines or _header(f, line)), None)
            if home is None:
                # the module or a class body runs it on import: while tests were collected, or
                # a passing test ran code of the file (it was imported by then)
                seen = line in loaded or bool(run)
            elif _header(home, line):
                seen = bool(run & home.lines)
            else:
                seen = line in run
            if not seen:
                missed.append(line)
        found += [f"{change.path}:{span}" for span in _spans(missed)]
        for cut in sorted(change.cuts):
            home = next((f for f in functions if f.first <= cut <= max(f.lines)), None)
            seen = bool(run & home.lines) if home is not None else bool(run or loaded)
            if not seen:
                found.append(f"{change.path}: lines removed after line {cut}")
    return found


def _spans(lines: Sequence[int]) -> list[str]:
    spans: list[list[int]] = []
    for line in lines:
        if spans and line == spans[-1][1] + 1:
            spans[-1][1] = line
        else:
            spans.append([line, line])
    return [str(a) if a == b else f"{a}-{b}" for a, b in spans]


def said(places: Sequence[str]) -> str:
    """The places in one line, for a reason (a branch's side is `path:line (where: ...)`)."""
    sides = [p for p in places if p.endswith(")")]
    lines = [p for p in places if not p.endswith(")")]
    told = [("no test ran these lines", lines), ("no test took these branches", sides)]
    return "; ".join(f"{what}: {_listed(found)}" for what, found in told if found)


def _listed(places: Sequence[str]) -> str:
    more = f" and {len(places) - MAX_SHOWN} more" if len(places) > MAX_SHOWN else ""
    return ", ".join(places[:MAX_SHOWN]) + more


def _all(tree: ast.Module) -> set[str]:
    """The names a literal `__all__` lists."""
    names: set[str] = set()
    for node in tree.body:
        value = node.value if isinstance(node, ast.Assign | ast.AugAssign) else None
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AugAssign):
            targets = [node.target]
        if not any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            continue
        if isinstance(value, ast.List | ast.Tuple):
            names |= {
                e.value
                for e in value.elts
                if isinstance(e, ast.Constant) and isinstance(e.value, str)
            }
    return names


def _top(body: Sequence[ast.stmt]) -> Iterator[ast.stmt]:
    """Module-level statements, into `if`, `try` and `with` blocks (a guarded definition is one)."""
    for node in body:
        yield node
        if isinstance(node, ast.If | ast.While | ast.For):
            yield from _top(node.body)
            yield from _top(node.orelse)
        elif isinstance(node, ast.Try):
            yield from _top(node.body)
            for handler in node.handlers:
                yield from _top(handler.body)
            yield from _top(node.orelse)
            yield from _top(node.finalbody)
        elif isinstance(node, ast.With):
            yield from _top(node.body)


def _parse(source: bytes) -> ast.Module | None:
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError):
        return None


def public_definitions(source: bytes) -> set[str]:
    """The module-level functions and classes a module defines that are public."""
    tree = _parse(source)
    if tree is None:
        return set()
    listed = _all(tree)
    return {n for n in defined(source) if not n.startswith("_") or n in listed}


def defined(source: bytes) -> set[str]:
    """Every module-level function and class a module defines (an assignment is no
    definition: `add = None` in any file must not stand for a removed `add`)."""
    tree = _parse(source)
    if tree is None:
        return set()
    return {
        node.name
        for node in _top(tree.body)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    }


def removed_names(
    before: Mapping[str, bytes], tree_files: Iterator[tuple[str, bytes]], named: str
) -> list[str]:
    """`path: name` for each public name the base's `before` files defined that no Python
    file of the candidate tree (`tree_files`) defines any more and that `named` (the gap's own
    words) does not name."""
    gone: dict[str, str] = {}
    for path, source in sorted(before.items()):
        for name in sorted(public_definitions(source)):
            if not re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", named):
                gone.setdefault(name, path)
    if not gone:
        return []
    for _, source in tree_files:
        if any(name.encode() in source for name in gone):
            for name in defined(source) & set(gone):
                del gone[name]
            if not gone:
                return []
    return [f"{path}: {name}" for name, path in sorted(gone.items(), key=lambda p: (p[1], p[0]))]
