"""The general adapter: any program that follows the command contract."""

from __future__ import annotations

import json
from typing import Any, cast

from domain import AgentContext, AgentReport, FailureCategory, IterationPlan, RunResult, RunSpec
from modules.agents.common import prompt_for


def read_result_file(result: RunResult) -> dict[str, Any]:
    """The optional JSON the agent wrote to SEED_RESULT_FILE ({} when absent or malformed)."""
    if not result.result_json.strip():
        return {}
    try:
        data = json.loads(result.result_json)
    except json.JSONDecodeError:
        return {}
    return cast(dict[str, Any], data) if isinstance(data, dict) else {}


class CommandAgent:
    """argv from seed.toml; exit 0 means done; SEED_RESULT_FILE carries summary, tokens, cost."""

    name = "command"
    contract_version = 1
    executable = ""
    sources: tuple[str, ...] = ("*",)

    def run_spec(self, plan: IterationPlan, context: AgentContext) -> RunSpec | None:
        """The configured argv (placeholders are the kernel's to fill); a repair round gets the
        whole prompt again with the refusal (SEED_ROUND says which round it is)."""
        if not context.command:
            return None
        return RunSpec(argv=context.command, prompt=prompt_for(plan, context, resumes=False))

    def parse(self, plan: IterationPlan, result: RunResult) -> AgentReport:
        """Exit 0 is success; anything else is AGENT_ERROR."""
        data = read_result_file(result)
        summary = str(data.get("summary", ""))[:4000]
        tokens = data.get("tokens_used", 0)
        cost = data.get("cost_usd", 0.0)
        report = AgentReport(
            success=result.exit_code == 0 and not result.timed_out,
            summary=summary,
            tokens_used=int(tokens) if isinstance(tokens, int | float) and tokens >= 0 else 0,
            cost_usd=float(cost) if isinstance(cost, int | float) and cost >= 0 else 0.0,
        )
        if result.timed_out:
            return report.model_copy(update={"failure_category": FailureCategory.AGENT_TIMEOUT})
        if result.exit_code != 0:
            return report.model_copy(update={"failure_category": FailureCategory.AGENT_ERROR})
        return report


AGENT = CommandAgent()
