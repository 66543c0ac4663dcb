"""Suppressions are findings: what a `# noqa`, a `# type: ignore` or a `# pyright:` comment
hides is measured too, kept apart from the findings gaps come from (Measurement.suppressed),
and counted by the ratchet with them.

ruff runs twice (as configured, then with `--ignore-noqa`): what only the second run reports
is hidden by a noqa, line or file. ruff format has no such switch: each `# fmt: off` or
`# fmt: skip` comment is a finding of its own. pyright runs once with `enableTypeIgnoreComments` off (the
kernel writes it into pyright's configuration); its findings on a `# type: ignore` line, or
in a file with one at the top, are the hidden ones. pyright cannot be told to ignore its own
comments, so each `# pyright:` comment but `strict` (an `ignore`, `basic`, a rule switched
off) is itself a finding. mypy cannot be told to ignore its comments either: it checks a copy
of the tree in which each type-ignore and inline `# mypy:` comment is made inert (same length,
so every line and column stays), and its findings that one hides in the tree are the hidden
ones. An existing suppression is in the baseline's counts too: neutral.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import stat
import tempfile
import tokenize
from collections import Counter
from collections.abc import Generator, Iterable, Iterator, Sequence
from pathlib import Path

from domain import Diagnostic, Measurement, Measurements, Tool
from kernel.measuring.gate import Gate, in_pyright_scope, pyright_scope

_TYPE_IGNORE = re.compile(r"(?:^|#)\s*type:\s*ignore(?:\[[\s\w,-]*\]|\s|$)")
"""pyright's own pattern for a type-ignore comment (the text after its `#`)."""
_PYRIGHT = re.compile(r"(?:^|#)\s*pyright:\s*(?P<rest>.*)$")
_FORMAT_OFF = re.compile(r"^\s*(?:fmt:\s*(?:off|skip)|yapf:\s*disable)\b")
_MAX_SOURCE = 4 * 1024 * 1024
"""Bytes of one source file read for its comments at most (pyright skips bigger ones too)."""


def unsuppressed(measurements: Measurements) -> Measurements:
    """The measurements as the ratchet counts them: hidden findings are findings."""
    return measurements.model_copy(
        update={
            "items": tuple(
                m.model_copy(update={"diagnostics": (*m.diagnostics, *m.suppressed)})
                if m.suppressed
                else m
                for m in measurements.items
            )
        }
    )


def without_suppressed(measurements: Measurements) -> Measurements:
    """The measurements as the analysers see them: what gaps come from, nothing hidden."""
    return measurements.model_copy(
        update={"items": tuple(m.model_copy(update={"suppressed": ()}) for m in measurements.items)}
    )


def ruff_hidden(shown: Sequence[Diagnostic], everything: Sequence[Diagnostic]) -> list[Diagnostic]:
    """What `--ignore-noqa` reports beyond the configured run: the findings a noqa hides."""
    left = Counter(_where(d) for d in shown)
    hidden: list[Diagnostic] = []
    for d in everything:
        if left[_where(d)] > 0:
            left[_where(d)] -= 1
        else:
            hidden.append(d)
    return hidden


def _where(d: Diagnostic) -> tuple[str, int, int, str]:
    return (d.file, d.line, d.column, d.rule)


def pyright_split(
    found: Sequence[Diagnostic], spans: Sequence[tuple[int, int]], tree: Path
) -> tuple[list[Diagnostic], list[Diagnostic]]:
    """pyright's findings (run with type-ignore comments off) as (shown, hidden by one).

    As pyright does: a finding is hidden when a type-ignore comment is on one of its lines
    (`spans`: first and last, 1-based), or the file starts with one."""
    shown: list[Diagnostic] = []
    hidden: list[Diagnostic] = []
    ignores: dict[str, tuple[bool, frozenset[int]]] = {}
    for d, (first, last) in zip(found, spans, strict=True):
        if d.file not in ignores:
            ignores[d.file] = _type_ignores(tree, d.file)
        whole, lines = ignores[d.file]
        if whole or any(line in lines for line in range(first, last + 1)):
            hidden.append(d)
        else:
            shown.append(d)
    return shown, hidden


def pyright_comments(tree: Path, gate: Gate, files: Sequence[str]) -> list[Diagnostic]:
    """Every `# pyright:` comment but `strict`, as a finding, in the files pyright checks
    (`files`; empty: all in its scope)."""
    scope = pyright_scope(gate)
    paths = files or sorted(_python_files(tree))
    found: list[Diagnostic] = []
    for rel in paths:
        if not in_pyright_scope(rel, scope):
            continue
        data = _read(tree / rel)
        if data is None or b"pyright:" not in data:
            continue  # most files: no tokenizing
        for line, text, _ in _comments_in(data):
            match = _PYRIGHT.search(text)
            if match is None or match.group("rest").strip() == "strict":
                continue
            ignore = match.group("rest").startswith("ignore")
            found.append(
                Diagnostic(
                    tool=Tool.PYRIGHT,
                    file=rel,
                    line=line,
                    rule="pyright-ignore" if ignore else "pyright-comment",
                    message=f"a suppression comment: {text.strip()[:200]}",
                )
            )
    return found


def format_comments(tree: Path, files: Sequence[str]) -> list[Diagnostic]:
    """Every `# fmt: off`, `# fmt: skip` or `# yapf: disable` comment, as a ruff format
    finding, in `files` (empty: every Python file of the tree)."""
    found: list[Diagnostic] = []
    for rel in files or sorted(_python_files(tree)):
        data = _read(tree / rel)
        if data is None or (b"fmt:" not in data and b"yapf:" not in data):
            continue
        for line, text, _ in _comments_in(data):
            if _FORMAT_OFF.search(text):
                found.append(
                    Diagnostic(
                        tool=Tool.RUFF_FORMAT,
                        file=rel,
                        line=line,
                        rule="fmt-off",
                        message=f"a suppression comment: {text.strip()[:200]}",
                    )
                )
    return found


def _python_files(tree: Path) -> Iterator[str]:
    for folder, dirs, names in os.walk(tree):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in ("__pycache__",)]
        rel_dir = Path(folder).relative_to(tree).as_posix()
        for name in names:
            if name.endswith((".py", ".pyi")):
                yield name if rel_dir == "." else f"{rel_dir}/{name}"


def _type_ignores(tree: Path, rel: str) -> tuple[bool, frozenset[int]]:
    """(a type-ignore comment before any code: the whole file, lines with one)."""
    whole = False
    lines: set[int] = set()
    for line, text, before_code in _comments_placed(tree / rel):
        if _TYPE_IGNORE.search(text):
            lines.add(line)
            whole = whole or before_code
    return whole, frozenset(lines)


def _comments_placed(path: Path) -> list[tuple[int, str, bool]]:
    """(line, text after `#`, whether no code came before it) of every comment in a file."""
    data = _read(path)
    return [] if data is None else _comments_in(data)


def _comments_in(data: bytes) -> list[tuple[int, str, bool]]:
    found: list[tuple[int, str, bool]] = []
    code = False
    try:
        for token in tokenize.tokenize(io.BytesIO(data).readline):
            if token.type == tokenize.COMMENT:
                found.append((token.start[0], token.string[1:], not code))
            elif token.type not in _NOT_CODE:
                code = True
    except (tokenize.TokenError, SyntaxError, UnicodeDecodeError):
        # unreadable as Python: every `#` of every line counts (pyright finds little else there)
        return list(_every_hash(data))
    return found


_NOT_CODE = (tokenize.ENCODING, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)


def _every_hash(data: bytes) -> Iterable[tuple[int, str, bool]]:
    for number, raw in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
        if "#" in raw:
            yield number, raw.split("#", 1)[1], number == 1


def _read(path: Path) -> bytes | None:
    """A source file's bytes: a regular file, not followed through a link, bounded."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return handle.read(_MAX_SOURCE)


_MYPY_INLINE = re.compile(r"^\s*mypy:")
"""An inline mypy configuration comment (`# mypy: ignore-errors`, `disable-error-code=...`)."""
_INERT = ((re.compile(r"type(?=\s*:\s*ignore)"), "tyqe"), (re.compile(r"mypy(?=\s*:)"), "mypx"))
"""Each suppressing comment's word and the word of the same length that makes it inert."""


def _inert(data: bytes) -> bytes:
    """A source file with each type-ignore and `# mypy:` comment made inert, same length."""
    lines = data.splitlines(keepends=True)
    for line, text, _ in _comments_in(data):
        if not (_TYPE_IGNORE.search(text) or _MYPY_INLINE.match(text)) or line > len(lines):
            continue
        raw, comment = lines[line - 1], ("#" + text).encode("utf-8", errors="replace")
        at = raw.rfind(comment)
        if at < 0:
            continue
        changed = text
        for pattern, word in _INERT:
            changed = pattern.sub(word, changed, count=1)
        lines[line - 1] = raw[:at] + ("#" + changed).encode("utf-8") + raw[at + len(comment) :]
    return b"".join(lines)


@contextlib.contextmanager
def mypy_view(tree: Path) -> Generator[Path]:
    """A copy of the tree of the kernel's own for mypy (writable in its sandbox: nothing it
    does reaches what ruff and pyright read), every type-ignore and `# mypy:` comment inert,
    so mypy reports what they hide (mypy_split)."""
    folder = Path(tempfile.mkdtemp(prefix="mypy-", dir=tree.parent))
    try:
        copy = folder / "tree"
        shutil.copytree(tree, copy, symlinks=True)
        for rel in _python_files(copy):
            data = _read(copy / rel)
            if data is not None and (b"type" in data or b"mypy" in data):
                changed = _inert(data)
                if changed != data:
                    (copy / rel).write_bytes(changed)
        yield copy
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def mypy_split(m: Measurement, tree: Path) -> Measurement:
    """A mypy measurement of the inert copy split into what gaps come from and what a comment
    in the tree hides: a finding on a type-ignore line, in a file that starts with one, or in
    a file with an inline `# mypy:` configuration comment."""
    if not m.ran:
        return m
    shown: list[Diagnostic] = []
    hidden: list[Diagnostic] = []
    seen: dict[str, tuple[bool, frozenset[int]]] = {}
    for d in m.diagnostics:
        if d.file not in seen:
            comments = _comments_placed(tree / d.file)
            whole = any(_MYPY_INLINE.match(t) for _, t, _ in comments)
            ignores = [(n, first) for n, t, first in comments if _TYPE_IGNORE.search(t)]
            whole = whole or any(first for _, first in ignores)
            seen[d.file] = (whole, frozenset(n for n, _ in ignores))
        whole, lines = seen[d.file]
        (hidden if whole or d.line in lines else shown).append(d)
    return m.model_copy(
        update={
            "diagnostics": tuple(shown),
            "suppressed": tuple(hidden),
            "exit_code": 1 if shown else 0,
        }
    )
