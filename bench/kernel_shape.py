"""The kernel's shape: lines per room, the audit core, the longest functions, import cycles
and imports that climb.

Run: `.venv/bin/python bench/kernel_shape.py [REPO]` (issues 18 and 26's before and after
figures). The rooms are the numbered list under "Rooms, bottom to top" of kernel/README.md,
the audit core the room marked "(audit core)" there. With `--check` it exits 1 when the
kernel has an import cycle, an import from a room into one above it, a folder that is no
room, or a file the floor plan misses or names wrongly; tests/unit/test_layout.py runs that.
"""

from __future__ import annotations

import ast
import functools
import re
import sys
from pathlib import Path

FUNCTION_MAX = 60
"""Lines a kernel function should stay within."""
_ENTRY = re.compile(r"^- `(?P<file>[\w/.]+\.py)`")
_ROOM = re.compile(r"^\d+\. \*\*`kernel/(?P<room>[\w]*)/?`\*\*(?P<rest>.*)$")


def kernel_files(repo: Path) -> list[Path]:
    """Every Python file of the kernel (its pytest plugin too)."""
    return sorted(p for p in (repo / "kernel").rglob("*.py") if "__pycache__" not in p.parts)


def module_name(repo: Path, path: Path) -> str:
    """kernel/x/y.py -> kernel.x.y (a package's __init__ is the package)."""
    parts = path.relative_to(repo).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(repo: Path, path: Path, known: set[str]) -> set[str]:
    """The kernel modules a file imports, at any depth (function-level imports count)."""
    found: set[str] = set()
    package = module_name(repo, path).rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    [*package.split(".")[: len(package.split(".")) - node.level + 1], base]
                ).strip(".")
            found.add(base)
            found |= {f"{base}.{a.name}" for a in node.names}
    return {m for m in found if m in known}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group: list[str] = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def import_graph(repo: Path) -> dict[str, set[str]]:
    """Kernel module -> the kernel modules it imports (itself left out)."""
    files = kernel_files(repo)
    known = {module_name(repo, p) for p in files}
    return {module_name(repo, p): imports(repo, p, known) - {module_name(repo, p)} for p in files}


def functions(repo: Path) -> list[tuple[int, str]]:
    """(lines, where) of every kernel function, longest first."""
    out: list[tuple[int, str]] = []
    for path in kernel_files(repo):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                assert node.end_lineno is not None
                where = f"{path.relative_to(repo)}:{node.lineno} {node.name}"
                out.append((node.end_lineno - node.lineno + 1, where))
    return sorted(out, reverse=True)


@functools.cache
def floor_plan(repo: Path) -> list[str]:
    """The files kernel/README.md gives a line to (paths relative to kernel/)."""
    readme = repo / "kernel" / "README.md"
    if not readme.exists():
        return []
    found = (_ENTRY.match(line) for line in readme.read_text(encoding="utf-8").splitlines())
    return [m.group("file") for m in found if m]


@functools.cache
def rooms(repo: Path) -> list[tuple[str, bool]]:
    """The floor plan's rooms, bottom to top ("" is the ground floor), and which is the audit core."""
    readme = repo / "kernel" / "README.md"
    if not readme.exists():
        return []
    found = (_ROOM.match(line) for line in readme.read_text(encoding="utf-8").splitlines())
    return [(m.group("room"), "(audit core)" in m.group("rest")) for m in found if m]


def room_of(repo: Path, module: str) -> str:
    """kernel.judging.guard -> judging; kernel.config -> "" (the ground floor)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and (repo / "kernel" / parts[1]).is_dir() else ""


def _folder(repo: Path, path: Path) -> str:
    parts = path.relative_to(repo / "kernel").parts
    return parts[0] if len(parts) > 1 else ""


_HERE = Path(__file__).resolve().parent.parent


def flat(repo: Path) -> bool:
    """A kernel from before its rooms (issue 26): no room in its floor plan."""
    return not rooms(repo)


def _placed(repo: Path, module: str) -> str:
    """The room of a module; a flat kernel's file goes where this checkout's plan puts it."""
    if not flat(repo):
        return room_of(repo, module)
    if module == "kernel":
        return ""
    by_name = {Path(f).name: Path(f).parent.name for f in floor_plan(_HERE)}
    return by_name.get(module.split(".")[-1] + ".py", "?")  # "?": a file that left


def climbs(repo: Path, graph: dict[str, set[str]]) -> list[str]:
    """Imports from a room into a room above it (a flat kernel's files placed by this
    checkout's floor plan)."""
    order = {room: at for at, (room, _) in enumerate(rooms(_HERE if flat(repo) else repo))}
    out: list[str] = []
    for module in sorted(graph):
        here = _placed(repo, module)
        for target in sorted(graph[module]):
            there = _placed(repo, target)
            if here in order and there in order and order[there] > order[here]:
                out.append(
                    f"upward import: {module} -> {target} "
                    f"(kernel/{here or ''} may not import kernel/{there}/)"
                )
    return out


def problems(repo: Path) -> list[str]:
    """Import cycles, imports that climb, folders that are no room, and kernel files the floor
    plan misses or names wrongly."""
    graph = import_graph(repo)
    out = [f"import cycle: {' <-> '.join(c)}" for c in cycles(graph)]
    out += climbs(repo, graph)
    known = {room for room, _ in rooms(repo)}
    folders = {_folder(repo, p) for p in kernel_files(repo)}
    out += [f"kernel/{f}/ is no room of kernel/README.md" for f in sorted(folders - known)]
    listed = set(floor_plan(repo)) | {f"{room}/__init__.py" for room in known if room}
    present = {str(p.relative_to(repo / "kernel")) for p in kernel_files(repo)}
    out += [f"kernel/{f} has no line in kernel/README.md" for f in sorted(present - listed)]
    out += [
        f"kernel/README.md names kernel/{f}, which is not there" for f in sorted(listed - present)
    ]
    return out


def core_files(repo: Path) -> list[str]:
    """The files of the room kernel/README.md marks as the audit core."""
    core = [room for room, marked in rooms(repo) if marked and room]
    return [
        str(p.relative_to(repo / "kernel"))
        for room in core
        for p in kernel_files(repo)
        if p.relative_to(repo / "kernel").parts[0] == room
    ]


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def code_lines(path: Path) -> int:
    """Lines holding code: not blank, not only a comment, not part of a docstring."""
    text = path.read_text(encoding="utf-8")
    docs: set[int] = set()
    # docstrings, of modules, classes, functions and attributes alike
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            assert node.end_lineno is not None
            docs |= set(range(node.lineno, node.end_lineno + 1))
    counted = 0
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped and not stripped.startswith("#") and number not in docs:
            counted += 1
    return counted


def main(argv: list[str]) -> int:
    """Print the shape of the kernel of the repository given (default: this one)."""
    check = "--check" in argv
    args = [a for a in argv[1:] if a != "--check"]
    repo = Path(args[0] if args else Path(__file__).resolve().parent.parent)
    if check:
        found = problems(repo)
        for line in found:
            print(line)
        return 1 if found else 0
    files = kernel_files(repo)
    total = sum(_lines(p) for p in files)
    code = sum(code_lines(p) for p in files)
    print(f"kernel: {len(files)} files, {total} lines ({code} of code)")
    if flat(repo):
        print("  (a flat kernel: its files placed in the rooms of this checkout's floor plan)")
        gone = [p.name for p in files if _placed(repo, module_name(repo, p)) == "?"]
        if gone:
            print(f"  not in this floor plan (they left the kernel): {', '.join(gone)}")
    for room, _ in rooms(_HERE if flat(repo) else repo):
        held = [p for p in files if _placed(repo, module_name(repo, p)) == room]
        print(
            f"  kernel/{room + '/' if room else '':<11} {len(held):3d} files, "
            f"{sum(_lines(p) for p in held):6d} lines ({sum(code_lines(p) for p in held)} of code)"
        )
    core = core_files(repo)
    if core:
        size = sum(_lines(repo / "kernel" / f) for f in core)
        core_code = sum(code_lines(repo / "kernel" / f) for f in core)
        print(
            f"audit core: {len(core)} files, {size} lines ({core_code} of code): {', '.join(core)}"
        )
    longest = functions(repo)
    over = [f for f in longest if f[0] > FUNCTION_MAX]
    print(f"functions over {FUNCTION_MAX} lines: {len(over)}")
    for length, where in longest[:10]:
        print(f"  {length:4d}  {where}")
    found = cycles(import_graph(repo))
    print("import cycles: " + ("; ".join(" <-> ".join(c) for c in found) if found else "none"))
    up = climbs(repo, import_graph(repo))
    print("upward imports: " + (str(len(up)) if up else "none"))
    for line in up:
        print(f"  {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
