"""opencode: `opencode run --format json`; JSONL events, cost and tokens on every step_finish."""

from __future__ import annotations

import json
import re

from domain import AgentContext, AgentReport, IterationPlan, RunResult, RunSpec
from modules.agents.common import (
    CliAgent,
    Usage,
    as_dict,
    as_float,
    as_int,
    failure,
    first_string,
    json_objects,
    matching_lines,
    option_list,
    option_str,
    prompt_argument,
    prompt_for,
    report,
    tail_lines,
)

_ERROR_EVENT = re.compile(r'^\{"type":\s*"error"')
"""opencode run --format json's error events."""


def read_output(text: str, exit_code: int | None) -> AgentReport:
    """Sum part.cost and part.tokens over step_finish events; an error event or exit 1 fails."""
    inputs = outputs = cached = total = steps = 0
    cost = 0.0
    errors: list[str] = []
    texts: list[str] = []
    for event in json_objects(text):
        kind = event.get("type")
        part = as_dict(event.get("part"))
        if kind == "step_finish":
            steps += 1
            cost += as_float(part.get("cost"))
            tokens = as_dict(part.get("tokens"))
            cache = as_dict(tokens.get("cache"))
            prompt = (
                as_int(tokens.get("input")) + as_int(cache.get("read")) + as_int(cache.get("write"))
            )
            out = as_int(tokens.get("output")) + as_int(tokens.get("reasoning"))
            inputs += prompt
            outputs += out
            cached += as_int(cache.get("read"))
            total += as_int(tokens.get("total")) or prompt + out
        elif kind == "text" and isinstance(part.get("text"), str):
            texts.append(str(part["text"]))
        elif kind == "error":
            error = as_dict(event.get("error"))
            data = as_dict(error.get("data"))
            errors.append(f"{error.get('name', 'error')}: {data.get('message', '')}")
    usage = Usage(
        tokens_used=total,
        input_tokens=inputs,
        output_tokens=outputs,
        cached_tokens=cached,
        cost_usd=round(cost, 6),
        turns=steps,
    )
    if errors:
        return failure(f"opencode exited {exit_code}: {errors[-1]}", usage)
    if exit_code != 0:
        return failure(f"opencode exited {exit_code}: {tail_lines(text, 6)}", usage)
    return report(True, texts[-1] if texts else "", usage)


PROVIDER = "seed"
"""The provider seed defines in OPENCODE_CONFIG_CONTENT for [agent] api_base."""


def provider_config(api_base: str, model: str) -> str:
    """opencode config content: one OpenAI-compatible provider at api_base serving the model
    (its key read from OPENAI_API_KEY by opencode's {env:...} substitution, never written here)."""
    config = {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            PROVIDER: {
                "npm": "@ai-sdk/openai-compatible",
                "name": PROVIDER,
                "options": {"baseURL": api_base, "apiKey": "{env:OPENAI_API_KEY}"},
                "models": {model: {"name": model}},
            }
        },
    }
    return json.dumps(config)


class OpencodeAgent(CliAgent):
    """opencode run with permissions approved (--auto), JSON events on stdout."""

    name = "opencode"
    executable = "opencode"
    home = (".config/opencode", ".local/share/opencode", ".local/state/opencode")
    note = "opencode reports cost 0 for models it has no price for: then [agent.prices] applies"

    def run_spec(self, plan: IterationPlan, context: AgentContext) -> RunSpec:
        """opencode run --format json --auto [-m PROVIDER/MODEL] MESSAGE; a repair round adds
        --session SESSION_ID (its database is under the private HOME the iteration keeps)."""
        resumes = bool(context.resume) and context.round > 1
        prompt = prompt_for(plan, context, resumes=resumes)
        # without --auto, `run` rejects every permission that would ask (edits included)
        argv = [self.executable, "run", "--format", "json", "--auto"]
        if resumes:
            argv += ["--session", context.resume]
        api_base = option_str(context, "api_base")
        env: dict[str, str] = {}
        if api_base:
            # the model is the server's own name for it, served by seed's provider entry
            model = context.model.removeprefix(f"{PROVIDER}/") or "default"
            env["OPENCODE_CONFIG_CONTENT"] = provider_config(api_base, model)
            env["OPENCODE_DISABLE_MODELS_FETCH"] = "1"  # no models.dev catalogue download
            argv += ["-m", f"{PROVIDER}/{model}"]
        elif context.model:
            argv += ["-m", context.model]
        argv += option_list(context, "extra_args")
        argv.append(prompt_argument(prompt))
        return self.spec(prompt, argv, env, resumes=resumes)

    def refusals(self, text: str) -> list[str]:
        """Its error events, verbatim (an API or auth error)."""
        return matching_lines(text, _ERROR_EVENT) or super().refusals(text)

    def session_of(self, text: str) -> str:
        """sessionID, which every JSON event carries."""
        return first_string(text, "sessionID")

    def read(self, text: str, result: RunResult) -> AgentReport:
        """Read the JSONL events."""
        return read_output(text, result.exit_code)


AGENT = OpencodeAgent()
