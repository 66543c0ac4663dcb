"""Append-only JSON-lines logs read back with bounds: whole lines, whole objects, nothing swallowed.

Every line is read with a size cap (a longer one is skipped in blocks, never held whole).
A damaged line (torn, glued to the next append by an older writer, NUL padding) still
gives up every whole JSON object in it: `objects_in` finds them, and `repair` rewrites the
log with each on a line of its own, the rest of the line set aside in a side file.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, TypeVar, cast

from pydantic import BaseModel, ValidationError

from kernel.bounds import (
    KIB,
    SALVAGE_SLACK,
    SALVAGE_TRIES,
    SALVAGE_WORK,
    SEQUENCE_DIGITS_MAX,
)
from kernel.fsutil import unique_path

M = TypeVar("M", bound=BaseModel)
_BLOCK = 64 * KIB
_NUMBER = re.compile(rb"iter-(\d{4,%d})(?!\d)" % SEQUENCE_DIGITS_MAX)
TORN = ".torn-"
"""Side files are named <log>.torn-<UTC time>: the bytes a repair took out of a log."""


@dataclass(frozen=True)
class Line:
    """One line of a log: where it starts, its bytes (None when over the cap) and its size."""

    offset: int
    data: bytes | None
    size: int
    ended: bool
    """Whether the line ends with a newline (the last line of a torn append does not)."""


def lines(path: Path, cap: int, start: int = 0) -> Iterator[Line]:
    """The lines of a file from byte `start`, each read whole only when within `cap` bytes."""
    with path.open("rb") as handle:
        handle.seek(start)
        offset = start
        while True:
            raw = handle.readline(cap + 1)
            if not raw:
                return
            ended = raw.endswith(b"\n")
            if ended or len(raw) <= cap:
                yield Line(offset, raw, len(raw), ended)
                offset += len(raw)
                continue
            size = len(raw)
            while True:  # over the cap: find its end without keeping it
                chunk = handle.readline(_BLOCK)
                size += len(chunk)
                if not chunk or chunk.endswith(b"\n"):
                    ended = chunk.endswith(b"\n")
                    break
            yield Line(offset, None, size, ended)
            offset += size


def lines_backwards(path: Path, cap: int) -> Iterator[Line]:
    """The lines of a file from the end, newest first, read in blocks: each with its bytes
    (no newline; None when over `cap`, never held whole), its offset and size (no newline)."""
    with path.open("rb") as handle:
        position = line_end = handle.seek(0, os.SEEK_END)
        rest, over, ended = b"", False, False
        while position > 0:
            step = min(_BLOCK, position)
            position -= step
            handle.seek(position)
            chunk = handle.read(step)
            high = len(chunk)
            while True:
                cut = chunk.rfind(b"\n", 0, high)
                if not over:
                    rest = chunk[cut + 1 : high] + rest
                    over = len(rest) > cap
                    rest = b"" if over else rest
                if cut < 0:
                    break
                start = position + cut + 1
                yield Line(start, None if over else rest, line_end - start, ended)
                line_end, high = position + cut, cut
                rest, over, ended = b"", False, True
        yield Line(0, None if over else rest, line_end, ended)


def whole_object(data: bytes) -> dict[str, Any] | None:
    """The JSON object that is all of `data` (UTF-8, surrounding whitespace aside), or None."""
    try:
        value: Any = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):
        return None
    return cast(dict[str, Any], value) if isinstance(value, dict) else None


def objects_in(data: bytes, model: type[M], stop: int = -1) -> list[tuple[int, int, M]]:
    """The whole objects of this model found in a damaged line: (start, end, object) each.

    Candidates are tried left to right at each '{'; an object taken is skipped past, one
    that is not of the model (a fragment's inner object, a torn record that swallowed the
    next) is looked into. The search is bounded (SALVAGE_WORK times the line's length,
    SALVAGE_TRIES starts): past that, what is left counts as a fragment. With `stop`, only
    objects starting before it are looked for.
    """
    # latin-1 maps each byte to one character, so offsets in the text are offsets in bytes
    text = data.decode("latin-1")
    decoder = json.JSONDecoder()
    found: list[tuple[int, int, M]] = []
    budget = SALVAGE_WORK * len(data) + SALVAGE_SLACK
    position = tries = 0
    while budget > 0 and tries < SALVAGE_TRIES:
        start = text.find("{", position, len(text) if stop < 0 else stop)
        if start < 0:
            break
        tries += 1
        position = start + 1
        try:
            value, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError as exc:
            budget -= max(exc.pos - start, 1)
            continue
        except (ValueError, RecursionError):
            budget -= len(text) - start
            continue
        budget -= end - start
        if not isinstance(value, dict):
            continue
        try:
            item = model.model_validate_json(data[start:end])
        except (ValidationError, ValueError, RecursionError):
            continue
        found.append((start, end, item))
        position = end
    return found


def objects_in_long(
    path: Path, line: Line, model: type[M], cap: int
) -> Iterator[tuple[int, int, M]]:
    """The whole objects of the model (each within `cap`) in a line over `cap`, at their
    offsets in the file: the line is read in windows of twice the cap, never whole."""
    with path.open("rb") as handle:
        base, end = line.offset, line.offset + line.size
        while base < end:
            handle.seek(base)
            window = handle.read(min(2 * cap, end - base))
            found = objects_in(window, model, stop=cap)
            for start, stop, item in found:
                yield base + start, base + stop, item
            base = max(base + cap, base + found[-1][1] if found else 0)


def numbers_in(data: bytes) -> int:
    """The highest iteration number named in these bytes (0 when none)."""
    return max((int(m) for m in _NUMBER.findall(data)), default=0)


@dataclass
class Repair:
    """What a repair of one log did."""

    path: Path
    aside: Path | None = None
    kept: int = 0
    """Whole objects kept out of damaged lines (each now on a line of its own)."""
    fragments: int = 0
    aside_bytes: int = 0
    torn_tail: int = 0
    """Bytes of an unterminated last line set aside (0 when the log ended with a newline)."""
    reasons: list[str] = field(default_factory=list[str])
    highest: int = 0
    """The highest iteration number named in what was set aside."""

    def message(self) -> str:
        """One sentence for daemon.log and events.jsonl."""
        where = f"(saved to {self.aside.name})" if self.aside else ""
        said: list[str] = []
        if self.torn_tail and self.fragments == 1 and not self.kept:
            said.append(f"cut a torn last line of {self.torn_tail} bytes {where}")
        else:
            if self.fragments:
                said.append(
                    f"set aside {self.fragments} fragment(s) of {self.aside_bytes} bytes {where}"
                )
            if self.kept:
                said.append(
                    f"kept {self.kept} whole object(s) found in damaged lines, each on its own line"
                )
        text = f"{self.path}: " + "; ".join(s.strip() for s in said)
        return text + (f" ({'; '.join(self.reasons[:5])})" if self.reasons else "")


def _sound(line: Line) -> bool:
    """A line a repair leaves as it is: whole, ended, blank or one JSON object."""
    if line.data is None or not line.ended:
        return False
    return not line.data.strip() or whole_object(line.data) is not None


class _Aside:
    """The side file of one repair, opened on the first fragment."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self.path: Path | None = None
        self._handle: IO[bytes] | None = None
        self.pieces = 0
        self.size = 0
        self.highest = 0

    def put(self, chunks: Iterator[bytes]) -> None:
        if self._handle is None:
            stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
            self.path = unique_path(self.log.with_name(f"{self.log.name}{TORN}{stamp}"))
            self._handle = self.path.open("xb")
        elif self.pieces:
            self._handle.write(b"\n")
        self.pieces += 1
        tail = b""
        for chunk in chunks:
            self._handle.write(chunk)
            self.size += len(chunk)
            self.highest = max(self.highest, numbers_in(tail + chunk))
            tail = chunk[-32:]

    def close(self) -> None:
        if self._handle is not None:
            self._handle.flush()
            os.fsync(self._handle.fileno())
            self._handle.close()
            self._handle = None


def _copy(handle: IO[bytes], offset: int, size: int) -> Iterator[bytes]:
    """The bytes of one line, in blocks (a line over the cap is never held whole)."""
    handle.seek(offset)
    while size > 0:
        chunk = handle.read(min(_BLOCK, size))
        if not chunk:
            return
        size -= len(chunk)
        yield chunk


def repair(path: Path, cap: int, model: type[BaseModel], sound_until: int = 0) -> Repair | None:
    """Rewrite a damaged log so every line is whole: None when nothing was damaged.

    Whole lines stay as they are (any one JSON object); every whole object of the model in a damaged line
    is kept on a line of its own; everything else of a damaged line (a torn fragment, NULs,
    a line over `cap`) goes to a side file, bytes unchanged. The new log replaces the old
    one atomically, so a crash during the repair leaves one or the other. `sound_until`: the
    bytes before it are known whole lines (an index read them), so only the rest is checked.
    """
    if not path.is_file() or path.stat().st_size == 0:
        return None
    with path.open("rb") as locked:
        fcntl.flock(locked.fileno(), fcntl.LOCK_EX)  # appenders wait, then see the new file
        size = os.fstat(locked.fileno()).st_size
        if not 0 < sound_until <= size or os.pread(locked.fileno(), 1, sound_until - 1) != b"\n":
            sound_until = 0
        if all(_sound(line) for line in lines(path, cap, sound_until)):
            return None
        return _rewrite(path, cap, model)


def _rewrite(path: Path, cap: int, model: type[BaseModel]) -> Repair:
    result = Repair(path)
    aside = _Aside(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out, path.open("rb") as source:
            for line in lines(path, cap):
                if _sound(line):
                    assert line.data is not None
                    out.write(line.data)
                    continue
                if not line.ended:
                    result.torn_tail = line.size
                if line.data is None:
                    result.reasons.append(
                        f"a line of {line.size} bytes at byte {line.offset} is over the bound of {cap}"
                    )
                    aside.put(_copy(source, line.offset, line.size - line.ended))
                    for begin, end, _ in objects_in_long(path, line, model, cap):
                        out.write(b"".join(_copy(source, begin, end - begin)) + b"\n")
                        result.kept += 1
                    continue
                body = line.data.rstrip(b"\n")
                if not line.ended and whole_object(body) is not None:
                    out.write(body + b"\n")  # whole, only its newline was lost
                    result.kept += 1
                    continue
                start = 0
                for begin, end, _ in objects_in(body, model):
                    if body[start:begin].strip():
                        aside.put(iter((body[start:begin],)))
                    out.write(body[begin:end] + b"\n")
                    result.kept += 1
                    start = end
                if body[start:].strip() or (start == 0 and body):
                    aside.put(iter((body[start:],)))
            out.flush()
            os.fsync(out.fileno())
        aside.close()
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        aside.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    result.aside = aside.path
    result.fragments = aside.pieces
    result.aside_bytes = aside.size
    result.highest = aside.highest
    return result


def side_files(log: Path) -> list[Path]:
    """The side files repairs of this log left."""
    return sorted(log.parent.glob(f"{log.name}{TORN}*"))


def highest_in_file(path: Path) -> int:
    """The highest iteration number named anywhere in a file, read in blocks (0 when none)."""
    highest = 0
    tail = b""
    with contextlib.suppress(OSError), path.open("rb") as handle:
        while chunk := handle.read(_BLOCK * 16):
            highest = max(highest, numbers_in(tail + chunk))
            tail = chunk[-32:]
    return highest
