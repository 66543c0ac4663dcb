"""A gap's signature: what it looks like now, so history can tell a changed gap from the same one."""

from __future__ import annotations

import hashlib

from domain import Diagnostic, Gap, IterationRecord, Tool


def identity(d: Diagnostic) -> tuple[str, str, str]:
    """What makes two findings the same kind of finding: tool, file (a test's node id), rule.

    Messages play no part: they quote names and numbers an honest fix changes.
    """
    if d.tool == Tool.PYTEST:
        return (d.tool.value, d.node_id or d.file, d.rule)
    return (d.tool.value, d.file, d.rule)


def gap_signature(gap: Gap) -> str:
    """What the gap looks like now: findings (not lines), inbox bytes and arrival, roadmap text."""
    parts = sorted("|".join(identity(d)) for d in gap.evidence)
    if gap.inbox is not None:
        parts.append(gap.inbox.sha256)
        parts.append(gap.inbox.received_at.isoformat())  # dropped again: asked again
    if gap.roadmap is not None:
        parts.append(gap.roadmap.text)
    return hashlib.sha256("\n".join([gap.key, *parts]).encode("utf-8")).hexdigest()[:16]


def record_signature(record: IterationRecord) -> str:
    """The signature of the gap a record planned ("" when the record carries neither)."""
    if record.gap_signature:
        return record.gap_signature
    return gap_signature(record.plan.gap) if record.plan is not None else ""
