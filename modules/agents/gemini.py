"""Gemini CLI headless: `gemini -p PROMPT --output-format json`; errors go to stderr with exit codes."""

from __future__ import annotations

import json
from typing import Any

from domain import AgentContext, AgentReport, IterationPlan, RunResult, RunSpec
from modules.agents.common import (
    CliAgent,
    Usage,
    as_dict,
    as_int,
    failure,
    first_string,
    json_objects,
    option_list,
    option_str,
    prompt_argument,
    prompt_for,
    quoted,
    report,
    tail_lines,
)

EXIT_CODES: dict[int, str] = {
    1: "a general error",
    41: "authentication failed (FatalAuthenticationError)",
    42: "bad input (FatalInputError)",
    44: "its sandbox failed (FatalSandboxError)",
    52: "bad configuration (FatalConfigError)",
    53: "the session turn limit was reached (FatalTurnLimitedError)",
    54: "a tool failed fatally (FatalToolExecutionError)",
    55: "the folder is not trusted (FatalUntrustedWorkspaceError)",
    130: "it was cancelled (FatalCancellationError)",
}
"""gemini's documented exit codes (packages/core/src/utils/exitCodes.ts); all are AGENT_ERROR."""


def usage_of(stats: dict[str, Any]) -> Usage:
    """Tokens and requests summed over stats.models (gemini reports no cost)."""
    models = as_dict(stats.get("models"))
    inputs = outputs = cached = total = requests = 0
    biggest = ("", -1)
    for name, raw in models.items():
        model = as_dict(raw)
        tokens = as_dict(model.get("tokens"))
        prompt = as_int(tokens.get("prompt")) or as_int(tokens.get("input"))
        out = as_int(tokens.get("candidates")) + as_int(tokens.get("thoughts"))
        inputs += prompt
        outputs += out
        cached += as_int(tokens.get("cached"))
        total += as_int(tokens.get("total")) or prompt + out
        requests += as_int(as_dict(model.get("api")).get("totalRequests"))
        if prompt + out > biggest[1]:
            biggest = (str(name), prompt + out)
    return Usage(
        tokens_used=total,
        input_tokens=inputs,
        output_tokens=outputs,
        cached_tokens=cached,
        turns=requests,
        model=biggest[0],
    )


def read_output(text: str, exit_code: int | None) -> AgentReport:
    """The JSON document (stdout on success, stderr on error) and the exit code."""
    docs = [o for o in json_objects(text) if {"response", "error", "stats"} & o.keys()]
    doc = docs[-1] if docs else {}
    usage = usage_of(as_dict(doc.get("stats")))
    error = as_dict(doc.get("error"))
    response = doc.get("response")
    if exit_code == 0 and doc and not error:
        return report(True, str(response) if response else "", usage)
    meaning = EXIT_CODES.get(exit_code or 0, "")
    status = as_int(error.get("code"))
    if not meaning and status >= 400 and exit_code == status % 256:
        meaning = f"the model API answered HTTP {status}"
    elif not meaning and exit_code:
        meaning = f"exit {exit_code} (an HTTP status modulo 256, or a crash)"
    detail = _api_message(str(error.get("message", ""))) if error else tail_lines(text, 6)
    return failure(f"gemini exited {exit_code}: {meaning or 'no result'}: {detail}", usage)


def _api_message(message: str) -> str:
    """The API's own words when gemini quotes its whole JSON error body as the message."""
    try:
        body = json.loads(message)
    except ValueError:
        return message
    inner = as_dict(as_dict(body).get("error")).get("message")
    return inner if isinstance(inner, str) and inner else message


class GeminiAgent(CliAgent):
    """Gemini CLI with every action approved (yolo) in the worktree it trusts for the session."""

    name = "gemini"
    executable = "gemini"
    home = (".gemini",)
    note = "gemini reports tokens but no cost: cost comes from [agent.prices]"

    def run_spec(self, plan: IterationPlan, context: AgentContext) -> RunSpec:
        """gemini -p PROMPT --output-format json --approval-mode=yolo --skip-trust [-m MODEL]; a
        repair round adds --resume SESSION_ID (same worktree, same private HOME)."""
        resumes = bool(context.resume) and context.round > 1
        prompt = prompt_for(plan, context, resumes=resumes)
        argv = [self.executable, "-p", prompt_argument(prompt), "--output-format", "json"]
        if resumes:
            argv += ["--resume", context.resume]
        # an untrusted folder forces the approval mode back to default; --skip-trust trusts it
        argv += ["--approval-mode=yolo", "--skip-trust"]
        if context.model:
            argv += ["-m", context.model]
        argv += option_list(context, "extra_args")
        api_base = option_str(context, "api_base")
        # the key still comes from GEMINI_API_KEY ([agent] env), and ~/.gemini/settings.json
        # must select "gemini-api-key" (with the base URL alone gemini picks an auth type it
        # then refuses: exit 41, "Invalid auth method selected.")
        env = {"GOOGLE_GEMINI_BASE_URL": api_base.rstrip("/")} if api_base else {}
        return self.spec(prompt, argv, env, resumes=resumes)

    def read(self, text: str, result: RunResult) -> AgentReport:
        """Read the JSON document and map the exit code."""
        return read_output(text, result.exit_code)

    def refusals(self, text: str) -> list[str]:
        """The error document's `"error":{...}` as gemini printed it (auth, sandbox, turn limit)."""
        return quoted(text, "error") or super().refusals(text)

    def session_of(self, text: str) -> str:
        """session_id of the JSON document."""
        return first_string(text, "session_id")


AGENT = GeminiAgent()
