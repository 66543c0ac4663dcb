"""What an agent adapter hands the kernel, and what the kernel hands back."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from domain.base import Fact
from domain.enums import FailureCategory


class RunSpec(Fact):
    """One subprocess the kernel will start for an agent.

    argv may use {prompt_file}, {plan_file}, {worktree}, {iteration_id}, {run_dir} and
    {result_file}; the kernel substitutes them.
    """

    argv: tuple[str, ...]
    env: dict[str, str] = Field(default_factory=dict[str, str])
    """Constant variables the adapter needs (never secrets: those come from the config)."""
    prompt: str = ""
    """Text the kernel writes to {prompt_file}."""
    version_argv: tuple[str, ...] = ()
    """A command that prints the tool's version, recorded in the iteration record."""
    note: str = ""
    """Something the record should say about this backend (e.g. its exit code is unreliable)."""
    artifacts: tuple[str, ...] = ()
    """Files the tool writes under {run_dir} (names relative to it, e.g. a trajectory): the
    kernel keeps them in history/<id>/ and hands their text to parse."""
    home: tuple[str, ...] = ()
    """The tool's login and configuration files, relative to HOME (".claude", ".codex"): the
    only ones the sandbox shows the agent, read-write so a rotating token stays valid."""
    resumes: bool = False
    """This run continues the tool's own earlier session (a repair round that kept context)."""
    cannot: str = ""
    """Why the tool cannot work here as things are set up ('' when it can): the kernel waits,
    naming it, instead of paying for a run that cannot succeed."""


class RunResult(Fact):
    """How the agent's process ended, for the adapter to interpret."""

    exit_code: int | None
    timed_out: bool = False
    duration_s: float = 0.0
    output_tail: str = ""
    """The last part of the combined output (the log itself is in history)."""
    output_bytes: int = 0
    log_path: str = ""
    run_dir: str = ""
    result_json: str = ""
    """Contents of SEED_RESULT_FILE if the agent wrote it."""
    output: str = ""
    """The combined output as agent.log kept it (its head when the log was cut at the cap)."""
    artifacts: dict[str, str] = Field(default_factory=dict[str, str])
    """Text of the RunSpec's artifacts that exist, by name (capped)."""


class AgentReport(Fact):
    """The adapter's reading of a run."""

    success: bool
    """The agent believes it is done (the kernel still verifies)."""
    failure_category: FailureCategory | None = None
    summary: str = ""
    tokens_used: int = 0
    """All tokens the run used, as the tool counts them."""
    cost_usd: float = 0.0
    """What the tool says the run cost (0 when it reports no cost: the kernel prices the tokens)."""
    turns: int = 0
    """Model calls or agent steps, as the tool counts them."""
    note: str = ""
    input_tokens: int = 0
    """Prompt tokens, cached ones included."""
    output_tokens: int = 0
    """Completion tokens, reasoning included."""
    cached_tokens: int = 0
    """The part of input_tokens read from a cache."""
    model: str = ""
    """The model the tool says it used ("" when it does not say)."""
    version: str = ""
    """The tool's version when its output carries it (for tools with no --version)."""
    session: str = ""
    """The tool's own session id, when it reports one (a repair round continues it)."""
    refusals: tuple[str, ...] = ()
    """What the tool itself refused or could not do (a permission denial, its sandbox helper
    failing, an auth error, a turn limit), each quoted verbatim from its output: the kernel
    keeps only quotes found in the log it captured (`answers.refusals`)."""
    limited: str = ""
    """The CLI's own structured result says its model answered a usage limit (claude's
    api_error_status 429, codex's turn.failed with a usage-limit error), quoted. The kernel
    believes it only from those adapters, and only where its gateway did not serve the run."""
    limited_until: datetime | None = None
    """When that limit resets, where the CLI's result says it."""
