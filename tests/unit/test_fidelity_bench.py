"""bench/fidelity.py's comparison: each tool's own output read as seed's gap keys, and the
false and missed gaps between the two sides (small fixed outputs; no network, no fetch)."""

from __future__ import annotations

import json
from pathlib import Path

from bench import fidelity


def test_ruff_findings_become_file_and_rule_keys_relative_to_the_root(tmp_path: Path) -> None:
    out = json.dumps(
        [
            {"filename": str(tmp_path / "src" / "a.py"), "code": "F401"},
            {"filename": str(tmp_path / "src" / "a.py"), "code": "F401"},
            {"filename": str(tmp_path / "b.py"), "code": None},
        ]
    )
    assert fidelity.ruff_keys(out, tmp_path) == {"ruff:src/a.py:F401", "ruff:b.py:invalid-syntax"}


def test_format_check_lines_become_format_keys(tmp_path: Path) -> None:
    out = "Would reformat: src/pkg/a.py\nWould reformat: tests/t.py\n2 files would be reformatted\n"
    assert fidelity.format_keys(out, tmp_path) == {
        "ruff-format:src/pkg/a.py",
        "ruff-format:tests/t.py",
    }


def test_pyright_errors_count_and_warnings_do_not(tmp_path: Path) -> None:
    out = json.dumps(
        {
            "generalDiagnostics": [
                {"file": str(tmp_path / "m.py"), "severity": "error", "rule": "reportCallIssue"},
                {"file": str(tmp_path / "m.py"), "severity": "warning", "rule": "reportFoo"},
                {"file": str(tmp_path / "n.py"), "severity": "error"},
            ]
        }
    )
    assert fidelity.pyright_keys(out, tmp_path) == {
        "pyright:m.py:reportCallIssue",
        "pyright:n.py:syntax",
    }


def test_mypy_errors_count_by_file_and_code_and_notes_do_not(tmp_path: Path) -> None:
    out = (
        "src/humanize/time.py:12:5: error: Returning Any from function  [no-any-return]\n"
        "src/humanize/time.py:12:5: note: See https://mypy.readthedocs.io\n"
        "tests/test_time.py:3: error: Name 'x' is not defined\n"
        f"{tmp_path}/src/b.py:1:1: error: bad  [misc]\n"
    )
    assert fidelity.mypy_keys(out, tmp_path) == {
        "mypy:src/humanize/time.py:no-any-return",
        "mypy:tests/test_time.py:misc",
        "mypy:src/b.py:misc",
    }
    assert "mypy" in fidelity.TOOLS


def test_pytest_summary_names_failures_errors_and_collection_errors() -> None:
    out = (
        "..F.E\n=========== short test summary info ===========\n"
        "FAILED tests/test_a.py::test_one - AssertionError: 1 != 2\n"
        "FAILED tests/test_a.py::test_case[a - b] - ValueError\n"
        "ERROR tests/test_b.py::TestX::test_two - RuntimeError: boom\n"
        "ERROR tests/test_c.py\n"
        "2 failed, 2 errors in 0.3s\n"
    )
    assert fidelity.pytest_keys(out, 1) == {
        "pytest:tests/test_a.py::test_one",
        "pytest:tests/test_a.py::test_case[a - b]",
        "pytest:tests/test_b.py::TestX::test_two",
        "pytest:collect:tests/test_c.py",
    }
    assert fidelity.pytest_keys("usage: pytest ...\n", 4) == {"pytest:run"}
    assert fidelity.pytest_keys("10 passed\n", 0) == set()


def test_unittest_failures_are_named_as_pytest_names_them(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_more.py").write_text("")
    out = (
        "FAIL: test_x (tests.test_more.TestRun.test_x)\n---\n"
        "ERROR: test_y (tests.test_more.TestRun.test_y) [case 2]\n"
        "Ran 10 tests\nFAILED (failures=1, errors=1)\n"
    )
    assert fidelity.unittest_keys(out, 1, tmp_path) == {
        "pytest:tests/test_more.py::TestRun::test_x",
        "pytest:tests/test_more.py::TestRun::test_y",
    }


def test_false_and_missed_gaps_per_tool_and_the_table_counts_them() -> None:
    report = {
        "gaps": [
            {"key": "ruff:a.py:UP035", "source": "ruff"},
            {"key": "ruff:b.py:F401", "source": "ruff"},
            {"key": "pytest:outside-import:pkg", "source": "pytest"},
            {"key": "inbox:task.md", "source": "inbox"},
        ]
    }
    theirs = {"ruff": {"ruff:b.py:F401", "ruff:c.py:E501"}, "pytest": set[str]()}
    tools = {t.tool: t for t in fidelity.compare(theirs, fidelity.seed_keys(report))}
    assert (tools["ruff"].false, tools["ruff"].missed) == (["ruff:a.py:UP035"], ["ruff:c.py:E501"])
    assert tools["pytest"].false == ["pytest:outside-import:pkg"]
    assert tools["pyright"].false == tools["pyright"].missed == []
    result = fidelity.ProjectResult("demo", "abc1234", "src", list(tools.values()), {"tests": 1.0})
    exact = fidelity.ProjectResult("ok", "def5678", "flat", fidelity.compare({}, {}), {})
    text = fidelity.table([result, exact], (1.0, 2.0, 3.0))
    assert "| demo | ruff | 2 | 2 | 1 | 1 | ruff:a.py:UP035 | ruff:c.py:E501 |" in text
    assert "2 projects measured, 1 exact; false 2, missed 1" in text
