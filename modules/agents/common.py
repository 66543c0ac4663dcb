"""What the CLI adapters share: the round's prompt, the prompt as an argument, options,
reading JSON out of logs."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, cast

from domain import AgentContext, AgentReport, FailureCategory, IterationPlan, RunResult, RunSpec
from modules.quoting import quote

PROMPT_ARG_LIMIT = 100_000
"""Bytes of prompt passed as one argument; Linux refuses a single argument over 128 KiB."""

POINTER_PROMPT = "Your task is in the file {prompt_file}. Read it first, then carry it out."


def _refusal(context: AgentContext) -> str:
    return (
        f"## Round {context.round}: the kernel refused your change\n\n"
        "Your change is still in the working tree (with the kernel's own formatting repairs). "
        "The kernel judged it and refused it; its evidence:\n\n"
        + quote(f"refusal before round {context.round}", context.feedback)
        + "\n\nFix what the evidence names, in the same working tree, within the files you may "
        "change. Do not start over, and do not weaken tests to get past it.\n"
    )


def prompt_for(plan: IterationPlan, context: AgentContext, *, resumes: bool) -> str:
    """The prompt of one run, from the planner's prompt in the plan: the whole prompt on the
    first round; on a repair round the refusal's evidence, alone when the tool continues its
    own session (it still has the task), after the whole prompt when it starts afresh."""
    prompt = plan.prompt
    if context.round <= 1 or not context.feedback:
        return prompt.text
    if not resumes:
        return prompt.text + "\n" + _refusal(context)
    return (
        f"# Task {plan.iteration_id}, round {context.round}\n\n"
        + _refusal(context)
        + (f"\n## How to check it yourself\n\n{prompt.checks}\n" if prompt.checks else "")
        + "\n## Rules\n\n"
        + prompt.rules
    )


def prompt_argument(prompt: str) -> str:
    """The prompt as one argv item; a very long one is replaced by a pointer to {prompt_file}."""
    return prompt if len(prompt.encode("utf-8")) <= PROMPT_ARG_LIMIT else POINTER_PROMPT


def option_int(context: AgentContext, key: str, default: int = 0) -> int:
    """An integer backend option from seed.toml (the default when absent or malformed)."""
    value = context.options.get(key, default)
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def option_str(context: AgentContext, key: str) -> str:
    """A string backend option from seed.toml ("" when absent)."""
    value = context.options.get(key, "")
    return value if isinstance(value, str) else ""


def option_list(context: AgentContext, key: str) -> tuple[str, ...]:
    """A list-of-strings backend option from seed.toml."""
    value = context.options.get(key, [])
    if not isinstance(value, list | tuple):
        return ()
    return tuple(str(v) for v in cast(Sequence[Any], value))


def plan_files(plan: IterationPlan) -> tuple[str, ...]:
    """The files the plan names (targets of its actions, then the gap's files), without repeats."""
    seen: dict[str, None] = {}
    for action in plan.actions:
        for name in action.target_files:
            seen.setdefault(name, None)
    for name in plan.gap.files:
        seen.setdefault(name, None)
    return tuple(n for n in seen if n and not n.startswith("-") and "*" not in n)


def output_text(result: RunResult) -> str:
    """Everything the run printed that the kernel kept: the log, and the tail if the log was cut."""
    text = result.output or result.output_tail
    if result.output and result.output_bytes > len(result.output.encode("utf-8", "replace")):
        text = result.output + "\n" + result.output_tail
    return text


def json_objects(text: str) -> Iterator[dict[str, Any]]:
    """Every JSON object that starts at the beginning of a line (JSONL or pretty-printed)."""
    decoder = json.JSONDecoder()
    position = 0
    length = len(text)
    while position < length:
        start = text.find("{", position)
        if start < 0:
            return
        if start > 0 and text[start - 1] != "\n":
            position = text.find("\n", start)
            if position < 0:
                return
            continue
        try:
            value, end = decoder.raw_decode(text, start)
        except ValueError:
            position = start + 1
            continue
        if isinstance(value, dict):
            yield cast(dict[str, Any], value)
        position = end


def quoted(text: str, key: str) -> list[str]:
    """Each `"key":value` of the output's JSON, verbatim as the tool printed it, whose value
    is set (not null, false, 0, or empty): evidence the kernel finds in its own log."""
    decoder = json.JSONDecoder()
    found: list[str] = []
    needle = f'"{key}":'
    start = text.find(needle)
    while start >= 0 and len(found) < _QUOTES:
        value_at = start + len(needle)
        while value_at < len(text) and text[value_at] == " ":
            value_at += 1
        try:
            value, end = decoder.raw_decode(text, value_at)
        except ValueError:
            end = value_at
        else:
            if value not in (None, False, 0, "", [], {}):
                found.append(text[start:end][:QUOTE_CHARS])
        start = text.find(needle, max(end, start + 1))
    return found


def matching_lines(text: str, pattern: re.Pattern[str]) -> list[str]:
    """The output's lines that match, verbatim (stripped), the first few."""
    lines = [line.strip() for line in text.splitlines() if pattern.search(line)]
    return [line[:QUOTE_CHARS] for line in dict.fromkeys(lines) if line][:_QUOTES]


QUOTE_CHARS = 500
"""Characters of one quoted refusal."""
_QUOTES = 5
"""Refusals quoted at most."""
REFUSED = re.compile(
    r"\b(401|403)\b.*\b(unauthori[sz]ed|forbidden)\b|invalid (x-)?api[ _-]?key|"
    r"authentication (failed|error)|permission denied by|maximum (number of )?turns",
    re.IGNORECASE,
)
"""Lines in any tool's output that say it could not work: an auth error, a turn limit."""


def as_int(value: object) -> int:
    """A non-negative int from a JSON number (0 for anything else)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    return max(int(value), 0)


def as_float(value: object) -> float:
    """A non-negative float from a JSON number (0.0 for anything else)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    return max(float(value), 0.0)


def as_dict(value: object) -> dict[str, Any]:
    """The value if it is a JSON object, else {}."""
    return cast(dict[str, Any], value) if isinstance(value, dict) else {}


def as_list(value: object) -> list[Any]:
    """The value if it is a JSON array, else []."""
    return cast(list[Any], value) if isinstance(value, list) else []


def tail_lines(text: str, count: int = 15, limit: int = 2000) -> str:
    """The last non-empty lines of some output, for a summary."""
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    return "\n".join(lines[-count:])[-limit:]


@dataclass(frozen=True)
class Usage:
    """What a run used, as the tool reports it."""

    tokens_used: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float = 0.0
    turns: int = 0
    model: str = ""
    version: str = ""


def report(
    success: bool,
    summary: str,
    usage: Usage | None = None,
    category: FailureCategory | None = None,
) -> AgentReport:
    """An AgentReport carrying the run's usage."""
    used = usage or Usage()
    return AgentReport(
        success=success,
        failure_category=None if success else (category or FailureCategory.AGENT_ERROR),
        summary=summary[:4000],
        tokens_used=used.tokens_used,
        input_tokens=used.input_tokens,
        output_tokens=used.output_tokens,
        cached_tokens=min(used.cached_tokens, used.input_tokens),
        cost_usd=used.cost_usd,
        turns=used.turns,
        model=used.model,
        version=used.version,
    )


def failure(summary: str, usage: Usage | None = None) -> AgentReport:
    """An AGENT_ERROR report keeping whatever usage the run showed."""
    return report(False, summary, usage)


def timed_out(result: RunResult, tool: str) -> AgentReport | None:
    """The report for a run the kernel ended at its timeout (None when it did not time out)."""
    if not result.timed_out:
        return None
    return report(
        False, f"{tool} was still running at the timeout", category=FailureCategory.AGENT_TIMEOUT
    )


class CliAgent:
    """What every CLI preset shares: contract fields, the run spec's shape, the timeout rule.

    A subclass builds its argv in run_spec (returning self.spec(...)) and reads its tool's
    output in read; parse applies the timeout rule first.
    """

    name = ""
    executable = ""
    contract_version = 1
    sources: tuple[str, ...] = ("*",)
    note = ""
    """What the record should say about this tool's reporting."""
    versioned = True
    """The tool answers --version (mini does not)."""
    home: tuple[str, ...] = ()
    """The tool's login and configuration files under HOME, shown to it inside the sandbox."""

    def spec(
        self,
        prompt: str,
        argv: Sequence[str],
        env: dict[str, str] | None = None,
        artifacts: tuple[str, ...] = (),
        *,
        resumes: bool = False,
    ) -> RunSpec:
        """The run spec for this tool (resumes: it continues its own earlier session)."""
        return RunSpec(
            argv=tuple(argv),
            env=env or {},
            prompt=prompt,
            version_argv=(self.executable, "--version") if self.versioned else (),
            note=self.note,
            artifacts=artifacts,
            home=self.home,
            resumes=resumes,
        )

    def read(self, text: str, result: RunResult) -> AgentReport:
        """The tool's own reading of a run that ended by itself."""
        raise NotImplementedError

    def session_of(self, text: str) -> str:
        """The tool's session id in its output ("" when it reports none)."""
        return ""

    def refusals(self, text: str) -> list[str]:
        """What the tool refused or could not do, quoted from its output (auth errors, turn
        limits by default; a tool with a structured shape says more)."""
        return matching_lines(text, REFUSED)

    def parse(self, plan: IterationPlan, result: RunResult) -> AgentReport:
        """The timeout rule, then the tool's output, with the session id and the refusals it
        reported."""
        text = output_text(result)
        found = timed_out(result, self.name) or self.read(text, result)
        update: dict[str, object] = {"refusals": tuple(self.refusals(text))}
        session = self.session_of(text)
        if session:
            update["session"] = session[:200]
        return found.model_copy(update=update)


def first_string(text: str, key: str, kind: str = "") -> str:
    """The first string value of `key` in the output's JSON objects (of a `type`, if given)."""
    for obj in json_objects(text):
        value = obj.get(key)
        if isinstance(value, str) and value and (not kind or obj.get("type") == kind):
            return value
    return ""
