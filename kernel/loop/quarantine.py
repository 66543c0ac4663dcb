"""Quarantine: a gap that keeps failing is skipped until it, its files, or a person's ask changes.

Quarantined: the latest attempts at a gap, as it is now, failed 3 times in a row, or twice
with the same category (a real one: never "none") and evidence. What is quarantined is kept in history/quarantine.json
for `status`; an inbox task that is quarantined moves to inbox/failed/.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, cast

from domain import Gap, GapReport, IterationOutcome, IterationRecord
from kernel.fsutil import atomic_write_text
from kernel.host.context import Context
from kernel.isolation import gitops
from kernel.records import inbox
from kernel.records.halt import FAILED_OUTCOMES, UNJUDGED
from kernel.records.signature import gap_signature, record_signature

FilesDigest = Callable[[str, Sequence[str]], str]
"""(commit, paths) -> a digest of those paths at that commit."""


def tree_digest(root: Path) -> FilesDigest:
    """A FilesDigest reading blob ids from git (memoised: quarantine asks about few commits)."""
    seen: dict[tuple[str, tuple[str, ...]], str] = {}

    def digest(commit: str, files: Sequence[str]) -> str:
        key = (commit, tuple(sorted(files)))
        if key not in seen:
            result = gitops.git(root, "ls-tree", "-r", "-z", commit, "--", *key[1], check=False)
            seen[key] = hashlib.sha256(result.stdout).hexdigest() if result.ok else commit
        return seen[key]

    return digest


def _asks_again(gap: Gap, report: GapReport, since: datetime) -> str:
    """An inbox item dropped after `since` that names this gap (its key or its title)."""
    for other in report.gaps:
        item = other.inbox
        if item is None or other.key == gap.key or item.received_at <= since:
            continue
        text = f"{item.title}\n{item.body}".lower()
        if gap.key.lower() in text or (len(gap.title) >= 8 and gap.title.lower() in text):
            return item.name
    return ""


def quarantine_reason(
    gap: Gap,
    history: Sequence[IterationRecord],
    report: GapReport | None = None,
    digest: FilesDigest | None = None,
    head: str = "",
) -> str:
    """Why this gap is skipped now ('' when it is not).

    Quarantined: the latest attempts at the gap, as it is now (same findings, same bytes
    of its files), failed 3 times in a row, or twice with the same category and evidence.
    A change to the gap or its files, or an inbox item naming it, lifts the quarantine.
    """
    signature = gap_signature(gap)
    files = tuple(gap.files)
    now_files = digest(head, files) if digest is not None and files and head else ""
    streak: list[IterationRecord] = []
    for record in reversed(history):
        if record.gap.key != gap.key:
            continue
        if record.outcome in UNJUDGED:
            continue
        if record.outcome not in FAILED_OUTCOMES:
            break
        if record_signature(record) != signature:
            break  # the gap changed since: earlier failures say nothing about it now
        if (
            now_files
            and record.base
            and digest is not None
            and digest(record.base, files) != now_files
        ):
            break  # its files changed since
        streak.append(record)
    reason = ""
    if len(streak) >= 3:
        reason = f"failed {len(streak)} times in a row ({', '.join(r.iteration_id for r in reversed(streak[:3]))})"
    elif (
        len(streak) >= 2
        # a failure with no category (an agent or tool that failed without saying why) says
        # nothing about the gap: twice alike needs the failures' own category
        and streak[0].failure_category is not None
        and streak[0].failure_category == streak[1].failure_category
        and streak[0].evidence == streak[1].evidence
    ):
        category = streak[0].failure_category
        reason = (
            f"failed twice with the same category ({category.value}) "
            f"and evidence ({streak[1].iteration_id}, {streak[0].iteration_id})"
        )
    if reason and report is not None and _asks_again(gap, report, streak[0].ended_at):
        return ""
    return reason


def quarantine(
    report: GapReport,
    records: Sequence[IterationRecord],
    digest: FilesDigest | None = None,
    head: str = "",
) -> dict[str, str]:
    """Every gap of the report that is quarantined, with the reason."""
    out: dict[str, str] = {}
    for gap in report.gaps:
        reason = quarantine_reason(gap, records, report, digest, head)
        if reason:
            out[gap.key] = reason
    return out


def quarantined(
    report: GapReport,
    records: Sequence[IterationRecord],
    digest: FilesDigest | None = None,
    head: str = "",
) -> tuple[str, ...]:
    """Keys of the gaps that failed 3 times in a row, or twice alike, and have not changed since."""
    return tuple(sorted(quarantine(report, records, digest, head)))


QUARANTINE_FILE = "quarantine.json"


def read_quarantine(ctx: Context) -> dict[str, str]:
    """Quarantined gap keys and why, as the last analysis found them (for `status`)."""
    path = ctx.paths.history / QUARANTINE_FILE
    with contextlib.suppress(OSError, ValueError):
        data = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(data, dict):
            return {str(k): str(v) for k, v in cast(dict[str, Any], data).items()}
    return {}


def publish_quarantine(ctx: Context, reasons: dict[str, str]) -> None:
    """Persist the quarantine and its reasons, and say what changed (events, daemon.log)."""
    before = read_quarantine(ctx)
    if before != reasons:
        atomic_write_text(
            ctx.paths.history / QUARANTINE_FILE,
            json.dumps(reasons, indent=2, sort_keys=True) + "\n",
        )
    for key in sorted(set(reasons) - set(before)):
        ctx.store.event("quarantine", f"{key} quarantined: {reasons[key]}", gap=key)
        ctx.log(f"quarantined {key}: {reasons[key]} (skipped until it or its files change)")
    for key in sorted(set(before) - set(reasons)):
        ctx.store.event("quarantine_lifted", f"{key} is no longer quarantined", gap=key)


def apply_quarantine(
    ctx: Context, report: GapReport, history: Sequence[IterationRecord], head: str
) -> dict[str, str]:
    """The quarantine of this analysis: judged, kept in quarantine.json, said in the log, and
    the inbox tasks of quarantined gaps moved to inbox/failed/."""
    reasons = quarantine(report, history, tree_digest(ctx.paths.root), head)
    publish_quarantine(ctx, reasons)
    _fail_queued(ctx, report, tuple(sorted(reasons)))
    return reasons


def _fail_queued(ctx: Context, report: GapReport, held: tuple[str, ...]) -> list[str]:
    """Move queued inbox items whose gap is quarantined to inbox/failed/ with a result note."""
    moved: list[str] = []
    for gap in report.gaps:
        if gap.key not in held or gap.inbox is None:
            continue
        records = ctx.store.for_gaps([gap.key], per_gap=20)
        note = inbox.result_note(
            gap.inbox.name,
            "FAILED",
            "quarantined: it failed repeatedly and has not changed since",
            [(r.iteration_id, r.outcome.value, r.reason) for r in records],
        )
        with contextlib.suppress(OSError):
            inbox.fail_queued(ctx.paths.inbox, gap.inbox.name, note)
            moved.append(gap.inbox.name)
            ctx.log(f"inbox/{gap.inbox.name} moved to inbox/failed/: its gap is quarantined")
    return moved


def waiting(
    report: GapReport,
    records: Sequence[IterationRecord],
    waited_on: str,
    blocked: Callable[[IterationRecord], bool] = lambda record: True,
) -> set[str]:
    """Gaps already planned and waiting for an agent (on what still holds: the same backend,
    sandbox and api_base, `loop.waited_on`), for a person (KEPT), on a pull request or pushed
    branch (PROPOSED), or for the person's checkout
    (`blocked` says whether a blocked record still waits), unchanged since."""
    out: set[str] = set()
    for gap, record in latest_records(report, records):
        if record.blocked_by:
            # one blocker, one payment: no agent runs for it again while it holds
            if blocked(record):
                out.add(gap.key)
        elif (
            (record.outcome == IterationOutcome.WAITING and record.waited_on == waited_on)
            # kept for a person to approve: another agent run would only keep it again
            or record.outcome == IterationOutcome.KEPT
            # its fix waits in an open pull request or on a pushed branch (or was merged there
            # and is not yet in this checkout: a second PR would only repeat it)
            or record.outcome == IterationOutcome.PROPOSED
            or (record.outcome == IterationOutcome.SUCCESS and bool(record.pull_request))
        ):
            out.add(gap.key)
    return out


def latest_records(
    report: GapReport, records: Sequence[IterationRecord]
) -> list[tuple[Gap, IterationRecord]]:
    """Each reported gap with its latest record, when that record is of the gap as it is now."""
    latest: dict[str, IterationRecord] = {}
    for record in records:
        latest[record.gap.key] = record
    return [
        (gap, latest[gap.key])
        for gap in report.gaps
        if gap.key in latest and record_signature(latest[gap.key]) == gap_signature(gap)
    ]
