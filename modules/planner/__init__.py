"""The planner: GapReport + history + state -> one IterationPlan."""

from __future__ import annotations

from modules.planner.planner import PLANNER, DefaultPlanner

__all__ = ["PLANNER", "DefaultPlanner"]
