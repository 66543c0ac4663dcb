"""Claude Code headless: `claude -p PROMPT --output-format stream-json --verbose`; one event a
line on stdout as it works (assistant messages with their usage), the result object last."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import PurePosixPath
from typing import Any

from domain import AgentContext, AgentReport, IterationPlan, RunResult, RunSpec
from modules.agents.common import (
    CliAgent,
    Usage,
    as_dict,
    as_float,
    as_int,
    as_list,
    failure,
    first_string,
    json_objects,
    option_int,
    option_list,
    option_str,
    prompt_argument,
    prompt_for,
    quoted,
    report,
    tail_lines,
)


def usage_of(final: dict[str, Any]) -> Usage:
    """Tokens, cost, turns and model from a result object (modelUsage covers sub-agents too).

    A model claude has no price for is marked costBasis "unknown" (its costUSD is a guess at
    a default rate): that part of the cost is left out, so [agent.prices] prices the run."""
    models = as_dict(final.get("modelUsage"))
    cost = as_float(final.get("total_cost_usd"))
    guessed = sum(
        as_float(as_dict(m).get("costUSD"))
        for m in models.values()
        if as_dict(m).get("costBasis") == "unknown"
    )
    if guessed:
        cost = max(round(cost - guessed, 9), 0.0)
    if models:
        per = [as_dict(m) for m in models.values()]
        cached = sum(as_int(m.get("cacheReadInputTokens")) for m in per)
        inputs = cached + sum(
            as_int(m.get("inputTokens")) + as_int(m.get("cacheCreationInputTokens")) for m in per
        )
        outputs = sum(as_int(m.get("outputTokens")) for m in per)
        model = max(models, key=lambda name: as_float(as_dict(models[name]).get("costUSD")))
    else:
        usage = as_dict(final.get("usage"))
        cached = as_int(usage.get("cache_read_input_tokens"))
        inputs = (
            as_int(usage.get("input_tokens"))
            + as_int(usage.get("cache_creation_input_tokens"))
            + cached
        )
        outputs = as_int(usage.get("output_tokens"))
        model = ""
    return Usage(
        tokens_used=inputs + outputs,
        input_tokens=inputs,
        output_tokens=outputs,
        cached_tokens=cached,
        cost_usd=cost,
        turns=as_int(final.get("num_turns")),
        model=str(model),
    )


def _cannot(context: AgentContext, sandboxed: bool) -> str:
    """Outside seed's sandbox claude asks before editing a file it deems sensitive, which is
    every file below a `.git` folder, and in print mode nobody answers: it edits nothing."""
    if sandboxed or ".git" not in PurePosixPath(context.worktree).parts:
        return ""
    return (
        f"with seed's sandbox off, Claude Code refuses every edit below a .git folder (its "
        f"sensitive-file rule), and the checkout is {context.worktree}; set XDG_CACHE_HOME "
        "to a folder outside any .git, or turn seed's sandbox on"
    )


_MESSAGE_EVENT = re.compile(r'^\{"type":\s*"(assistant|user)"')
"""A line of stream-json that carries a message: the model's words or a tool's result."""


def messages_so_far(events: list[dict[str, Any]]) -> Usage:
    """The usage of the assistant messages printed so far (stream-json prints one event per
    content block, each with its message's usage): what a run without a result object used
    so far, as claude reported it (its output counts are those known when each message began)."""
    usage: dict[str, dict[str, Any]] = {}
    model = ""
    for event in events:
        message = as_dict(event.get("message"))
        if event.get("type") == "assistant" and isinstance(message.get("id"), str):
            usage[message["id"]] = as_dict(message.get("usage"))
            model = str(message.get("model") or model)
    cached = sum(as_int(u.get("cache_read_input_tokens")) for u in usage.values())
    inputs = cached + sum(
        as_int(u.get("input_tokens")) + as_int(u.get("cache_creation_input_tokens"))
        for u in usage.values()
    )
    outputs = sum(as_int(u.get("output_tokens")) for u in usage.values())
    return Usage(inputs + outputs, inputs, outputs, cached, turns=len(usage), model=model)


def read_output(text: str, exit_code: int | None) -> AgentReport:
    """Success only for subtype success with is_error false (an API error is success + is_error)."""
    events = list(json_objects(text))
    finals = [o for o in events if o.get("type") == "result"]
    if not finals:
        return failure(
            f"claude exited {exit_code} without a result object: {tail_lines(text)}",
            messages_so_far(events),
        )
    final = finals[-1]
    usage = usage_of(final)
    subtype = str(final.get("subtype", ""))
    is_error = final.get("is_error") is True
    message = final.get("result")
    errors = "; ".join(str(e) for e in as_list(final.get("errors")))
    summary = (message if isinstance(message, str) else "") or errors
    if subtype == "success" and not is_error and exit_code == 0:
        return report(True, summary, usage)
    status = final.get("api_error_status")
    if status == 429 and is_error:  # the CLI's own error result: its message is the CLI's
        return _limited(summary, usage, _reset_of(events))
    return failure(
        f"claude ended with subtype {subtype or '?'}, is_error {str(is_error).lower()}"
        + (f", API status {status}" if status else "")
        + f", exit {exit_code}: {summary}",
        usage,
    )


_RESET = re.compile(r"\|(\d{9,11})\s*$")
"""Claude Code 1.x's limit message ends with the reset in epoch seconds: `...limit reached|1753675200`."""


_LATEST = 253402300799
"""9999-12-31: a reset past it is read as that (the kernel waits a day at most anyway)."""


def _reset_of(events: list[dict[str, Any]]) -> int:
    """The reset (epoch seconds) Claude Code 2.x read from the limit answer's headers: the
    `api_error_params.rate_limit_info` of its own error message, the last assistant message
    before its result (model `<synthetic>`); 0 when it names none. Only that message: what
    the model or a tool wrote is a string inside an event, or came before it."""
    empty: dict[str, Any] = {}
    last = next((e for e in reversed(events) if e.get("type") == "assistant"), empty)
    if last.get("api_error_status") != 429:
        return 0
    info = as_dict(as_dict(last.get("api_error_params")).get("rate_limit_info"))
    if info.get("status") != "rejected":
        return 0
    return as_int(info.get("resetsAt"))


def _limited(message: str, usage: Usage, reset: int = 0) -> AgentReport:
    """A run its model's usage limit ended, as Claude Code's result object says (API status
    429), until the reset its events name (2.x) or its message ends with (1.x)."""
    found = _RESET.search(message)
    reset = reset or (int(found.group(1)) if found else 0)
    until = datetime.fromtimestamp(min(reset, _LATEST), UTC) if reset else None
    said = f"claude: API status 429: {message[:300]}"
    return failure(said, usage).model_copy(update={"limited": said, "limited_until": until})


class ClaudeAgent(CliAgent):
    """Claude Code in print mode: edits accepted, tools and turns limited by seed.toml."""

    name = "claude"
    executable = "claude"
    home = (".claude", ".claude.json", ".config/claude")
    note = (
        "claude reports an API error as is_error true (exit 1), and guesses a cost for a model it "
        "has no price for (costBasis unknown): that cost comes from [agent.prices]"
    )

    def run_spec(self, plan: IterationPlan, context: AgentContext) -> RunSpec:
        """claude -p PROMPT --output-format stream-json --verbose --permission-mode MODE ...
        (stdin closed);
        a repair round continues the first run's session (--resume SESSION_ID, same worktree)."""
        resumes = bool(context.resume) and context.round > 1
        prompt = prompt_for(plan, context, resumes=resumes)
        # the prompt goes right after -p: --allowedTools is variadic and would swallow it
        argv = [self.executable, "-p", prompt_argument(prompt), "--output-format", "stream-json"]
        argv.append("--verbose")  # stream-json needs it in print mode
        if resumes:
            argv += ["--resume", context.resume]
        # seed's worktrees live under .git/, where Claude Code denies every edit as "a
        # sensitive file" in acceptEdits mode, allow rules or not; inside seed's bubblewrap
        # sandbox it may bypass its permission prompts (CLAUDE_CODE_BUBBLEWRAP says where it
        # is, which it requires to bypass them as root)
        sandboxed = context.options.get("sandboxed") is True
        argv += ["--permission-mode", "bypassPermissions" if sandboxed else "acceptEdits"]
        turns = option_int(context, "max_turns")
        if turns > 0:
            argv += ["--max-turns", str(turns)]
        if context.model:
            argv += ["--model", context.model]
        if plan.budget.max_cost_usd > 0:
            argv += ["--max-budget-usd", f"{plan.budget.max_cost_usd:g}"]
        argv += option_list(context, "extra_args")
        tools = option_list(context, "allowed_tools")
        if tools:
            argv += ["--allowedTools", ",".join(tools)]
        env: dict[str, str] = {"CLAUDE_CODE_BUBBLEWRAP": "1"} if sandboxed else {}
        api_base = option_str(context, "api_base")
        if api_base:
            env |= {
                "ANTHROPIC_BASE_URL": api_base.rstrip("/"),
                # a self-hosted endpoint: no retries with backoff (a 401 would be retried for
                # minutes), no side requests (telemetry, a tool-less call before the task)
                "CLAUDE_CODE_MAX_RETRIES": "0",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            }
        spec = self.spec(prompt, argv, env, resumes=resumes)
        return spec.model_copy(update={"cannot": _cannot(context, sandboxed)})

    def read(self, text: str, result: RunResult) -> AgentReport:
        """Read the final result object."""
        return read_output(text, result.exit_code)

    def refusals(self, text: str) -> list[str]:
        """The result object's permission_denials (a tool asked for and refused: print mode
        answers no one), a turn or budget limit's subtype, an API error's status, verbatim;
        never from the messages and tool results it streamed (the files it read are in them)."""
        text = "".join(
            line for line in text.splitlines(keepends=True) if not _MESSAGE_EVENT.match(line)
        )
        found = quoted(text, "permission_denials")
        found += [q for q in quoted(text, "subtype") if '"error_' in q]
        found += quoted(text, "api_error_status")
        return found or super().refusals(text)

    def session_of(self, text: str) -> str:
        """session_id of the result object."""
        return first_string(text, "session_id", "result")


AGENT = ClaudeAgent()
