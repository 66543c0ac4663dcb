"""The cases `seed.py fitness` replays: planning problems whose answer is known.

Three parts, each the kernel's: this project's own history (every recorded iteration with a
plan: its base commit, what its planning modules got, kept by `keep` in the kernel's state,
and the files its landed change touched), the corpus shipped in the kernel (real upstream
fixes, `fitness-corpus.json.xz` beside this file: each case's files, gaps and fix, no network),
and a held-back corpus in the kernel's state folder (the same format; no sandbox shows it, so
no generation can read it to special-case its names). A corpus file is xz-compressed JSON:
`{"version": 1, "blobs": {key: text}, "cases": [{"case": FitnessCase, "files": {path: key}}]}`.
"""

from __future__ import annotations

import json
import lzma
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, cast

from domain import AnalysisInput, GapReport, IterationOutcome, IterationRecord
from domain.fitness import FitnessCase
from kernel.bounds import (
    CORPUS_MAX,
    FITNESS_HISTORY_CASES,
    KEPT_INPUT_MAX,
    PER_GAP_RECORDS,
    RECENT_RECORDS,
)
from kernel.fsutil import atomic_write_bytes
from kernel.isolation.paths import Paths
from kernel.records.store import brief_of

SHIPPED = Path(__file__).resolve().parent / "fitness-corpus.json.xz"
"""The corpus shipped in the kernel (protected: no agent changes it)."""
VERSION = 1

_SEQUENCE = re.compile(r"iter-(\d+)-")
Given = tuple[AnalysisInput | None, GapReport]
"""What an iteration's planning modules got: the analysers' input and the planner's report."""


def _inputs(paths: Paths) -> Path:
    """Where the kernel keeps each iteration's planning inputs (its state: no sandbox shows it)."""
    return paths.state / "fitness" / "inputs"


def keep(paths: Paths, iteration_id: str, given: AnalysisInput | None, report: GapReport) -> None:
    """Keep what this iteration's planning modules got, for `seed.py fitness` to replay (left
    out when it is over KEPT_INPUT_MAX compressed: the case then replays its gap alone)."""
    data = json.dumps(
        {
            "analysis": given.model_dump(mode="json") if given is not None else None,
            "report": report.model_dump(mode="json"),
        }
    )
    packed = lzma.compress(data.encode("utf-8"))
    if len(packed) <= KEPT_INPUT_MAX:
        atomic_write_bytes(_inputs(paths) / f"{iteration_id}.json.xz", packed)


def kept(paths: Paths, iteration_id: str) -> Given | None:
    """An iteration's kept planning inputs; None when none were kept or they do not read."""
    place = _inputs(paths) / f"{iteration_id}.json.xz"
    try:
        with lzma.open(place, "rb") as handle:
            data = json.loads(handle.read(KEPT_INPUT_MAX * 64))
        analysis = data.get("analysis")
        return (
            AnalysisInput.model_validate(analysis) if analysis is not None else None,
            GapReport.model_validate(data["report"]),
        )
    except (OSError, lzma.LZMAError, ValueError, KeyError, TypeError, AttributeError):
        return None


def history_cases(
    records: Iterable[IterationRecord],
    given: Callable[[str], Given | None] = lambda _: None,
    latest: int = FITNESS_HISTORY_CASES,
) -> list[FitnessCase]:
    """A case for each of the `latest` recorded iterations that had a plan and a base, oldest
    first: what its planning modules got (kept by `keep`; else its gap alone), and the files
    its change touched if it landed."""
    planned = [
        (earlier, record, plan, found)
        for earlier, record in enumerate(records)
        if (plan := record.plan) is not None
        and record.base
        and (found := _SEQUENCE.match(record.iteration_id)) is not None
    ]
    cases: list[FitnessCase] = []
    for earlier, record, plan, found in planned[-latest:] if latest > 0 else []:
        landed = record.outcome == IterationOutcome.SUCCESS and bool(record.commit)
        analysis, report = given(record.iteration_id) or (None, GapReport(gaps=(plan.gap,)))
        cases.append(
            FitnessCase(
                id=record.iteration_id,
                base=record.base,
                analysis=analysis,
                report=report,
                gap=plan.gap.key,
                fixed=record.touched_files if landed else (),
                sequence=int(found.group(1)),
                now=plan.created_at,
                earlier=earlier,
            )
        )
    return cases


def seen_before(records: Sequence[IterationRecord], report: GapReport) -> list[IterationRecord]:
    """The records the planner got then, as the loop picks them: the latest ones and each
    reported gap's latest, as briefs."""
    keys = {g.key for g in report.gaps}
    kept: list[IterationRecord] = []
    per_gap: dict[str, int] = {}
    for index in range(len(records) - 1, -1, -1):
        record = records[index]
        key = record.gap.key
        recent = index >= len(records) - RECENT_RECORDS
        gap_ok = key in keys and per_gap.get(key, 0) < PER_GAP_RECORDS
        if recent or gap_ok:
            kept.append(brief_of(record))
            per_gap[key] = per_gap.get(key, 0) + 1
    return kept[::-1]


def held_back(paths: Paths) -> Path:
    """The held-back corpus: in the kernel's state folder, which no sandbox profile shows."""
    return paths.state / "fitness" / "held-back.json.xz"


@dataclass
class Corpus:
    """Cases whose files the corpus holds (no base commit), and the texts they share."""

    cases: list[FitnessCase] = field(default_factory=list[FitnessCase])
    blobs: dict[str, str] = field(default_factory=dict[str, str])
    problems: list[str] = field(default_factory=list[str])
    """Why a file or a case was left out (read as bad input: said, never fatal)."""


_READ: dict[tuple[Path, str], tuple[tuple[int, int, int], Corpus]] = {}
"""Each corpus file as last read, by its inode, size and time (the daemon checks every
candidate of an iteration against the same files: a second second-long read of each is waste)."""


def read(path: Path, part: str) -> Corpus:
    """A corpus file's cases as `part` (its texts' keys prefixed with it, so two corpora
    never share one); a missing file is an empty corpus, a damaged one or a damaged case is
    left out and said why."""
    try:
        found = path.stat()
    except OSError:
        return Corpus()
    stamp = (found.st_ino, found.st_size, found.st_mtime_ns)
    last = _READ.get((path, part))
    if last is None or last[0] != stamp:
        last = _READ[(path, part)] = (stamp, _read(path, part))
    kept = last[1]
    return Corpus(list(kept.cases), dict(kept.blobs), list(kept.problems))


def _read(path: Path, part: str) -> Corpus:
    try:
        with lzma.open(path, "rb") as handle:
            raw = handle.read(CORPUS_MAX + 1)
        if len(raw) > CORPUS_MAX:
            return Corpus(problems=[f"{path}: over {CORPUS_MAX:,} bytes, not read"])
        data = cast(dict[str, Any], json.loads(raw))
        if data.get("version") != VERSION:
            return Corpus(problems=[f"{path}: version {data.get('version')!r}, not {VERSION}"])
        blobs = {str(k): str(v) for k, v in cast(dict[str, Any], data["blobs"]).items()}
        entries = cast(list[dict[str, Any]], data["cases"])
    except (OSError, lzma.LZMAError, ValueError, KeyError, TypeError, AttributeError) as exc:
        return Corpus(problems=[f"{path}: not a corpus: {exc}"[:300]])
    found = Corpus(blobs=blobs)
    for number, entry in enumerate(entries):
        try:
            files = {str(k): str(v) for k, v in cast(dict[str, Any], entry["files"]).items()}
            case = FitnessCase.model_validate({**entry["case"], "part": part, "base": ""})
            if case.kind == "feature":  # recall on features is held apart from fixes
                case = case.model_copy(update={"part": f"{part}-features"})
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            found.problems.append(f"{path}: case {number}: {exc}"[:300])
            continue
        bad = [p for p in files if not _plain(p) or files[p] not in blobs]
        if bad:
            found.problems.append(f"{path}: case {case.id}: files it cannot hold: {bad[:3]}")
            continue
        found.cases.append(
            case.model_copy(update={"files": {n: f"{part}:{k}" for n, k in files.items()}})
        )
    found.blobs = {f"{part}:{k}": v for k, v in blobs.items()}
    return found


def write(path: Path, cases: Sequence[tuple[FitnessCase, Mapping[str, str]]]) -> None:
    """A corpus file of these cases (each with its files' texts by path)."""
    blobs: dict[str, str] = {}
    entries: list[dict[str, Any]] = []
    for case, texts in cases:
        files: dict[str, str] = {}
        for name, text in sorted(texts.items()):
            key = f"{len(blobs)}" if text not in blobs.values() else _key_of(blobs, text)
            blobs.setdefault(key, text)
            files[name] = key
        body = case.model_dump(mode="json", exclude={"files", "base", "part"})
        entries.append({"case": body, "files": files})
    data = json.dumps({"version": VERSION, "blobs": blobs, "cases": entries}, sort_keys=True)
    atomic_write_bytes(path, lzma.compress(data.encode("utf-8"), preset=9 | lzma.PRESET_EXTREME))


def _key_of(blobs: Mapping[str, str], text: str) -> str:
    return next(k for k, v in blobs.items() if v == text)


def texts(case: FitnessCase, blobs: Mapping[str, str]) -> dict[str, str]:
    """The case's files' texts by path (as `write` takes them)."""
    return {name: blobs[key] for name, key in case.files.items()}


def materialise(case: FitnessCase, blobs: Mapping[str, str], dest: Path) -> list[str]:
    """The case's files written under dest (plain paths only, checked by `read`); its paths."""
    for name, text in texts(case, blobs).items():
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return sorted(case.files)


def _plain(name: str) -> bool:
    """A relative path below the case's folder, outside any .git."""
    pure = PurePosixPath(name)
    parts = pure.parts
    return (
        bool(parts)
        and not pure.is_absolute()
        and not any(p in ("", ".", "..") or p.lower() == ".git" for p in parts)
    )
