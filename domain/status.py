"""What `seed.py status` reports about a repository's daemon."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from domain.base import Fact
from domain.history import RankedGap


class QueuedTask(Fact):
    """Where a waiting inbox task stands in the latest ranking."""

    name: str
    """Its file name in inbox/."""
    place: int = 0
    """1 for the next gap the daemon plans; 0 when it is passed over."""
    passed_over: str = ""
    """Why it is passed over (waiting, quarantined), "" when it is queued."""
    ahead_source: str = ""
    """The first gap ahead of it: its source (pytest, pyright, ruff, ...) and title."""
    ahead_title: str = ""
    priority: str = ""
    """Its priority (critical, high, normal, low; "" when not known)."""


class DaemonStatus(Fact):
    """The daemon's state as people and machines read it."""

    root: str
    command: str = "python seed.py"
    """How a person runs seed on this repository, whole (`--root` when it is not seed's own)."""
    running: bool = False
    """A daemon holds the repository's lock."""
    pid: int | None = None
    phase: str = "stopped"
    """analysing, planning, agent running, inspecting, verifying, landing, idle, stopped."""
    phase_detail: str = ""
    phase_since: datetime | None = None
    halted: bool = False
    halt_reason: str = ""
    limited_until: datetime | None = None
    """A usage limit holds until then: no agent runs, and the daemon resumes by itself."""
    limit_reason: str = ""
    limit_backend: str = ""
    """The backend whose run met the limit ('' when the file does not say)."""
    limited_for: str = ""
    """The backends the limit pauses while the portfolio's others run ('' : it holds every
    agent; `[daemon] limit_scope = "backend"`)."""
    config_problem: str = ""
    """Why seed.toml cannot be used ('' when it can): a running daemon keeps the config it
    read before, and nothing starts until it is fixed."""
    backend: str = ""
    backend_reason: str = ""
    sandbox: str = ""
    """How agents and test runs are isolated: on (bubblewrap), off (by seed.toml), or why
    no agent can run."""
    network: str = ""
    """The agent's network: model-only (the kernel's model gateway only), or full and why."""
    network_notes: tuple[str, ...] = ()
    """About the agent's keys and logins: a key [agent] env names that the gateway holds in
    model-only (to move to [agent] keys), a login folder of HOME visible to the agent."""
    tools: tuple[str, ...] = ()
    """Which quality tools take part, one line each, and why (from HEAD's configuration)."""
    land_blocker: str = ""
    """Why the daemon only plans (detached HEAD, no commits, a merge in progress)."""
    last_iteration_id: str | None = None
    last_outcome: str | None = None
    last_uncovered: tuple[str, ...] = ()
    """The last iteration's changed places that no passing test ran."""
    iterations: int = 0
    cost_today_usd: float = 0.0
    held_usd: float = 0.0
    """An agent run's reservation no ledger line counts yet (not in cost_today_usd): the run
    under way, or one a killed daemon left, which the next start settles at this amount."""
    held_by: str = ""
    """The iteration holding it."""
    budget_left_today_usd: float = 0.0
    iterations_today: int = 0
    top_gaps: tuple[RankedGap, ...] = ()
    """The head of the latest ranking (the daemon's last analysis)."""
    quarantined: tuple[str, ...] = ()
    log_tail: tuple[str, ...] = ()
    """Last lines of the running agent's log."""
    gaps_as_of: datetime | None = None
    """When the latest analysis behind top_gaps and open_gaps ran."""
    gaps_stale: str = ""
    """Why those gaps predate the code: a landing after that analysis ('' when none)."""
    open_gaps: dict[str, int] = Field(default_factory=dict[str, int])
    """Open gaps by source at the latest analysis."""
    queue: tuple[QueuedTask, ...] = ()
    """Each waiting inbox task's place in the latest ranking."""
    budget_left_today_iterations: int = 0
    max_cost_usd_per_day: float = 0.0
    max_iterations_per_day: int = 0
    metrics_url: str = ""
    """Where the daemon serves Prometheus metrics ("" when it does not)."""
    type_checker: str = ""
    """Always "": the resident pyright it described left seed (issue 26); kept for module
    trees that still read it."""
    dirty: tuple[str, ...] = ()
    """The checkout's uncommitted and untracked paths (history/ and inbox/ aside)."""
    python: str = ""
    """The interpreter that runs the project's tests."""
    forge: str = ""
    """Where work is proposed ([landing] mode "branch"/"pr", [inbox] forge_label): the remote,
    the forge and its repository, and the token's name with whether it is set ("" when local)."""
    forge_problem: str = ""
    """What the running daemon's last read of the forge could not reach ("" when it answered)."""
    python_reason: str = ""
    """Why that interpreter (quality.python, the repository's .venv, or seed's own)."""
    test_network: str = "none"
    """The network of seed's test runs ([quality] test_network): none or full."""
    differences: tuple[str, ...] = ()
    """How seed's test runs differ from the person's own (the git-ignored files they are
    shown, or why none are): facts to read, never errors and never gaps."""
    setup: tuple[str, ...] = ()
    """Setup problems the latest analysis found (the test environment cannot import the
    project, tests import it from outside the tree), each with what to run: never gaps."""
