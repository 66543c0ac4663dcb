"""mini-swe-agent: `mini -y --exit-immediately -t TASK -o TRAJECTORY`; the trajectory says how it went."""

from __future__ import annotations

import json
from typing import Any

from domain import AgentContext, AgentReport, FailureCategory, IterationPlan, RunResult, RunSpec
from modules.agents.common import (
    CliAgent,
    Usage,
    as_dict,
    as_float,
    as_int,
    as_list,
    failure,
    option_int,
    option_list,
    option_str,
    prompt_argument,
    prompt_for,
    report,
    tail_lines,
)

TRAJECTORY = "trajectory.json"


def usage_of(trajectory: dict[str, Any]) -> Usage:
    """Cost and calls from info.model_stats; tokens summed over the saved model responses."""
    info = as_dict(trajectory.get("info"))
    stats = as_dict(info.get("model_stats"))
    inputs = outputs = cached = 0
    for message in as_list(trajectory.get("messages")):
        response = as_dict(as_dict(as_dict(message).get("extra")).get("response"))
        usage = as_dict(response.get("usage"))
        inputs += as_int(usage.get("prompt_tokens"))
        outputs += as_int(usage.get("completion_tokens"))
        cached += as_int(as_dict(usage.get("prompt_tokens_details")).get("cached_tokens"))
    model = as_dict(as_dict(info.get("config")).get("model")).get("model_name", "")
    version = info.get("mini_version")
    return Usage(
        tokens_used=inputs + outputs,
        input_tokens=inputs,
        output_tokens=outputs,
        cached_tokens=cached,
        cost_usd=as_float(stats.get("instance_cost")),
        turns=as_int(stats.get("api_calls")),
        model=str(model) if model else "",
        version=f"mini-swe-agent {version}" if isinstance(version, str) and version else "",
    )


def _last_words(trajectory: dict[str, Any]) -> str:
    messages = [as_dict(m) for m in as_list(trajectory.get("messages"))]
    for message in reversed(messages):
        extra = as_dict(message.get("extra"))
        if extra.get("exception_str"):
            return str(extra["exception_str"])
        if message.get("role") == "assistant" and isinstance(message.get("content"), str):
            return str(message["content"])
    return ""


def read_trajectory(raw: str, output: str, exit_code: int | None) -> AgentReport:
    """Submitted is success; LimitsExceeded and the rest are failures, whatever the exit code."""
    try:
        trajectory = as_dict(json.loads(raw)) if raw.strip() else {}
    except json.JSONDecodeError:
        trajectory = {}
    if not trajectory:
        return failure(f"mini exited {exit_code} and left no trajectory: {tail_lines(output, 8)}")
    usage = usage_of(trajectory)
    info = as_dict(trajectory.get("info"))
    status = str(info.get("exit_status", "")) or "unknown"
    words = str(info.get("submission", "")).strip() or _last_words(trajectory)
    if status == "Submitted" and exit_code == 0:
        return report(True, words, usage)
    summary = f"mini exit_status {status} (exit {exit_code}): {words}"
    if status == "TimeExceeded":
        return report(False, summary, usage, FailureCategory.AGENT_TIMEOUT)
    return failure(summary, usage)


class MiniAgent(CliAgent):
    """mini-swe-agent in yolo mode; model and API base from seed.toml (local servers work)."""

    name = "mini"
    executable = "mini"
    home = (".config/mini-swe-agent",)
    note = "mini exits 0 on LimitsExceeded: seed reads info.exit_status from the trajectory"
    versioned = False

    def run_spec(self, plan: IterationPlan, context: AgentContext) -> RunSpec:
        """mini -y --exit-immediately -t TASK -o {run_dir}/trajectory.json [-m MODEL] [-l COST]."""
        # mini-swe-agent has no way to continue a run: a repair round starts afresh with the
        # whole task and the refusal
        prompt = prompt_for(plan, context, resumes=False)
        argv = [self.executable, "-y", "--exit-immediately", "-t", prompt_argument(prompt)]
        argv += ["-o", "{run_dir}/" + TRAJECTORY]
        if context.model:
            argv += ["-m", context.model]
        # -l is mini's cost limit (0 disables it); there is no step-limit flag
        argv += ["-l", f"{plan.budget.max_cost_usd:g}"]
        argv += option_list(context, "extra_args")
        env = {
            "MSWEA_CONFIGURED": "true",  # else a first-run setup wizard waits for input
            "MSWEA_SILENT_STARTUP": "1",
            "MSWEA_COST_TRACKING": "ignore_errors",  # an unpriced model must not end the run
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # never fetch litellm's price map
        }
        turns = option_int(context, "max_turns")
        if turns > 0:
            env["MSWEA_GLOBAL_CALL_LIMIT"] = str(turns)
        api_base = option_str(context, "api_base")
        if api_base:
            env["OPENAI_BASE_URL"] = api_base
            env["OPENAI_API_BASE"] = api_base
        return self.spec(prompt, argv, env=env, artifacts=(TRAJECTORY,))

    def read(self, text: str, result: RunResult) -> AgentReport:
        """Read the trajectory the run left in {run_dir}."""
        return read_trajectory(result.artifacts.get(TRAJECTORY, ""), text, result.exit_code)


AGENT = MiniAgent()
