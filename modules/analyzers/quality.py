"""Quality gaps from the kernel's diagnostics: failing tests, type errors, lint, format."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from domain import AnalysisInput, Diagnostic, Gap, GapCategory, Measurement, Severity, Tool

_SEVERITY = {
    Tool.PYTEST: Severity.CRITICAL,
    Tool.PYRIGHT: Severity.HIGH,
    Tool.RUFF: Severity.NORMAL,
    Tool.RUFF_FORMAT: Severity.LOW,
}


def _where(d: Diagnostic) -> str:
    return f"{d.file}:{d.line}" if d.line else d.file


def _pytest_gaps(measurement: Measurement) -> list[Gap]:
    gaps: list[Gap] = []
    if not measurement.ran:
        what = "timed out" if measurement.timed_out else "could not run"
        gaps.append(
            Gap(
                key="pytest:run",
                category=GapCategory.QUALITY,
                source="pytest",
                severity=Severity.CRITICAL,
                title=f"the test suite {what}",
                description=measurement.error[-1000:],
            )
        )
    for d in measurement.diagnostics:
        if d.rule == "collection-error":
            key, title = f"pytest:collect:{d.file}", f"{d.file} cannot be collected: {d.message}"
        elif d.rule == "outside-import":
            key, title = f"pytest:outside-import:{d.file}", d.message
        else:
            key, title = f"pytest:{d.node_id}", f"{d.node_id} {d.rule}: {d.message}"
        files = tuple(dict.fromkeys(f for f in (d.file, d.frame_file) if f))
        gaps.append(
            Gap(
                key=key,
                category=GapCategory.QUALITY,
                source="pytest",
                severity=Severity.CRITICAL,
                title=title[:200],
                description=d.detail or d.message,
                files=files,
                evidence=(d,),
            )
        )
    return gaps


def _grouped_gaps(measurement: Measurement) -> list[Gap]:
    groups: dict[tuple[str, str], list[Diagnostic]] = defaultdict(list)
    for d in measurement.diagnostics:
        groups[(d.file, d.rule)].append(d)
    gaps: list[Gap] = []
    source = measurement.tool.value
    for (file, rule), items in sorted(groups.items()):
        first = items[0]
        count = f" ({len(items)}x)" if len(items) > 1 else ""
        if measurement.tool == Tool.RUFF_FORMAT:
            key, title = f"{source}:{file}", f"{file} is not formatted"
        else:
            key, title = f"{source}:{file}:{rule}", f"{rule} in {file}{count}: {first.message}"
        gaps.append(
            Gap(
                key=key,
                category=GapCategory.QUALITY,
                source=source,
                severity=Severity.HIGH if rule == "invalid-syntax" else _SEVERITY[measurement.tool],
                title=title[:200],
                description="\n".join(f"{_where(d)}: {d.rule} {d.message}" for d in items[:50]),
                files=(file,) if file else (),
                evidence=tuple(items),
            )
        )
    return gaps


class QualityAnalyzer:
    """Turns every quality measurement into gaps."""

    name = "quality"
    contract_version = 1

    def analyze(self, inputs: AnalysisInput) -> Sequence[Gap]:
        """One gap per failing test, per (file, rule) of ruff and pyright, per unformatted file."""
        gaps: list[Gap] = []
        for measurement in inputs.measurements.items:
            if measurement.tool == Tool.PYTEST:
                gaps.extend(_pytest_gaps(measurement))
            elif (
                measurement.tool in (Tool.RUFF, Tool.RUFF_FORMAT, Tool.PYRIGHT) and measurement.ran
            ):
                gaps.extend(_grouped_gaps(measurement))
        return gaps


ANALYZER = QualityAnalyzer()
