"""The contracts modules satisfy by shape, and the path globs both sides read alike.

The module host checks every module it loads against these Protocols and the
contract version; the kernel validates every answer it gets back against the domain.
A plan's allowed and protected paths are globs: the planner derives them with the same
matcher the guard applies (kept here, in protected code, since it decides what lands).
Nothing here imports modules/ or another kernel file (the module host loads this file alone).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import datetime
from functools import lru_cache
from typing import Protocol, runtime_checkable

from domain import (
    AgentContext,
    AgentPrompt,
    AgentReport,
    AnalysisInput,
    DaemonStatus,
    Gap,
    GapReport,
    HistoryDigest,
    HistoryListing,
    InboxItem,
    InboxText,
    IterationPlan,
    IterationRecord,
    MetricsSnapshot,
    ProjectState,
    RunResult,
    RunSpec,
)

CONTRACT_VERSIONS: dict[str, int] = {
    "analyzer": 1,
    "ranker": 1,
    "planner": 1,
    "agent": 1,
    "reporter": 1,
    "inbox_reader": 1,
}
"""The version of each contract this kernel speaks; a module must declare the same."""

HOST_PROTOCOL = 1
"""Version of the JSON-lines protocol between the kernel and the module host."""


@runtime_checkable
class Analyzer(Protocol):
    """Turns measurements, inbox items or roadmap text into gaps (judgement, no I/O)."""

    name: str
    contract_version: int

    def analyze(self, inputs: AnalysisInput) -> Sequence[Gap]:
        """The gaps this analyser sees."""
        ...


@runtime_checkable
class InboxReader(Protocol):
    """Reads one inbox task's text (front matter and body); the kernel checks the item it returns."""

    contract_version: int

    def read(self, task: InboxText) -> InboxItem:
        """The task, or a ValueError whose message says why the file is set aside."""
        ...


@runtime_checkable
class Ranker(Protocol):
    """Orders the analysers' gaps into one GapReport, most critical first."""

    contract_version: int

    def rank(self, gaps: Sequence[Gap], inputs: AnalysisInput) -> GapReport:
        """The ranked report."""
        ...


@runtime_checkable
class Planner(Protocol):
    """GapReport + history + state -> one IterationPlan, or None when there is nothing to do;
    and the agent's prompt for a plan."""

    contract_version: int

    def plan(
        self,
        report: GapReport,
        records: Sequence[IterationRecord],
        state: ProjectState,
    ) -> IterationPlan | None:
        """The plan for the next iteration."""
        ...

    def prompt(self, plan: IterationPlan) -> AgentPrompt:
        """The agent's prompt for the plan as the kernel runs it (after the kernel's clamp)."""
        ...


@runtime_checkable
class Agent(Protocol):
    """Turns a plan into one run spec and reads the run's output. The kernel runs it."""

    name: str
    contract_version: int
    executable: str
    """The program that must be on PATH for this backend to be available ("" for built-ins)."""
    sources: tuple[str, ...]
    """Gap sources the backend can take; ("*",) for any."""

    def run_spec(self, plan: IterationPlan, context: AgentContext) -> RunSpec | None:
        """The process to start, or None when this backend only writes plans."""
        ...

    def parse(self, plan: IterationPlan, result: RunResult) -> AgentReport:
        """What the run achieved, in the agent's own words and numbers."""
        ...


@runtime_checkable
class Reporter(Protocol):
    """Renders for people: report.md, history/README.md, the html dashboard, the text of `status`
    and `history`, and the Prometheus metrics page."""

    contract_version: int

    def render_record(self, record: IterationRecord) -> str:
        """report.md for one iteration."""
        ...

    def render_index(self, digest: HistoryDigest) -> str:
        """history/README.md: the latest iterations (newest first), totals, the halt, quarantined gaps."""
        ...

    def render_dashboard(self, digest: HistoryDigest) -> str:
        """history/index.html: one self-contained page (inline SVG charts, no network)."""
        ...

    def render_status(self, status: DaemonStatus, now: datetime) -> str:
        """The text `seed.py status` prints (now: for "for 3m12s" and "ago")."""
        ...

    def render_listing(self, listing: HistoryListing) -> str:
        """The text `seed.py history` prints: newest first, then a summary line."""
        ...

    def render_metrics(self, snapshot: MetricsSnapshot) -> str:
        """The Prometheus text exposition (0.0.4) that `run --metrics-port` serves."""
        ...


PERSONS_FILES: tuple[str, ...] = (
    "**/.gitattributes",
    "**/.lfsconfig",
    "**/.gitmodules",
    "inbox/**",
    "ROADMAP.md",
)
"""Paths no agent may change that people edit while the daemon runs: what makes a checkout
write other bytes than the blobs (attributes, LFS, submodules), the task inbox, and the
roadmap (the kernel ticks a landed item itself)."""

ALWAYS_PROTECTED: tuple[str, ...] = (
    "seed.py",
    "VISION.md",
    "kernel/**",
    "history/**",
    ".git/**",
    "seed.toml",
    *PERSONS_FILES,
)
"""Paths no agent may change, whatever the config says."""


@lru_cache(maxsize=1024)
def _compile(pattern: str) -> re.Pattern[str]:
    pattern = pattern.strip().removeprefix("./")
    pattern = pattern.rstrip("/")
    if pattern.endswith("/**"):
        pattern = pattern[:-3]  # "dir/**" covers dir itself too: see the suffix below
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    body = "".join(out)
    # a plain directory name covers everything below it
    # DOTALL and \Z: a file name with a line break in it is still under its folder
    return re.compile(f"^{body}(?:/.*)?\\Z", re.DOTALL)


def matches(path: str, pattern: str) -> bool:
    """Whether a repository-relative POSIX path matches a glob (`**` spans directories)."""
    return bool(_compile(pattern).match(path.lstrip("/")))


def matches_any(path: str, patterns: Iterable[str]) -> bool:
    """Whether the path matches one of the globs."""
    return any(matches(path, p) for p in patterns)


def protected_patterns(configured: Iterable[str]) -> tuple[str, ...]:
    """The always-protected paths plus the configured ones."""
    return tuple(dict.fromkeys((*ALWAYS_PROTECTED, *configured)))
