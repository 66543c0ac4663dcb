"""The plan-only backend: writes the plan and marks the gap as waiting for an agent."""

from __future__ import annotations

from domain import AgentContext, AgentReport, IterationPlan, RunResult, RunSpec


class NoAgent:
    """Never runs anything."""

    name = "none"
    contract_version = 1
    executable = ""
    sources: tuple[str, ...] = ("*",)

    def run_spec(self, plan: IterationPlan, context: AgentContext) -> RunSpec | None:
        """Nothing to run: the kernel records the plan as WAITING."""
        return None

    def parse(self, plan: IterationPlan, result: RunResult) -> AgentReport:
        """Never called (nothing ran)."""
        return AgentReport(success=False, summary="no agent ran")


AGENT = NoAgent()
