"""The kernel clamps every plan: no protected path, catalogue checks only, limits from config."""

from __future__ import annotations

from collections.abc import Sequence

from domain import AcceptanceCriterion, CheckName, IterationPlan, PlanBudget
from kernel.config import Config
from kernel.gate import ALL_TOOLS
from kernel.globs import matches, matches_any

SELFCHECK_PATHS = ("modules", "domain")
_TOOL_OF: dict[CheckName, str] = {
    CheckName.RUFF: "ruff",
    CheckName.RUFF_FORMAT: "ruff-format",
    CheckName.PYRIGHT: "pyright",
    CheckName.PYTEST: "pytest",
    CheckName.PYTEST_ALL: "pytest",
}


def _touches(patterns: Sequence[str], roots: Sequence[str]) -> bool:
    for pattern in patterns:
        for root in roots:
            if (
                matches(root, pattern)
                or pattern.startswith(root + "/")
                or pattern == root
                or pattern.startswith("**")
            ):
                return True
    return False


def clamp_plan(
    plan: IterationPlan,
    config: Config,
    protected: Sequence[str],
    selfhost: bool,
    tools: Sequence[str] = ALL_TOOLS,
) -> IterationPlan:
    """The plan as the kernel will run it, whatever the planner said."""
    allowed = tuple(
        p
        for p in plan.allowed_paths
        if not matches_any(p.rstrip("/").removesuffix("/**"), protected)
    )
    if plan.allowed_paths and not allowed:
        allowed = ("__nothing__",)  # every allowed path was protected: nothing may change
    actions = tuple(
        a.model_copy(
            update={
                "target_files": tuple(f for f in a.target_files if not matches_any(f, protected))
            }
        )
        for a in plan.actions
    )
    # a check of a tool that takes no part for this target could never pass: leave it out
    criteria = [c for c in plan.criteria if _TOOL_OF.get(c.check, "") in ("", *tools)]
    targets = [f for a in actions for f in a.target_files]
    needs_selfcheck = selfhost and (not allowed or _touches((*allowed, *targets), SELFCHECK_PATHS))
    if needs_selfcheck and not any(c.check == CheckName.SELFCHECK for c in criteria):
        criteria.append(
            AcceptanceCriterion(
                check=CheckName.SELFCHECK, text="the module host boots the changed modules"
            )
        )
    limit = config.guard.growth.for_risk(plan.estimated_risk)
    max_files, max_lines = limit.new_files, limit.changed_lines
    budget = plan.budget
    clamped = PlanBudget(
        timeout_s=min(budget.timeout_s, config.agent.timeout_s),
        max_tokens=min(
            budget.max_tokens or config.budget.max_tokens_per_iteration,
            config.budget.max_tokens_per_iteration,
        ),
        max_cost_usd=min(
            budget.max_cost_usd or config.budget.max_cost_usd_per_iteration,
            config.budget.max_cost_usd_per_iteration,
        ),
        max_new_files=min(budget.max_new_files, max_files),
        max_changed_lines=min(budget.max_changed_lines, max_lines),
    )
    return plan.model_copy(
        update={
            "allowed_paths": allowed,
            "actions": actions,
            "criteria": tuple(criteria),
            "budget": clamped,
        }
    )
