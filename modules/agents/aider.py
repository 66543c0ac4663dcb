"""Aider: one `--message-file` exchange; human text on stdout with a `Tokens: ... Cost: ...` line."""

from __future__ import annotations

import re

from domain import AgentContext, AgentReport, IterationPlan, RunResult, RunSpec
from modules.agents.common import (
    CliAgent,
    Usage,
    failure,
    matching_lines,
    option_list,
    option_str,
    plan_files,
    prompt_for,
    report,
    tail_lines,
)

_COUNT = r"[\d.]+k?"
USAGE_LINE = re.compile(
    rf"Tokens: (?P<sent>{_COUNT}) sent"
    rf"(?:, (?P<write>{_COUNT}) cache write)?"
    rf"(?:, (?P<hit>{_COUNT}) cache hit)?"
    rf", (?P<received>{_COUNT}) received\."
    r"(?:\s*Cost: \$(?P<message>[\d.]+) message, \$(?P<session>[\d.]+) session\.)?"
)
"""aider's usage report (base_coder.calculate_and_show_tokens_and_cost)."""
API_ERROR = re.compile(
    r"^(litellm\.\w+(?:Error|Timeout)\b.*(?:\n(?!The API provider|litellm\.)\S.*)*"
    r"|The API provider .*"
    r"|Model .* has hit a token limit!.*)$",
    re.MULTILINE,
)
"""How aider reports a failed model call (it still exits 0); aider wraps a long error line,
so the lines that follow it up to a blank one belong to it."""
_MODEL = re.compile(r"^Model: (\S+)", re.MULTILINE)
_VERSION = re.compile(r"^Aider v(\d[\w.]*)", re.MULTILINE)
_NOISE = re.compile(
    r"^(Tokens:|Cost:|Aider v|Model:|Git repo:|Repo-map:|Added |Analytics |Applied edit to "
    r"|Update git (name|email) with:|Warning: Input is not a terminal"
    r"|HTTPSConnectionPool\(|Failed to .*model_prices_and_context_window)"
)
"""aider's own lines around the model's reply: banner, usage, git hints, and the failed
price-map fetch and terminal warning it prints when run offline and headless."""


def count(text: str | None) -> int:
    """aider's rounded token count back to a number ("2.3k" -> 2300)."""
    if not text:
        return 0
    if text.endswith("k"):
        return round(float(text[:-1]) * 1000)
    return round(float(text))


_ERROR_LINE = re.compile(r"^litellm\.\w+(Error|Timeout)\b")
"""The first line of a failed model call, as aider prints it."""


def read_output(text: str, exit_code: int | None) -> AgentReport:
    """Usage from every Tokens line; failure when aider printed a model error or no usage at all."""
    inputs = outputs = cached = turns = 0
    cost = 0.0
    for match in USAGE_LINE.finditer(text):
        turns += 1
        hit = count(match["hit"])
        inputs += count(match["sent"]) + hit
        cached += hit
        outputs += count(match["received"])
        if match["session"]:
            cost = float(match["session"])  # the session figure is cumulative
    model = _MODEL.search(text)
    version = _VERSION.search(text)
    usage = Usage(
        tokens_used=inputs + outputs,
        input_tokens=inputs,
        output_tokens=outputs,
        cached_tokens=cached,
        cost_usd=cost,
        turns=turns,
        model=model[1] if model else "",
        version=f"aider {version[1]}" if version else "",
    )
    errors = [" ".join(m[0].split()) for m in API_ERROR.finditer(text)]
    if exit_code != 0:
        return failure(f"aider exited {exit_code}: {tail_lines(text, 6)}", usage)
    if errors:
        return failure(f"aider exited 0 but the model call failed: {' '.join(errors[-3:])}", usage)
    if not turns:
        return failure(
            f"aider exited 0 without reporting token usage (no model reply): {tail_lines(text, 6)}",
            usage,
        )
    reply = "\n".join(line for line in text.splitlines() if not _NOISE.match(line))
    return report(True, tail_lines(reply), usage)


class AiderAgent(CliAgent):
    """aider on the plan's files, never committing; side files kept out of the worktree."""

    name = "aider"
    executable = "aider"
    home = (".aider.conf.yml", ".aider.model.settings.yml", ".aider.model.metadata.json", ".aider")
    note = "aider exits 0 even when the model API fails: seed reads its output and relies on the verifier"

    def run_spec(self, plan: IterationPlan, context: AgentContext) -> RunSpec:
        """aider --message-file {prompt_file} --yes-always --no-auto-commits ... FILES."""
        argv = [self.executable, "--message-file", "{prompt_file}", "--yes-always"]
        argv += ["--no-auto-commits", "--no-dirty-commits", "--no-gitignore"]
        argv += ["--no-pretty", "--no-stream", "--no-check-update", "--analytics-disable"]
        argv += ["--no-show-model-warnings", "--no-show-release-notes"]
        # no repository map: its tags cache (.aider.tags.cache.v4/) would be written into the
        # worktree, outside any plan's allowlist; the plan names the files aider gets
        argv += ["--map-tokens", "0"]
        argv += ["--input-history-file", "{run_dir}/aider.input.history"]
        argv += ["--chat-history-file", "{run_dir}/aider.chat.history.md"]
        # aider has no session id: a repair round reloads the iteration's own chat history
        resumes = context.round > 1
        if resumes:
            argv.append("--restore-chat-history")
        if context.model:
            argv += ["--model", context.model]
        api_base = option_str(context, "api_base")
        if api_base:
            # a self-hosted model is unknown to aider, which would then ask for whole files
            argv += ["--openai-api-base", api_base, "--edit-format", "diff"]
        argv += option_list(context, "extra_args")
        argv += plan_files(plan)
        prompt = prompt_for(plan, context, resumes=resumes)
        env = {
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # never fetch litellm's price map
            # aider sends the chat's files in the order of a set of their paths: with a fixed
            # hash seed that order is the same run to run, so a replay asks what was recorded
            "PYTHONHASHSEED": "0",
            # a git identity: without one aider writes a placeholder into the repository's
            # .git/config, which the sandbox shows read-only (aider then crashes); it never
            # commits here, so the identity is never used
            "GIT_CONFIG_COUNT": "2",
            "GIT_CONFIG_KEY_0": "user.name",
            "GIT_CONFIG_VALUE_0": "aider (seed)",
            "GIT_CONFIG_KEY_1": "user.email",
            "GIT_CONFIG_VALUE_1": "aider@seed.invalid",
        }
        return self.spec(prompt, argv, env, artifacts=("aider.chat.history.md",), resumes=resumes)

    def read(self, text: str, result: RunResult) -> AgentReport:
        """Read the human text for usage and API errors."""
        return read_output(text, result.exit_code)

    def refusals(self, text: str) -> list[str]:
        """The first line of each model error aider printed (`litellm.AuthenticationError: ...`)."""
        return matching_lines(text, _ERROR_LINE) or super().refusals(text)


AGENT = AiderAgent()
