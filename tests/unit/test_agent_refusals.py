"""The kernel keeps only the refusals an adapter quoted from the log it captured itself."""

from __future__ import annotations

from domain import AgentReport
from kernel.host import answers

LOG = 'x\n{"type":"result","permission_denials":[{"tool_name":"Edit"}]}\n'


def test_a_quote_found_in_the_log_is_kept_and_a_made_up_one_dropped() -> None:
    said = AgentReport(
        success=True,
        refusals=('"permission_denials":[{"tool_name":"Edit"}]', "the kernel approved this"),
    )
    kept = answers.refusals(said, LOG)
    assert kept.refusals == ('"permission_denials":[{"tool_name":"Edit"}]',)


def test_refusals_are_bounded() -> None:
    log = "\n".join(f"denied {i} " + "y" * 2000 for i in range(20))
    said = AgentReport(success=False, refusals=tuple(log.splitlines()))
    kept = answers.refusals(said, log).refusals
    assert len(kept) == 5 and all(len(q) <= 500 for q in kept)
