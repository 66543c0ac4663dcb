"""Revision by failure category: how the next plan for a gap differs from the one that failed."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from domain import (
    Diagnostic,
    FailureCategory,
    Gap,
    IterationRecord,
    PlanDocument,
    Tool,
)
from modules.planner.documents import cap, dependency_context
from modules.planner.feedback import Track
from modules.planner.fsport import FileSystemPort

NEVER_RETRIED = (FailureCategory.SANDBOX_VIOLATION,)
"""A gap whose latest attempt ended in one of these is never planned again (the kernel halts)."""
MAX_WIDEN = 10
"""Files an allowlist miss may add to the next plan for the gap, at most."""
_MISS = re.compile(r"^ALLOWLIST_VIOLATION: (?P<path>.+?): outside the plan's allowlist")
REVISED = (
    FailureCategory.TEST_REGRESSION,
    FailureCategory.GAP_NOT_CLOSED,
    FailureCategory.TYPE_ERROR,
    FailureCategory.LINT_ERROR,
    FailureCategory.IMPORT_ERROR,
)
"""Categories with a revision of their own, retried until the gap has failed 3 times in a row."""
OUTPUT_CHARS = 2000


@dataclass(frozen=True)
class Revision:
    """What changes in the next plan for a gap because of how its last attempt failed."""

    category: FailureCategory | None = None
    narrow: bool = False
    """Allow only the gap's own files (no module folder, no test globs) and halve the budget."""
    isolate: bool = False
    """Flaky test: work on the one test alone, with isolation phases."""
    route: str = ""
    documents: tuple[PlanDocument, ...] = ()
    phases: tuple[str, ...] = ()
    """Extra phases appended to the plan's own."""
    note: str = ""
    widen: tuple[str, ...] = ()
    """Files earlier attempts needed outside their allowlist: the next allowlist adds them."""


def missed_files(streak: Sequence[IterationRecord]) -> tuple[str, ...]:
    """Files the guard found outside the allowlist in a gap's failed attempts, first seen first
    (never a forbidden or protected path: those are other findings)."""
    found: list[str] = []
    for record in streak:
        if record.failure_category != FailureCategory.ALLOWLIST_VIOLATION:
            continue
        found += [m.group("path") for line in record.evidence if (m := _MISS.match(line))]
    return tuple(dict.fromkeys(found))[:MAX_WIDEN]


def retries_left(track: Track) -> bool:
    """False when a retry-once category already had its retry (it failed alike twice)."""
    category = track.category
    if category in REVISED or track.latest is None:
        return True
    return track.count(category) < 2


def _findings(record: IterationRecord, tool: Tool) -> list[Diagnostic]:
    return [d for d in record.failures if d.tool == tool]


def _lines(findings: list[Diagnostic]) -> str:
    out: list[str] = []
    for d in findings[:40]:
        where = f"{d.file}:{d.line}" if d.line else d.file
        out.append(f"{where}: {d.rule}: {d.message}".strip())
    return "\n".join(out)


def _test_output(record: IterationRecord) -> tuple[PlanDocument, ...]:
    docs: list[PlanDocument] = []
    for d in _findings(record, Tool.PYTEST)[:3]:
        body = d.detail or f"{d.exc_type}: {d.message}"
        docs.append(
            PlanDocument(
                label=f"output of {d.node_id or d.file} in {record.iteration_id}",
                text=cap(body, OUTPUT_CHARS),
            )
        )
    if not docs and record.evidence:
        docs.append(
            PlanDocument(
                label=f"verifier evidence of {record.iteration_id}",
                text=cap("\n".join(record.evidence[:10]), OUTPUT_CHARS),
            )
        )
    return tuple(docs)


def _ending(record: IterationRecord) -> tuple[PlanDocument, ...]:
    """How a failed agent run ended, in the kernel's words (its exit and last output lines)."""
    if not record.reason:
        return ()
    label = f"how the agent's run ended in {record.iteration_id}"
    return (PlanDocument(label=label, text=cap(record.reason, OUTPUT_CHARS)),)


def _pyright(record: IterationRecord) -> tuple[PlanDocument, ...]:
    touched = set(record.touched_files)
    found = [d for d in _findings(record, Tool.PYRIGHT) if not touched or d.file in touched]
    text = _lines(found) or "\n".join(e for e in record.evidence if "pyright" in e)
    if not text:
        return ()
    return (
        PlanDocument(
            label=f"pyright on the files touched in {record.iteration_id}",
            text=cap(text, OUTPUT_CHARS),
        ),
    )


def _lint(record: IterationRecord) -> tuple[PlanDocument, ...]:
    found = _findings(record, Tool.RUFF) + _findings(record, Tool.RUFF_FORMAT)
    text = _lines(found) or "\n".join(e for e in record.evidence if "ruff" in e)
    if not text:
        return ()
    return (
        PlanDocument(label=f"ruff findings of {record.iteration_id}", text=cap(text, OUTPUT_CHARS)),
    )


def _imports(record: IterationRecord, fs: FileSystemPort) -> tuple[PlanDocument, ...]:
    failures = [
        d
        for d in _findings(record, Tool.PYTEST)
        if d.rule in ("collection-error", "outside-import") or "Import" in d.exc_type
    ]
    docs: list[PlanDocument] = []
    if failures:
        text = "\n\n".join(
            f"{d.node_id or d.file}: {d.message}\n{d.detail}".strip() for d in failures[:3]
        )
        docs.append(
            PlanDocument(
                label=f"import failures of {record.iteration_id}", text=cap(text, OUTPUT_CHARS)
            )
        )
    return (*docs, *dependency_context(fs))


def _ruff_fix_can_take(gap: Gap) -> bool:
    if gap.source == "ruff-format":
        return bool(gap.files)
    return gap.source == "ruff" and bool(gap.files) and any(d.fixable for d in gap.evidence)


def revise(gap: Gap, track: Track, fs: FileSystemPort) -> Revision:
    """The revision for the gap's latest failed attempt (none when it has not failed)."""
    latest = track.latest
    if latest is None:
        return Revision()
    category = latest.failure_category
    name = category.value if category is not None else latest.outcome.value
    where = f"{name} in {latest.iteration_id}"
    if category == FailureCategory.TEST_REGRESSION:
        return Revision(
            category,
            narrow=True,
            documents=_test_output(latest),
            note=f"{where}: scope narrowed to the gap's own files; the failing test's output is attached",
        )
    if category == FailureCategory.GAP_NOT_CLOSED:
        # nothing broke: the change missed the fault, which says nothing against the scope
        return Revision(
            category,
            documents=_test_output(latest),
            note=f"{where}: the gap's tests still failed after the change; scope as before, "
            "what the verifier saw is attached",
        )
    if category == FailureCategory.AGENT_ERROR:
        # a crash says nothing about the scope: the same plan again, with how the run ended
        return Revision(
            category,
            documents=_ending(latest),
            note=f"{where}: the agent failed before its work was judged; retried once, scope as before",
        )
    if category == FailureCategory.STUCK:
        # a loop of the run's own, not evidence about the scope: the same plan, told of the loop
        return Revision(
            category,
            documents=_ending(latest),
            phases=(
                "loops: when a tool call gives the same result twice, or turns change nothing, "
                "change the approach",
            ),
            note=f"{where}: the run went round in circles (one step repeated with no change, "
            "or turns that changed nothing) and was ended; retried once, scope as before",
        )
    if category == FailureCategory.TYPE_ERROR:
        return Revision(
            category,
            documents=_pyright(latest),
            phases=("types: run pyright on every file you touch before you finish",),
            note=f"{where}: pyright's findings on the touched files are attached",
        )
    if category == FailureCategory.LINT_ERROR:
        if _ruff_fix_can_take(gap) and latest.backend != "ruff-fix":
            return Revision(
                category,
                route="ruff-fix",
                note=f"{where}: routed to ruff-fix first (ruff's own safe fixes, no LLM)",
            )
        return Revision(
            category,
            documents=_lint(latest),
            phases=(
                "lint: run `ruff check --fix` and `ruff format` on the files you touch before you finish",
            ),
            note=f"{where}: ruff's findings are attached",
        )
    if category == FailureCategory.IMPORT_ERROR:
        return Revision(
            category,
            documents=_imports(latest, fs),
            phases=(
                "imports: import only modules that exist in the worktree or are declared dependencies",
            ),
            note=f"{where}: the import failures and the declared dependencies are attached",
        )
    if category == FailureCategory.ALLOWLIST_VIOLATION:
        widen = missed_files(track.streak)
        return Revision(
            category,
            widen=widen,
            note=(
                f"{where}: the allowlist now also holds {', '.join(widen)}, which the attempt needed"
                if widen
                else f"{where}: a path the task forbids was changed; retried once"
            ),
        )
    if category == FailureCategory.FLAKY_TEST:
        return Revision(
            category,
            isolate=True,
            narrow=True,
            note=f"{where}: retried once, on the one test in isolation",
        )
    return Revision(
        category,
        narrow=True,
        documents=_test_output(latest) if latest.failures else (),
        note=f"{where}: scope narrowed; retried once",
    )
