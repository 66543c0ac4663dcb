"""The built-in backend with no LLM: `ruff check --fix` on the gap's files with the project's
ruff, and `ruff format` where the project adopted it."""

from __future__ import annotations

from pathlib import Path

from domain import AgentContext, AgentReport, FailureCategory, IterationPlan, RunResult, RunSpec

_PROGRAM = Path(__file__).with_name("ruff_fix_run.py")


class RuffFixAgent:
    """Takes lint and format gaps whose findings ruff can fix safely."""

    name = "ruff-fix"
    contract_version = 1
    executable = ""
    sources: tuple[str, ...] = ("ruff", "ruff-format")

    def run_spec(self, plan: IterationPlan, context: AgentContext) -> RunSpec | None:
        """Run the fixer on the gap's files, or None when ruff cannot fix what the gap holds."""
        gap = plan.gap
        if gap.source not in self.sources or not gap.files:
            return None
        if gap.source == "ruff" and not any(d.fixable for d in gap.evidence):
            return None
        mode = "format" if gap.source == "ruff-format" else "check"
        program = Path(context.seed_home) / "modules" / "agents" / _PROGRAM.name
        return RunSpec(
            argv=(
                context.python,
                str(program),
                "--ruff",
                context.ruff,
                "--mode",
                mode,
                # formatting only where the project adopted ruff format (never on black's)
                *(("--format",) if context.ruff_format else ()),
                "--",
                *gap.files,
            ),
            version_argv=(context.ruff, "--version"),
            note="ruff-fix applies ruff's safe fixes only",
        )

    def parse(self, plan: IterationPlan, result: RunResult) -> AgentReport:
        """Exit 0 is success."""
        if result.timed_out:
            return AgentReport(
                success=False,
                failure_category=FailureCategory.AGENT_TIMEOUT,
                summary="ruff timed out",
            )
        ok = result.exit_code == 0
        return AgentReport(
            success=ok,
            failure_category=None if ok else FailureCategory.AGENT_ERROR,
            summary=result.output_tail.strip()[-2000:]
            or ("ruff fixed the files" if ok else "ruff failed"),
        )


AGENT = RuffFixAgent()
