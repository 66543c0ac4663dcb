"""Declarative pydantic models shared by the kernel and the modules (no I/O)."""

from __future__ import annotations

from domain.agents import AgentReport, RunResult, RunSpec
from domain.diagnostics import Diagnostic, Executed, Measurement, Measurements, Tampering
from domain.enums import (
    ActionType,
    CheckName,
    FailureCategory,
    GapCategory,
    IterationOutcome,
    Priority,
    Risk,
    Severity,
    TaskKind,
    Tool,
)
from domain.gaps import Gap, GapRef, GapReport, InboxItem, InboxText, RoadmapItem, gap_ref
from domain.history import (
    DaemonNote,
    EventNote,
    GenerationNote,
    HaltNote,
    HistoryDigest,
    HistoryRow,
    HistoryTotals,
    RankedGap,
)
from domain.inputs import AgentContext, AnalysisInput
from domain.plans import (
    ITERATION_ID_PATTERN,
    AcceptanceCriterion,
    AgentPrompt,
    AttemptNote,
    IterationPlan,
    PlanBudget,
    PlanDocument,
    PlannedAction,
)
from domain.records import (
    AgentRound,
    Candidate,
    CriterionVerdict,
    DiffStat,
    Event,
    IterationRecord,
    ModelTurn,
)
from domain.state import OutcomeTally, PortfolioAgent, ProjectState
from domain.status import DaemonStatus, QueuedTask
from domain.views import HistoryLine, HistoryListing, MetricsSnapshot, PhaseTotal

__all__ = [
    "ITERATION_ID_PATTERN",
    "AcceptanceCriterion",
    "ActionType",
    "AgentContext",
    "AgentPrompt",
    "AgentReport",
    "AgentRound",
    "AnalysisInput",
    "AttemptNote",
    "Candidate",
    "CheckName",
    "CriterionVerdict",
    "DaemonNote",
    "DaemonStatus",
    "Diagnostic",
    "DiffStat",
    "Event",
    "EventNote",
    "Executed",
    "FailureCategory",
    "Gap",
    "GapCategory",
    "GapRef",
    "GapReport",
    "GenerationNote",
    "HaltNote",
    "HistoryDigest",
    "HistoryLine",
    "HistoryListing",
    "HistoryRow",
    "HistoryTotals",
    "InboxItem",
    "InboxText",
    "IterationOutcome",
    "IterationPlan",
    "IterationRecord",
    "Measurement",
    "Measurements",
    "MetricsSnapshot",
    "ModelTurn",
    "OutcomeTally",
    "PhaseTotal",
    "PlanBudget",
    "PlanDocument",
    "PlannedAction",
    "PortfolioAgent",
    "Priority",
    "ProjectState",
    "QueuedTask",
    "RankedGap",
    "Risk",
    "RoadmapItem",
    "RunResult",
    "RunSpec",
    "Severity",
    "Tampering",
    "TaskKind",
    "Tool",
    "gap_ref",
]
