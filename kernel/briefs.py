"""Briefs: records as planning reads them, without their plans (kept in the record index)."""

from __future__ import annotations

from domain import IterationRecord
from kernel.signature import record_signature

BRIEF_FAILURES = 20
"""Failures a brief keeps (the planner quotes a few; a run that broke hundreds needs no more)."""
BRIEF_DETAILS = 1
"""Failures of a brief that keep their traceback text (the planner quotes the first)."""
BRIEF_DETAIL_CHARS = 1200
"""Traceback text kept per failure in a brief."""


def brief_of(record: IterationRecord) -> IterationRecord:
    """The record without its plan and ranking, failures and their tracebacks capped, the
    planned gap's signature filled in."""
    failures = tuple(
        d.model_copy(update={"detail": d.detail[:BRIEF_DETAIL_CHARS] if i < BRIEF_DETAILS else ""})
        for i, d in enumerate(record.failures[:BRIEF_FAILURES])
    )
    return record.model_copy(
        update={
            "plan": None,
            "ranking": (),
            "failures": failures,
            "gap_signature": record_signature(record),
        }
    )
