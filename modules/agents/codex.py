"""OpenAI Codex CLI: `codex exec --json`; JSONL events on stdout, tokens only (no cost)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import PurePosixPath

from domain import AgentContext, AgentReport, IterationPlan, RunResult, RunSpec
from modules.agents.common import (
    CliAgent,
    Usage,
    as_dict,
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

_ACTIONS = ("command_execution", "file_change", "mcp_tool_call", "web_search")
_HELPER = re.compile(
    r"codex-linux-sandbox|\bbwrap: |landlock|could not create PATH aliases", re.IGNORECASE
)
"""codex's own sandbox failing to start (its helper, the bubblewrap it runs, Landlock; 0.169
warns `could not create PATH aliases: Refusing to create helper binaries under temporary dir
"/tmp"` and then runs no command at all)."""
_ERRORS = re.compile(r'^\{"type":\s*"(error|turn\.failed)"')
"""codex exec --json's error events."""

PROVIDER = "seed"
"""The model provider entry seed defines for [agent] api_base."""


def provider_overrides(api_base: str) -> list[str]:
    """-c overrides that send codex to api_base through a provider entry speaking the Responses
    API (codex ignores OPENAI_BASE_URL, and refuses wire_api = "chat"); its key is read from
    OPENAI_API_KEY (list it in [agent] env; any value for a server that checks none)."""
    entry = f"model_providers.{PROVIDER}"
    settings = {
        "model_provider": PROVIDER,
        f"{entry}.name": PROVIDER,
        f"{entry}.base_url": api_base,
        f"{entry}.env_key": "OPENAI_API_KEY",
        f"{entry}.wire_api": "responses",
    }
    argv: list[str] = []
    for key, value in settings.items():
        argv += ["-c", f"{key}={json.dumps(value)}"]
    return argv


def _cannot(context: AgentContext) -> str:
    """codex's own sandbox (seed's is off) runs its helper (codex-linux-sandbox) through links
    it makes under CODEX_HOME, in HOME: under /tmp it refuses to make them (0.169: `Refusing
    to create helper binaries under temporary dir`) and runs no command (older releases ended
    each one `bwrap: execvp codex-linux-sandbox: No such file or directory`)."""
    if context.options.get("sandboxed") is True or not context.home:
        return ""
    home = PurePosixPath(context.home)
    if home == PurePosixPath("/tmp") or PurePosixPath("/tmp") in home.parents:
        return (
            f"with seed's sandbox off, codex runs its own, which cannot set up its helper "
            f"(codex-linux-sandbox) while HOME ({context.home}) is under /tmp; run seed with "
            'HOME elsewhere, or turn seed\'s sandbox on ([guard] sandbox = "on")'
        )
    return ""


_USAGE_LIMIT = re.compile(
    r"usage limit|usage_limit_reached|rate_limit_exceeded|insufficient_quota|\b429 Too Many Requests",
    re.IGNORECASE,
)
"""A turn.failed error that is its model's usage or rate limit (codex's own words for it:
"You've hit your usage limit", or the upstream's 429 as codex quotes it)."""


_TRY_AGAIN = re.compile(
    r"try again at (?:([A-Z][a-z]{2}) (\d{1,2})(?:st|nd|rd|th), (\d{4}) )?(\d{1,2}):(\d{2}) ([AP]M)",
    re.IGNORECASE,
)
"""codex's reset in its limit message, in the local time of its machine (the daemon's): `try
again at 3:15 PM.` today, else `try again at Dec 8th, 2026 1:39 AM.`"""


def reset_of(message: str, now: datetime) -> datetime | None:
    """When codex's limit message says to try again (None when it names no time). codex prints
    the minute, the reset's second cut off: the reset read is the end of that minute."""
    found = _TRY_AGAIN.search(message)
    if found is None:
        return None
    month, day, year, hour, minute, half = found.groups()
    local = now.astimezone()
    try:
        date = (
            datetime.strptime(f"{month} {day} {year}", "%b %d %Y").date() if year else local.date()
        )
        clock = datetime.strptime(f"{hour}:{minute} {half.upper()}", "%I:%M %p").time()
    except ValueError:
        return None
    moment = datetime.combine(date, clock).astimezone()  # naive: the machine's local time
    return (moment + timedelta(minutes=1)).astimezone(UTC)


def read_output(text: str, exit_code: int | None) -> AgentReport:
    """turn.completed carries usage; turn.failed or a non-zero exit is a failure."""
    inputs = cached = outputs = actions = 0
    completed = False
    failed = ""
    last_error = ""
    message = ""
    for event in json_objects(text):
        kind = event.get("type")
        if kind == "turn.completed":
            completed = True
            usage = as_dict(event.get("usage"))
            inputs += as_int(usage.get("input_tokens"))
            cached += as_int(usage.get("cached_input_tokens"))
            outputs += as_int(usage.get("output_tokens"))
        elif kind == "turn.failed":
            failed = str(as_dict(event.get("error")).get("message", "")) or "turn failed"
        elif kind == "error":
            last_error = str(event.get("message", ""))
        elif kind == "item.completed":
            item = as_dict(event.get("item"))
            if item.get("type") == "agent_message":
                message = str(item.get("text", ""))
            elif item.get("type") in _ACTIONS:
                actions += 1
    usage = Usage(
        tokens_used=inputs + outputs,
        input_tokens=inputs,
        output_tokens=outputs,
        cached_tokens=cached,
        turns=actions,
    )
    if failed:
        said = failure(f"codex: turn.failed: {failed}", usage)
        if _USAGE_LIMIT.search(failed):  # codex's own error event, from its model's answer
            until = reset_of(failed, datetime.now(UTC))
            return said.model_copy(update={"limited": said.summary[:400], "limited_until": until})
        return said
    if exit_code != 0 or not completed:
        why = last_error or tail_lines(text, 6)
        return failure(f"codex exited {exit_code} without a completed turn: {why}", usage)
    return report(True, message, usage)


class CodexAgent(CliAgent):
    """codex exec in the worktree; its own sandbox only when seed's is off (the two do not
    nest: seed's bubblewrap sandbox already confines it to the worktree)."""

    name = "codex"
    executable = "codex"
    home = (".codex",)
    note = "codex reports tokens but no cost: cost comes from [agent.prices]"

    def run_spec(self, plan: IterationPlan, context: AgentContext) -> RunSpec:
        """codex exec --json --sandbox MODE -C {worktree} --skip-git-repo-check PROMPT; a repair
        round: ... resume THREAD_ID PROMPT (--sandbox and -C must come before `resume`)."""
        resumes = bool(context.resume) and context.round > 1
        prompt = prompt_for(plan, context, resumes=resumes)
        mode = "danger-full-access" if context.options.get("sandboxed") else "workspace-write"
        argv = [self.executable, "exec", "--json", "--sandbox", mode]
        argv += ["-C", "{worktree}", "--skip-git-repo-check"]
        if context.model:
            argv += ["-m", context.model]
        api_base = option_str(context, "api_base")
        if api_base:
            argv += provider_overrides(api_base)
            # its metrics go to ab.chatgpt.com as it exits; behind the gateway (or a server of
            # the person's) they cannot, and codex waited ~5 s for them at every run's end
            argv += ["-c", 'otel.metrics_exporter="none"']
        argv += option_list(context, "extra_args")
        if resumes:
            argv += ["resume", context.resume]
        argv.append(prompt_argument(prompt))
        spec = self.spec(prompt, argv, resumes=resumes)
        return spec.model_copy(update={"cannot": _cannot(context)})

    def read(self, text: str, result: RunResult) -> AgentReport:
        """Read the JSONL events."""
        return read_output(text, result.exit_code)

    def refusals(self, text: str) -> list[str]:
        """Its own sandbox failing (codex-linux-sandbox, bubblewrap), then the error and
        turn.failed events, verbatim."""
        return matching_lines(text, _HELPER) + matching_lines(text, _ERRORS) or super().refusals(
            text
        )

    def session_of(self, text: str) -> str:
        """thread_id of the thread.started event (a resumed run reports the same id)."""
        return first_string(text, "thread_id", "thread.started")


AGENT = CodexAgent()
