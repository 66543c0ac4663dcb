"""The quality analyser on real tool output from a repository with every kind of gap planted."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from domain import AnalysisInput, Gap, GapCategory, Measurement, Measurements, Severity, Tool
from modules.analyzers.quality import ANALYZER
from tests.planted import measure_repo, planted_repo

NOW = datetime(2025, 1, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def gaps(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Gap]:
    base = tmp_path_factory.mktemp("quality")
    measurements, _ = measure_repo(planted_repo(base / "repo"), base / "work")
    found = list(ANALYZER.analyze(AnalysisInput(measurements=measurements, now=NOW)))
    keys = [g.key for g in found]
    assert len(keys) == len(set(keys)), "gap keys must be unique"
    return {g.key: g for g in found}


def test_every_planted_gap_is_found_under_a_stable_key(gaps: dict[str, Gap]) -> None:
    assert set(gaps) == {
        "ruff:lib/calc.py:F401",
        "ruff:tests/test_broken.py:F401",
        "ruff:lib/broken.py:invalid-syntax",
        "ruff-format:lib/ugly.py",
        "ruff-format:lib/broken.py:invalid-syntax",
        "pyright:lib/calc.py:reportReturnType",
        "pyright:lib/broken.py:syntax",
        "pyright:strictpkg/loose.py:reportMissingParameterType",
        "pyright:strictpkg/loose.py:reportUnknownParameterType",
        "pyright:strictpkg/loose.py:reportUnknownVariableType",
        "pyright:tests/test_broken.py:reportMissingImports",
        "pytest:collect:tests/test_broken.py",
        "pytest:tests/test_calc.py::test_double[3-7]",
        "pytest:tests/test_calc.py::test_boom",
    }
    assert all(g.category == GapCategory.QUALITY for g in gaps.values())


def test_a_failing_parametrised_case_is_one_gap_with_its_evidence(gaps: dict[str, Gap]) -> None:
    case = gaps["pytest:tests/test_calc.py::test_double[3-7]"]
    assert case.severity == Severity.CRITICAL and case.source == "pytest"
    assert "AssertionError: assert 6 == 7" in case.title
    [evidence] = case.evidence
    assert evidence.node_id == "tests/test_calc.py::test_double[3-7]"
    assert "pytest:tests/test_calc.py::test_double[1-2]" not in gaps
    boom = gaps["pytest:tests/test_calc.py::test_boom"]
    assert boom.files == ("tests/test_calc.py", "lib/calc.py")


def test_a_collection_error_is_its_own_gap(gaps: dict[str, Gap]) -> None:
    broken = gaps["pytest:collect:tests/test_broken.py"]
    assert broken.files == ("tests/test_broken.py",)
    assert "cannot be collected" in broken.title and "lib.missing_module" in broken.title


def test_lint_type_and_format_gaps_name_file_rule_and_fixability(gaps: dict[str, Gap]) -> None:
    unused = gaps["ruff:lib/calc.py:F401"]
    assert unused.files == ("lib/calc.py",) and unused.severity == Severity.NORMAL
    assert (
        "lib/calc.py:1: F401" in unused.description and "safe automatic fix" in unused.description
    )
    wrong = gaps["pyright:lib/calc.py:reportReturnType"]
    assert wrong.severity == Severity.HIGH and "lib/calc.py:9" in wrong.description
    assert gaps["ruff-format:lib/ugly.py"].severity == Severity.LOW
    assert gaps["pyright:lib/broken.py:syntax"].severity == Severity.HIGH


def test_a_test_suite_that_cannot_run_is_one_critical_gap() -> None:
    broken = Measurement(tool=Tool.PYTEST, ran=False, exit_code=4, error="ImportError in conftest")
    found = ANALYZER.analyze(AnalysisInput(measurements=Measurements(items=(broken,)), now=NOW))
    assert [(g.key, g.severity) for g in found] == [("pytest:run", Severity.CRITICAL)]
    assert "could not run" in found[0].title and "conftest" in found[0].description


def test_mypy_errors_are_type_gaps_per_file_and_code() -> None:
    from domain import Diagnostic

    def error(line: int, code: str) -> Diagnostic:
        return Diagnostic(tool=Tool.MYPY, file="src/a.py", line=line, rule=code, message="bad")

    mypy = Measurement(
        tool=Tool.MYPY,
        ran=True,
        exit_code=1,
        diagnostics=(
            error(3, "return-value"),
            error(9, "return-value"),
            error(4, "no-untyped-def"),
        ),
    )
    found = ANALYZER.analyze(AnalysisInput(measurements=Measurements(items=(mypy,)), now=NOW))
    assert sorted((g.key, g.source, g.severity) for g in found) == [
        ("mypy:src/a.py:no-untyped-def", "mypy", Severity.HIGH),
        ("mypy:src/a.py:return-value", "mypy", Severity.HIGH),
    ]
    twice = next(g for g in found if g.key.endswith("return-value"))
    assert "(2x)" in twice.title and "src/a.py:9: return-value" in twice.description
