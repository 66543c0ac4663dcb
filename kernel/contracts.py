"""The contracts modules satisfy by shape. Nothing here imports modules/.

The module host checks every module it loads against these Protocols and the
contract version; the kernel validates every answer it gets back against the domain.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol, runtime_checkable

from domain import (
    AgentContext,
    AgentReport,
    AnalysisInput,
    DaemonStatus,
    Gap,
    GapReport,
    HistoryDigest,
    HistoryListing,
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
class Ranker(Protocol):
    """Orders the analysers' gaps into one GapReport, most critical first."""

    contract_version: int

    def rank(self, gaps: Sequence[Gap], inputs: AnalysisInput) -> GapReport:
        """The ranked report."""
        ...


@runtime_checkable
class Planner(Protocol):
    """GapReport + history + state -> one IterationPlan, or None when there is nothing to do."""

    contract_version: int

    def plan(
        self,
        report: GapReport,
        records: Sequence[IterationRecord],
        state: ProjectState,
    ) -> IterationPlan | None:
        """The plan for the next iteration."""
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
