"""Acceptance criteria: catalogue checks with arguments, and human text beside each.

An inbox item's own `acceptance` lines are read as catalogue checks or rejected with a reason;
nothing in them can become a command.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from domain import AcceptanceCriterion, CheckName, Gap, GapCategory, TaskKind
from modules.planner.allowlist import clean_path
from modules.planner.phases import safe_node

_SHELL = frozenset(";|&$`<>(){}!\\'\"*?~#\n\r\t")
CATALOGUE_WORDS = "ruff, ruff format, pyright, mypy, pytest, py_compile, selfcheck"


def _files_text(args: Sequence[str], what: str = "the files you touch") -> str:
    return ", ".join(args) if args else what


def text_for(check: CheckName, args: Sequence[str] = (), strict: Sequence[str] = ()) -> str:
    """Human text for a catalogue check with its arguments."""
    if check == CheckName.RUFF:
        return f"ruff finds nothing new in {_files_text(args)}"
    if check == CheckName.RUFF_FORMAT:
        return f"ruff format has nothing to change in {_files_text(args)}"
    if check == CheckName.PYRIGHT:
        where = f" (strict under {', '.join(strict)})" if strict else ""
        return f"pyright finds no new error in {_files_text(args)}{where}"
    if check == CheckName.MYPY:
        return f"mypy finds no new error in {_files_text(args)}"
    if check == CheckName.PY_COMPILE:
        return f"{_files_text(args, 'the Python files you touch')} compile"
    if check == CheckName.PYTEST:
        shown = [a for a in args if safe_node(a)]
        if args and len(shown) == len(args):
            return f"these tests pass: {', '.join(shown)}"
        return "the failing tests named in the gap pass"
    if check == CheckName.PYTEST_ALL:
        return "the whole test suite runs and no test that passed before fails"
    if check == CheckName.SELFCHECK:
        return "the module host boots the changed modules and each meets its contract"
    return "the gap is closed"


def _closed_text(gap: Gap, kind: TaskKind) -> str:
    if gap.category == GapCategory.QUALITY:
        if gap.key == "pytest:run":
            return "the gap is closed: the test suite runs"
        return "the gap is closed: every finding quoted in the gap is gone"
    if kind == TaskKind.FEATURE:
        return "the gap is closed: a change inside the allowed files, with at least one new or changed test that passes"
    return "the gap is closed: a change inside the allowed files"


def criterion(
    check: CheckName, args: Sequence[str] = (), strict: Sequence[str] = (), text: str = ""
) -> AcceptanceCriterion:
    """One catalogue criterion with its text."""
    return AcceptanceCriterion(
        check=check, args=tuple(args), text=text or text_for(check, args, strict)
    )


def base_criteria(
    gap: Gap, kind: TaskKind, failing: Sequence[str], strict: Sequence[str]
) -> list[AcceptanceCriterion]:
    """Every plan's checks: ruff, ruff format and pyright on the touched files, the failing
    tests by node id, the whole suite, and the gap closed."""
    out = [
        criterion(CheckName.RUFF),
        criterion(CheckName.RUFF_FORMAT),
        criterion(CheckName.PYRIGHT, strict=strict),
    ]
    if failing:
        out.append(criterion(CheckName.PYTEST, failing))
    out.append(criterion(CheckName.PYTEST_ALL))
    out.append(criterion(CheckName.GAP_CLOSED, text=_closed_text(gap, kind)))
    return out


@dataclass(frozen=True)
class Parsed:
    """An acceptance line read as a catalogue check, or the reason it is rejected."""

    line: str
    criterion: AcceptanceCriterion | None = None
    reason: str = ""


def _files(args: Sequence[str], line: str) -> tuple[tuple[str, ...], str]:
    out: list[str] = []
    for arg in args:
        if arg.startswith("-"):
            return (), f"{line!r}: option {arg!r} is not allowed; a check takes only file paths"
        path = clean_path(arg)
        if path is None:
            return (), f"{line!r}: {arg!r} is not a path inside the repository"
        out.append(path)
    return tuple(out), ""


def _nodes(args: Sequence[str], line: str) -> tuple[tuple[str, ...], str]:
    out: list[str] = []
    for arg in args:
        if arg.startswith("-"):
            return (), f"{line!r}: pytest option {arg!r} is not allowed; name tests by node id"
        file, _, rest = arg.partition("::")
        path = clean_path(file)
        if path is None or not path.endswith(".py") or (rest and not safe_node(f"{path}::{rest}")):
            return (), f"{line!r}: {arg!r} is not a pytest node id (path/to/test_x.py::test_name)"
        out.append(f"{path}::{rest}" if rest else path)
    return tuple(out), ""


def parse_acceptance(line: str) -> Parsed:
    """Read one acceptance line: "pytest tests/x.py::test_y", "ruff", "pyright src/a.py", ..."""
    text = line.strip()
    bad = sorted(set(text) & _SHELL)
    if bad:
        return Parsed(
            line, reason=f"{line!r} is not a catalogue check: it contains {''.join(bad)!r}"
        )
    words = text.split()
    if words[:2] in (["python", "-m"], ["python3", "-m"]):
        words = words[2:]
    if words[:2] in (["python", "seed.py"], ["python3", "seed.py"]) or words[:1] == ["seed.py"]:
        words = words[1:] if words[0] == "seed.py" else words[2:]
    if not words:
        return Parsed(line, reason=f"{line!r} is empty; the catalogue has {CATALOGUE_WORDS}")
    program, args = words[0], words[1:]
    if program == "pytest":
        nodes, problem = _nodes(args, line)
        if problem:
            return Parsed(line, reason=problem)
        check = CheckName.PYTEST if nodes else CheckName.PYTEST_ALL
        return Parsed(line, criterion(check, nodes, text=f"the inbox item's check `{text}` passes"))
    if program == "ruff":
        check = CheckName.RUFF
        if args[:1] == ["format"]:
            check, args = CheckName.RUFF_FORMAT, [a for a in args[1:] if a != "--check"]
        elif args[:1] == ["check"]:
            args = args[1:]
        files, problem = _files(args, line)
        if problem:
            return Parsed(line, reason=problem)
        return Parsed(line, criterion(check, files, text=f"the inbox item's check `{text}` passes"))
    simple = {
        "pyright": CheckName.PYRIGHT,
        "mypy": CheckName.MYPY,
        "py_compile": CheckName.PY_COMPILE,
    }
    if program in simple:
        files, problem = _files(args, line)
        if problem:
            return Parsed(line, reason=problem)
        return Parsed(
            line, criterion(simple[program], files, text=f"the inbox item's check `{text}` passes")
        )
    if program == "selfcheck" and not args:
        return Parsed(line, criterion(CheckName.SELFCHECK))
    return Parsed(
        line,
        reason=f"{line!r} is not a catalogue check; the catalogue has {CATALOGUE_WORDS}",
    )


def merge(criteria: Sequence[AcceptanceCriterion]) -> tuple[AcceptanceCriterion, ...]:
    """Criteria without exact repeats (same check and arguments), first text kept."""
    seen: dict[tuple[CheckName, tuple[str, ...]], AcceptanceCriterion] = {}
    for c in criteria:
        seen.setdefault((c.check, c.args), c)
    return tuple(seen.values())
