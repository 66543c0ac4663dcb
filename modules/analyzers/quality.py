"""Quality gaps from the kernel's diagnostics: failing tests, type errors, lint, format.

Keys (stable across runs, independent of line numbers):
  pytest:run                    the test suite did not run (or timed out)
  pytest:collect:FILE           FILE cannot be collected (an import or syntax error in a test module)
  pytest:outside-import:MODULE  tests imported MODULE from the user's checkout
  pytest:NODE_ID                a failing (or erroring) test, one per parametrised case
  pyright:FILE:RULE             pyright errors of one rule in one file
  mypy:FILE:CODE                mypy errors of one error code in one file
  ruff:FILE:RULE                ruff findings of one rule in one file
  ruff-format:FILE              FILE is not formatted (ruff-format:FILE:invalid-syntax: cannot parse)
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from domain import AnalysisInput, Diagnostic, Gap, GapCategory, Measurement, Severity, Tool

_SEVERITY = {
    Tool.PYTEST: Severity.CRITICAL,
    Tool.PYRIGHT: Severity.HIGH,
    Tool.MYPY: Severity.HIGH,
    Tool.RUFF: Severity.NORMAL,
    Tool.RUFF_FORMAT: Severity.LOW,
}
_SYNTAX = ("invalid-syntax", "syntax")
_EVIDENCE_CAP = 50


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
    by_key: dict[str, Gap] = {}
    for d in measurement.diagnostics:
        if d.rule == "collection-error":
            key, title = f"pytest:collect:{d.file}", f"{d.file} cannot be collected: {d.message}"
        elif d.rule == "outside-import":
            key, title = f"pytest:outside-import:{d.file}", d.message
        else:
            what = f"{d.exc_type}: {d.message}" if d.exc_type else d.message
            key, title = f"pytest:{d.node_id}", f"{d.node_id} {d.rule}: {what}"
        files = tuple(dict.fromkeys(f for f in (d.file, d.frame_file) if f))
        known = by_key.get(key)
        if known is not None:  # a test that failed and then errored in teardown: one gap
            by_key[key] = known.model_copy(
                update={
                    "evidence": (*known.evidence, d),
                    "files": tuple(dict.fromkeys((*known.files, *files))),
                }
            )
            continue
        by_key[key] = Gap(
            key=key,
            category=GapCategory.QUALITY,
            source="pytest",
            severity=Severity.CRITICAL,
            title=title[:200],
            description=d.detail or d.message,
            files=files,
            evidence=(d,),
        )
    return gaps + list(by_key.values())


def _grouped_gaps(measurement: Measurement) -> list[Gap]:
    groups: dict[tuple[str, str], list[Diagnostic]] = defaultdict(list)
    for d in measurement.diagnostics:
        if d.severity == "error":
            groups[(d.file, d.rule)].append(d)
    gaps: list[Gap] = []
    source = measurement.tool.value
    for (file, rule), items in sorted(groups.items()):
        first = items[0]
        count = f" ({len(items)}x)" if len(items) > 1 else ""
        if measurement.tool == Tool.RUFF_FORMAT and rule == "unformatted":
            key, title = f"{source}:{file}", f"{file} is not formatted"
        else:
            key, title = f"{source}:{file}:{rule}", f"{rule} in {file}{count}: {first.message}"
        fixable = all(d.fixable for d in items)
        gaps.append(
            Gap(
                key=key,
                category=GapCategory.QUALITY,
                source=source,
                severity=Severity.HIGH if rule in _SYNTAX else _SEVERITY[measurement.tool],
                title=title[:200],
                description="\n".join(
                    f"{_where(d)}: {d.rule} {d.message}" for d in items[:_EVIDENCE_CAP]
                )
                + ("\n(every finding has a safe automatic fix)" if fixable else ""),
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
        """One gap per failing test or uncollectable file, per (file, rule), per unformatted file."""
        gaps: list[Gap] = []
        for measurement in inputs.measurements.items:
            if measurement.tool == Tool.PYTEST:
                gaps.extend(_pytest_gaps(measurement))
            elif (
                measurement.tool in (Tool.RUFF, Tool.RUFF_FORMAT, Tool.PYRIGHT, Tool.MYPY)
                and measurement.ran
                and not measurement.advisory
            ):
                gaps.extend(_grouped_gaps(measurement))
        return gaps


ANALYZER = QualityAnalyzer()
