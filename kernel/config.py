"""seed.toml: pydantic models with a docstring per key; unknown keys are errors, removed
ones are named and ignored."""

from __future__ import annotations

import json
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, cast, get_args

import tomli_w
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from kernel.bounds import CONFIG_MAX_BYTES
from kernel.errors import ConfigError
from kernel.fsutil import atomic_write_bytes
from kernel.terminal import say

CONFIG_NAME = "seed.toml"
WEEK_S = 7 * 24 * 3600.0
"""The longest any timeout or interval may be."""
DAY_S = 24 * 3600.0
MAX_PRICE = 10_000.0
"""The dearest price per million tokens taken (USD)."""
MAX_USD = 1_000_000.0
"""The largest budget taken (USD)."""


BACKENDS = (
    "auto",
    "claude",
    "codex",
    "aider",
    "mini",
    "gemini",
    "opencode",
    "command",
    "ruff-fix",
    "none",
)
"""The backends seed.toml may name (the module server's agents, and auto)."""


def _scalar(annotation: Any) -> type | None:
    """bool, int or float when a field holds one of them (optionally None), else None."""
    kinds = [a for a in (get_args(annotation) or (annotation,)) if a is not type(None)]
    return kinds[0] if len(kinds) == 1 and kinds[0] in (bool, int, float) else None


class _Section(BaseModel):
    model_config = ConfigDict(
        extra="forbid", use_attribute_docstrings=True, frozen=True, allow_inf_nan=False
    )

    @field_validator("*", mode="before")
    @classmethod
    def _strict(cls, value: Any, info: ValidationInfo) -> Any:
        """Numbers and booleans as TOML writes them: "300" is no number, true no 1."""
        kind = _scalar(cls.model_fields[info.field_name or ""].annotation)
        if kind is bool and not isinstance(value, bool):
            raise ValueError("must be true or false")
        if kind in (int, float) and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise ValueError("must be a number" if kind is float else "must be a whole number")
        return value


class ModelPrice(_Section):
    """[agent.prices."MODEL"]: what one model costs, in USD per million tokens."""

    input: float = Field(ge=0, le=MAX_PRICE)
    """USD per million prompt tokens."""
    output: float = Field(ge=0, le=MAX_PRICE)
    """USD per million completion tokens (reasoning included)."""
    cached_input: float | None = Field(default=None, ge=0, le=MAX_PRICE)
    """USD per million prompt tokens read from a cache; unset: the input price."""


DEFAULT_ALLOWED_TOOLS = [
    "Read",
    "Edit",
    "Write",
    "Glob",
    "Grep",
    "Bash(python -m pytest:*)",
    "Bash(pytest:*)",
    "Bash(ruff:*)",
]


class AgentConfig(_Section):
    """[agent]: which coding agent carries plans out, and how it is started."""

    backend: str = "auto"
    """auto, claude, codex, aider, mini, gemini, opencode, command, ruff-fix or none."""
    command: list[str] = Field(default_factory=list[str])
    """argv for backend = "command"; {prompt_file}, {plan_file}, {worktree}, {iteration_id} are substituted."""
    timeout_s: float = Field(default=1800.0, gt=0, le=WEEK_S)
    """Seconds per agent run; the whole process group is killed at the limit."""
    model: str = ""
    """Model name handed to backends that take one."""
    env: list[str] = Field(default_factory=list[str])
    """Names of extra environment variables passed to the agent (in model-only a key variable
    of the backend's tool among them is held by the gateway instead, as if named in keys)."""
    max_log_bytes: int = Field(default=4 * 1024 * 1024, ge=1024, le=1 << 30)
    """Cap on the agent output kept in history/<id>/agent.log."""
    max_turns: int = Field(default=30, ge=0, le=10_000)
    """Agent turns per run where the tool takes a limit (claude --max-turns, mini's model-call
    limit); 0 leaves the tool's own default."""
    stuck_repeats: int = Field(default=8, ge=0, le=1000)
    """Ends a run as STUCK at this many identical model requests in a row through the
    gateway, each answered alike (a retry after an error answer does not count), or as many
    identical tool calls with the same result in a row in the agent's log where the gateway
    does not serve the run; 0: never."""
    stuck_turns: int = Field(default=100, ge=0, le=100_000)
    """Ends a run as STUCK when this many of its turns (model requests through the gateway,
    else tool calls in its log) bring no change to its checkout; 0: never (docs/limits.md)."""
    repair_rounds: int = Field(default=2, ge=0, le=5)
    """More turns the same agent gets in the same worktree when the kernel refuses its change
    (not for a sandbox violation), with the refusal's evidence; each has its own timeout_s."""
    allowed_tools: list[str] = Field(default_factory=lambda: list(DEFAULT_ALLOWED_TOOLS))
    """Tools claude may use without asking (--allowedTools) when seed's sandbox is off (inside
    it claude runs with bypassPermissions); edits are accepted anyway."""
    api_base: str = ""
    """A self-hosted or local model endpoint, in the API the backend speaks (API_OF): codex the
    OpenAI Responses API (http://HOST/v1); claude the Anthropic Messages API (http://HOST, no
    /v1); gemini the Gemini API (http://HOST, no /v1beta); opencode, aider and mini OpenAI chat
    completions (http://HOST/v1, e.g. http://localhost:11434/v1 for Ollama)."""
    extra_args: list[str] = Field(default_factory=list[str])
    """Extra flags for the named backend's command line, placed before the prompt."""
    files: list[str] = Field(default_factory=list[str], max_length=64)
    """Folders (or files) of the agent's own it sees read-only, each by its exact path
    (absolute or ~/...), besides the folder of each file its argv names; never HOME, a
    dot-folder of HOME, a folder holding logins, the checkout or seed's state (docs/command-agents.md)."""
    network: Literal["model-only", "full"] = "model-only"
    """model-only: the agent's sandbox has no network but the kernel's model gateway, which
    forwards to api_base (empty: claude's, codex's or gemini's vendor), adds the keys, records
    every exchange and holds the budget per request (for command, opencode, aider and mini
    only when api_base is set; SEED_MODEL_BASE_URL names it for command). full: the
    agent keeps the whole network, as before (an opt-out, said in status and every report)."""
    keys: list[str] = Field(default_factory=list[str])
    """Names of environment variables holding the model API's keys: the gateway adds them to
    each upstream request and the agent gets a placeholder in their place (with network =
    "full" they are passed through as env is)."""
    prices: dict[str, ModelPrice] = Field(default_factory=dict[str, ModelPrice])
    """Prices by model name for runs whose tool reports no cost (codex, gemini; aider, mini,
    opencode with an unpriced model; claude for a model it has no price for); "*" matches any
    model."""

    @field_validator("files")
    @classmethod
    def _own_paths(cls, value: list[str]) -> list[str]:
        for path in value:
            if not path.startswith(("/", "~/")) or "\0" in path:
                raise ValueError(f"{path!r} is neither an absolute path nor ~/...")
        return value

    @field_validator("backend")
    @classmethod
    def _known_backend(cls, value: str) -> str:
        if value not in BACKENDS:
            raise ValueError(f"not one of {', '.join(BACKENDS)}")
        return value

    @model_validator(mode="after")
    def _endpoint_fits(self) -> AgentConfig:
        """api_base must be an http(s) URL of the shape the chosen backend's API takes."""
        problem = api_base_problem(self.backend, self.api_base)
        if problem:
            raise ValueError(problem)
        if self.backend == "command" and not self.command:
            raise PydanticCustomError("command_unset", 'must be set when backend = "command"', {})
        return self


API_OF = {
    "codex": "the OpenAI Responses API (POST {base}/responses; codex cannot use chat completions)",
    "claude": "the Anthropic Messages API (POST {base}/v1/messages)",
    "gemini": "the Gemini API (POST {base}/v1beta/models/MODEL:streamGenerateContent)",
    "opencode": "OpenAI chat completions (POST {base}/chat/completions)",
    "aider": "OpenAI chat completions (POST {base}/chat/completions)",
    "mini": "OpenAI chat completions (POST {base}/chat/completions)",
}
"""The API each backend that takes [agent] api_base sends its requests to."""

_NO_VERSION_SUFFIX = {"claude": "/v1", "gemini": "/v1beta"}
"""Backends that add the API's version to the base URL themselves."""


def api_base_problem(backend: str, api_base: str) -> str:
    """Why api_base cannot serve this backend ('' when it can, or when it is unset)."""
    if not api_base:
        return ""
    base = api_base.rstrip("/")
    if not base.startswith(("http://", "https://")):
        return f"api_base {api_base!r} is not an http:// or https:// URL"
    if backend in ("ruff-fix", "none"):
        return (
            f"api_base is set but backend {backend!r} takes no model endpoint; backends that "
            f"do: {', '.join(API_OF)}"
        )
    suffix = _NO_VERSION_SUFFIX.get(backend)
    if suffix and base.endswith(suffix):
        api = API_OF[backend].format(base=base[: -len(suffix)])
        return (
            f"api_base {api_base!r} ends in {suffix}, but {backend} adds it itself: it speaks "
            f"{api}; give the server's address without {suffix}"
        )
    return ""


class QualityConfig(_Section):
    """[quality]: how the target's quality tools run."""

    python: str = ""
    """The target's interpreter; default: the target's .venv/bin/python, else the daemon's."""
    pyright_strict: list[str] | None = None
    """Paths pyright checks in strict mode on top of the target's own pyright config.
    Unset: kernel, domain and modules when the target is seed itself, none elsewhere."""
    tools: list[str] | None = None
    """The tools that take part (ruff, ruff-format, pyright, mypy, pytest), exactly. Unset: the ones
    the target configures (pytest always; ruff's syntax and undefined-name rules always)."""
    pytest_args: list[str] = Field(default_factory=list[str])
    """Extra pytest arguments (test selection) for the daemon's test runs."""
    ruff_select: list[str] = Field(default_factory=lambda: ["E4", "E7", "E9", "F"])
    """Rules when the target's ruff configuration selects none (ruff's long-standing defaults,
    whatever the installed ruff's are), or `tools` names ruff for a target with no ruff
    configuration."""
    tool_timeout_s: float = Field(default=900.0, gt=0, le=WEEK_S)
    """Seconds one measurement (a pytest run, a pyright run) may take."""
    test_network: Literal["none", "full"] = "none"
    """The network of seed's test runs: none (the sandbox cuts it; a test failing only for
    want of it is named in `differences`), or full (the host's, for test runs only; an
    agent's run never gets it from this key)."""

    @field_validator("tools")
    @classmethod
    def _known_tools(cls, value: list[str] | None) -> list[str] | None:
        known = ("ruff", "ruff-format", "pyright", "mypy", "pytest")
        unknown = [t for t in value or () if t not in known]
        if unknown:
            raise ValueError(f"unknown tools {unknown}: use {', '.join(known)}")
        return value


RANK_BUCKETS: tuple[str, ...] = (
    "build",
    "inbox:critical",
    "types",
    "lint",
    "format",
    "inbox:high",
    "inbox:normal",
    "inbox:low",
    "inbox",
    "roadmap",
)
"""Names [analysis] order may use: build (failing tests, collection, import and syntax errors),
types (pyright), lint (ruff), format (ruff format), inbox items (all, or of one priority), roadmap."""


class AnalysisConfig(_Section):
    """[analysis]: how gaps are found and ranked."""

    order: list[str] = Field(default_factory=list[str])
    """Gap groups, most urgent first (names from RANK_BUCKETS); groups left out follow in the
    default order. Empty: build, inbox:critical, inbox, types, lint, format, roadmap."""
    incremental: bool = True
    """After a change to some files, ruff and pyright re-check only those (and pyright their
    importers), and pytest re-runs the tests that ran them (see test_map)."""
    full_every: int = Field(default=10, ge=1, le=10_000)
    """At most this many incremental measurements in a row; then a full one."""
    test_map: bool = True
    """Record which project files each test runs (full analyses), to run affected tests first."""
    plain_run: bool = True
    """Run the project's own `python -m pytest` (nothing of seed's, sandboxed) at the first
    analysis and when the test configuration changes, and name in `differences` what its
    outcomes say that seed's run does not."""

    @field_validator("order")
    @classmethod
    def _known_buckets(cls, value: list[str]) -> list[str]:
        unknown = [name for name in value if name not in RANK_BUCKETS]
        if unknown:
            raise ValueError(
                f"unknown group(s) {', '.join(map(repr, unknown))}; valid: {', '.join(RANK_BUCKETS)}"
            )
        if len(set(value)) != len(value):
            raise ValueError("a group is named twice")
        return value


class RiskLimit(_Section):
    """Growth one iteration of a risk class may add."""

    new_files: int = Field(ge=0, le=1_000_000)
    """New files one iteration may add."""
    changed_lines: int = Field(ge=0, le=100_000_000)
    """Inserted plus deleted lines one iteration may change."""


class GrowthConfig(_Section):
    """[guard.growth]: growth limits by the plan's risk class; over them is GROWTH_LIMIT (a halt)."""

    low: RiskLimit = Field(default_factory=lambda: RiskLimit(new_files=5, changed_lines=300))
    """Limits of a low-risk plan (lint and format fixes, test-only changes)."""
    medium: RiskLimit = Field(default_factory=lambda: RiskLimit(new_files=10, changed_lines=800))
    """Limits of a medium-risk plan."""
    high: RiskLimit = Field(default_factory=lambda: RiskLimit(new_files=20, changed_lines=1500))
    """Limits of a high-risk plan (domain models, gaps tried before)."""

    def for_risk(self, risk: str) -> RiskLimit:
        """The limits of one risk class."""
        return {"low": self.low, "medium": self.medium, "high": self.high}[str(risk)]


class GuardConfig(_Section):
    """[guard]: what agents may never change, and how much they may change."""

    protected: list[str] = Field(default_factory=list[str])
    """Globs added to seed.py, VISION.md, kernel/**, history/**, .git/**, seed.toml."""
    growth: GrowthConfig = Field(default_factory=GrowthConfig)
    """Growth limits by risk class ([guard.growth] low, medium, high)."""
    max_file_bytes: int = Field(default=1_000_000, ge=0, le=1 << 40)
    """Largest file an iteration may add or make bigger (bytes; 0: no limit); over it is GROWTH_LIMIT."""
    sandbox: Literal["on", "off"] = "on"
    """Run agents and test runs in the bubblewrap sandbox; "off" opts out (every report says so)."""
    sandbox_memory_mb: int = Field(default=4096, ge=64, le=1 << 20)
    """Memory one sandboxed run may allocate (MiB)."""
    sandbox_max_processes: int = Field(default=4096, ge=16, le=1 << 22)
    """Processes one sandboxed run may have at once (its own pids cgroup; where none can be
    made, RLIMIT_NPROC in a user namespace of its own)."""
    sandbox_tmp_mb: int = Field(default=1024, ge=16, le=1 << 20)
    """Size of a sandboxed run's private /tmp (MiB)."""
    min_free_mb: int = Field(default=256, ge=0, le=1 << 30)
    """Free disk (MiB) below which no iteration starts and the daemon halts: the disk is full."""


class BudgetConfig(_Section):
    """[budget]: limits checked before every agent run; running out halts the daemon."""

    max_cost_usd_per_day: float = Field(default=10.0, ge=0, le=MAX_USD)
    """Spend per UTC day across all iterations (0: no limit). An agent starts only if what was
    spent today plus what its run may cost (max_cost_usd_per_iteration) fits in it."""
    max_iterations_per_day: int = Field(default=100, ge=0, le=1_000_000)
    """Iterations recorded per UTC day, WAITING aside (an agent ran in them or not: a crash
    counts too); 0: no limit."""
    max_cost_usd_per_iteration: float = Field(default=2.0, ge=0, le=MAX_USD)
    """Spend allowed for one iteration (0: no limit); it must still fit in what is left of the
    day's budget before an agent starts."""
    max_tokens_per_iteration: int = Field(default=2_000_000, ge=0, le=10**12)
    """Tokens allowed for one iteration (0: no limit)."""


class GitConfig(_Section):
    """[git]: how the kernel commits and what it keeps."""

    user_name: str = Field(default="", max_length=200)
    """Author name of the kernel's commits ('': the repository's `git config user.name`, else
    seed); the committer is always seed <seed@localhost>."""
    user_email: str = Field(default="", max_length=200)
    """Author email of the kernel's commits ('': the repository's `git config user.email`, else
    seed@localhost)."""
    keep_branches: int = Field(default=10, ge=0, le=100_000)
    """How many seed/kept/* branches of MERGE_BLOCKED iterations are kept."""


class LandingConfig(_Section):
    """[landing]: what lands by itself and what waits for a person."""

    uncovered: Literal["keep", "land"] = "keep"
    """A verified change with lines no passing test ran: "keep" it on a branch for a person
    (`seed.py approve ID` lands it), or "land" it, saying so. ruff-fix's own lint fixes
    land either way."""
    mode: Literal["local", "branch", "pr"] = "local"
    """Where verified work goes: "local" fast-forwards the checkout's branch (or keeps it);
    "branch" pushes it to [forge] remote as seed/<iteration id>, leaving the local branch;
    "pr" pushes it so and opens a pull request on [forge] (docs/forge.md)."""
    merge: Literal["never", "on-green"] = "never"
    """In "pr" mode, who merges seed's pull requests: "never" (a person, on the forge), or
    "on-green": seed, once the forge says every check passed and it may merge ("clean"), the
    head is still the commit seed verified, and the PR is no draft (work for a person)."""


class ForgeConfig(_Section):
    """[forge]: the service the team's repository lives on, for `[landing] mode` "branch"/"pr"."""

    kind: Literal["github"] = "github"
    """The forge's API: "github" (github.com or an Enterprise server's REST API)."""
    api_url: str = Field(default="https://api.github.com", max_length=2048, pattern=r"^https?://")
    """The REST API's base URL (Enterprise: https://HOST/api/v3)."""
    repo: str = Field(default="", max_length=200, pattern=r"^(|[\w.-]+/[\w.-]+)$")
    """owner/name on the forge (empty: read from the remote's URL)."""
    remote: str = Field(default="origin", max_length=200, pattern=r"^[A-Za-z0-9][\w.-]*$")
    """The git remote seed pushes seed/* branches to."""
    token: str = Field(default="GITHUB_TOKEN", max_length=200, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    """The name of the daemon's environment variable holding the forge token (used only by
    the kernel; never given to an agent or a test run)."""


class InboxConfig(_Section):
    """[inbox]: where tasks come from besides files in inbox/."""

    forge_label: str = Field(default="", max_length=50, pattern=r"^[\w .:-]*$")
    """Open issues on [forge] with this label, by an OWNER, MEMBER or COLLABORATOR, become
    inbox tasks (docs/forge.md; empty: none)."""


class DaemonConfig(_Section):
    """[daemon]: how the loop waits."""

    poll_interval_s: float = Field(default=300.0, ge=0.1, le=WEEK_S)
    """Seconds between re-analyses when nothing else wakes the daemon."""
    max_iterations: int = Field(default=0, ge=0, le=10**9)
    """Stop `run` after this many iterations (0: run forever)."""
    limit_backoff_s: float = Field(default=900.0, ge=1.0, le=DAY_S)
    """Seconds the daemon waits after a usage limit whose answer named no reset (docs/limits.md)."""
    limit_scope: Literal["all", "backend"] = "all"
    """What a usage limit pauses: "all" agents, or only the "backend" whose run met it (each
    of its portfolio entries), the portfolio's other backends running meanwhile."""


NOTIFY_EVENTS = ("landed", "kept", "blocked", "halted", "budget", "limited", "stuck", "stopped")
"""What [notify] sends word of (kernel/records/notify.py says when each is sent)."""
NotifyEvent = Literal[
    "landed", "kept", "blocked", "halted", "budget", "limited", "stuck", "stopped"
]


class NotifyConfig(_Section):
    """[notify]: word to a person when the daemon needs them, sent by the kernel (docs/notifications.md)."""

    events: list[NotifyEvent] = Field(default_factory=lambda: list[NotifyEvent](NOTIFY_EVENTS))
    """Which events are sent (default: all)."""
    command: list[str] = Field(default_factory=list[str], max_length=100)
    """argv run outside every sandbox for each event; an item that is exactly {event},
    {iteration} or {message} is replaced (never inside a longer item such as sh -c "...");
    the same values are in SEED_EVENT, SEED_ITERATION and SEED_MESSAGE."""
    webhook: str = Field(default="", max_length=4096)
    """A URL the kernel POSTs each event to as JSON (Slack's `text`; ntfy's `title` and
    `message`); seed.toml is readable by agents, so a URL holding a token goes in webhook_env."""
    webhook_env: str = Field(default="", max_length=200, pattern=r"^(|[A-Za-z_][A-Za-z0-9_]*)$")
    """The name of an environment variable of the daemon's holding the webhook's URL."""
    desktop: bool = False
    """Also show each event on the desktop with notify-send, where it is installed."""
    timeout_s: float = Field(default=5.0, gt=0, le=60)
    """Seconds one send (the command, the POST) may take; the command's group is ended at it."""
    retries: int = Field(default=3, ge=0, le=10)
    """Sends again after a failed one, with a growing pause (5 s, 15 s, 45 s, ...)."""

    @field_validator("webhook")
    @classmethod
    def _http_only(cls, value: str) -> str:
        # the message never quotes the value: the URL may hold a token
        if value and not value.lower().startswith(("http://", "https://")):
            raise ValueError("not an http:// or https:// URL (the value is not shown)")
        return value

    @model_validator(mode="after")
    def _one_webhook(self) -> NotifyConfig:
        if self.webhook and self.webhook_env:
            raise ValueError("set webhook or webhook_env, not both")
        if len(set(self.events)) != len(self.events):
            raise ValueError("an event is named twice in events")
        return self


class CandidateAgent(_Section):
    """[[candidates.agent]]: one entry of the portfolio that tries a gap."""

    backend: str = ""
    """The backend of this entry (as [agent] backend; empty: [agent]'s)."""
    model: str = ""
    """Its model (empty: [agent] model)."""
    extra_args: list[str] | None = None
    """Its extra flags (unset: [agent] extra_args)."""
    weight: int = Field(default=1, ge=1, le=1000)
    """How many of each n candidates this entry takes, relative to the others' weights."""

    @field_validator("backend")
    @classmethod
    def _known_backend(cls, value: str) -> str:
        if value and value not in BACKENDS:
            raise ValueError(f"not one of {', '.join(BACKENDS)} (or empty: [agent]'s)")
        return value


class CandidatesConfig(_Section):
    """[candidates]: how many agent runs try each gap, judged side by side."""

    n: int = Field(default=1, ge=1, le=16)
    """Agent runs per gap, each in its own checkout, sandbox, HOME and repair rounds; the
    kernel lands the best that passes everything (1: one run, as without candidates)."""
    agent: list[CandidateAgent] = Field(default_factory=list[CandidateAgent])
    """The portfolio the n runs are dealt from by weight, in order (empty: n runs of [agent])."""
    parallel: int = Field(default=0, ge=0, le=64)
    """Candidates run at once (0: what the machine holds, by cores and by memory per sandbox)."""
    keep: bool = False
    """Keep every candidate that changed something on `seed/candidates/<id>-c<k>` (else discarded)."""
    first_wins: bool = False
    """Land the first candidate that passes and cancel the rest (cheaper; the choice among
    several is given up)."""
    learn: bool = True
    """With two or more agents in the portfolio, the planner orders them per gap from the
    records (landed per dollar, with exploration); false: dealt in the configured order."""


class ScaleConfig(_Section):
    """[scale]: where agent runs happen: this machine, or a Ray cluster (`pip install seed[ray]`)."""

    engine: Literal["local", "ray"] = "local"
    """"local": agents run here; "ray": each agent run is a Ray task on a worker, its patch
    judged here (the start installs requirements-ray.lock; without it nothing of Ray loads)."""
    address: str = Field(default="", max_length=500)
    """The Ray cluster to join ("ray://host:10001" or "host:6379"); '': a local Ray instance
    that `ray.init()` starts for the run."""
    door: str = Field(default="", max_length=300, pattern=r"^(|\[?[A-Za-z0-9.:-]+\]?:[0-9]{1,5})$")
    """host:port where the kernel's relay door listens for model-only agents on other hosts
    (`kernel/isolation/relay.py`); '': none, such a run goes only to a worker on this machine."""
    worker_cache: str = Field(default="", max_length=4096)
    """Where a worker keeps its clone of each repository and the runs' checkouts, an absolute
    path on the worker ('': ~/.cache/seed/workers of the user Ray runs as there)."""


class Config(_Section):
    """The whole of seed.toml."""

    agent: AgentConfig = Field(default_factory=AgentConfig)
    quality: QualityConfig = Field(default_factory=QualityConfig)
    analysis: AnalysisConfig = Field(default_factory=AnalysisConfig)
    guard: GuardConfig = Field(default_factory=GuardConfig)
    budget: BudgetConfig = Field(default_factory=BudgetConfig)
    git: GitConfig = Field(default_factory=GitConfig)
    landing: LandingConfig = Field(default_factory=LandingConfig)
    daemon: DaemonConfig = Field(default_factory=DaemonConfig)
    candidates: CandidatesConfig = Field(default_factory=CandidatesConfig)
    scale: ScaleConfig = Field(default_factory=ScaleConfig)
    notify: NotifyConfig = Field(default_factory=NotifyConfig)
    forge: ForgeConfig = Field(default_factory=ForgeConfig)
    inbox: InboxConfig = Field(default_factory=InboxConfig)

    @field_validator("forge")
    @classmethod
    def _token_not_the_agents(cls, value: ForgeConfig, info: ValidationInfo) -> ForgeConfig:
        """The forge token's variable is never one the agent or its model gateway is given."""
        agent = info.data.get("agent")
        if isinstance(agent, AgentConfig) and value.token in (*agent.env, *agent.keys):
            raise ValueError(
                f"token names {value.token}, which [agent] env or keys hands the agent: "
                "the forge token is the kernel's alone"
            )
        return value

    @field_validator("notify")
    @classmethod
    def _webhook_not_the_agents(cls, value: NotifyConfig, info: ValidationInfo) -> NotifyConfig:
        """The webhook's variable is never one the agent or its model gateway is given."""
        agent = info.data.get("agent")
        name = value.webhook_env
        if name and isinstance(agent, AgentConfig) and name in (*agent.env, *agent.keys):
            raise ValueError(f"webhook_env names {name}, which [agent] env or keys hands the agent")
        return value


REMOVED: dict[tuple[str, str], str] = {
    ("analysis", "resident_pyright"): "the resident type checker left seed in issue 26: it "
    "did not re-check a one-file change in a tenth of a cold run on every repository measured, "
    "see bench/README.md; pyright runs cold on the changed files and their importers",
    ("analysis", "pyright_memory_mb"): "it was the resident type checker's heap limit",
}
"""Keys seed no longer has, with why: a seed.toml that sets one is read without it, and says so."""


def _removed(raw: dict[str, Any], path: Path) -> list[str]:
    """Take the removed keys out of the raw document; one message per key taken."""
    said: list[str] = []
    for (section, key), why in REMOVED.items():
        table = raw.get(section)
        if isinstance(table, dict) and key in table:
            del cast(dict[str, Any], table)[key]
            said.append(
                f"{path}: key '{section}.{key}' was removed from seed ({why}); it is "
                "ignored, the rest of seed.toml applies: delete the line"
            )
    return said


def _stderr(message: str) -> None:
    say(f"seed: {message}", sys.stderr, flush=True)


UNSHOWN_VALUES = frozenset({"notify.webhook"})
"""Keys whose value may hold a secret (a webhook's token): an error names the key, never the value."""


def _describe(err: Any, path: Path) -> str:
    """One problem: the key, the value given (as TOML writes it) and what is wrong."""
    loc = ".".join(str(part) for part in err["loc"])
    kind = err["type"]
    if kind == "extra_forbidden":
        return f"{path}: unknown key '{loc}'"
    message = str(err["msg"]).removeprefix("Value error, ")
    if kind == "command_unset":
        return f"{path}: key '{loc}.command' = []: {message}"
    if "input" not in err or isinstance(err["input"], dict):
        return f"{path}: key '{loc}': {message}"
    if loc in UNSHOWN_VALUES:
        return f"{path}: key '{loc}': {message}"
    given = json.dumps(err["input"], ensure_ascii=False, default=str)
    given = given if len(given) <= 80 else given[:77] + "..."
    return f"{path}: key '{loc}' = {given}: {message}"


def load_config(path: Path, note: Callable[[str], None] | None = None) -> Config:
    """Read and validate seed.toml; a missing file gives the defaults. A key seed no longer
    has (REMOVED) is left out and named to `note` (None: stderr)."""
    if not path.exists():
        return Config()
    try:
        with path.open("rb") as handle:
            data = handle.read(CONFIG_MAX_BYTES + 1)
        if len(data) > CONFIG_MAX_BYTES:
            raise ConfigError(f"{path}: over {CONFIG_MAX_BYTES} bytes; seed.toml is a few lines")
        raw = tomllib.loads(data.decode("utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    except RecursionError as exc:
        raise ConfigError(f"{path}: not valid TOML: nested too deeply") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not valid UTF-8 (byte {exc.start})") from exc
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from exc
    for message in _removed(raw, path):
        (note or _stderr)(message)
    try:
        return Config.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError("; ".join(_describe(e, path) for e in exc.errors())) from exc


def config_document(config: Config) -> dict[str, Any]:
    """The config as a TOML-ready mapping."""
    return config.model_dump(mode="json", exclude_none=True)


def write_config(path: Path, config: Config) -> None:
    """Write seed.toml atomically (used by `init` only)."""
    atomic_write_bytes(path, tomli_w.dumps(config_document(config)).encode("utf-8"))
