"""Localisation by execution: each failing test carries the files and lines it ran."""

from __future__ import annotations

import os
from pathlib import Path

from domain import Tool
from kernel.config import QualityConfig
from kernel.measuring.gate import freeze_gate
from kernel.measuring.localise import localise
from kernel.measuring.measure import measure
from tests.planted import target_for
from tests.support import make_repo

# the failing test names only the package; the fault is two calls deep, in strutils.py
FILES = {
    "pyproject.toml": '[tool.pytest.ini_options]\npythonpath = ["."]\n',
    "pkg/__init__.py": "from pkg.api import human, shout\n",
    "pkg/api.py": (
        "from pkg import strutils\n\n\n"
        "def human(n):\n    return strutils.bytes2human(n)\n\n\n"
        "def shout(s):\n    return strutils.upper(s)\n"
    ),
    "pkg/strutils.py": (
        "def bytes2human(n):\n"
        "    if n < 1024:\n"
        "        return f'{n}B'\n"
        "    return f'{n // 1000}K'\n"  # the bug: 1000 for 1024
        "\n\n"
        "def upper(s):\n"
        "    return s.upper()\n"
    ),
    "tests/test_api.py": (
        "import pkg\n\n\n"
        "def test_small():\n    assert pkg.human(10) == '10B'\n\n\n"
        "def test_kilo():\n    assert pkg.human(2000) == '1K'\n\n\n"
        "def test_shout():\n    assert pkg.shout('a') == 'A'\n"
    ),
    "tests/test_other.py": "def test_alone():\n    assert True\n",
}


def test_a_failing_test_carries_what_it_executed_and_what_passing_tests_shared(
    tmp_path: Path,
) -> None:
    root = make_repo(tmp_path / "repo", FILES)
    target = target_for(root, strict=(), tools=["pytest"])
    gate = freeze_gate(root, tmp_path / "gate", QualityConfig(tools=["pytest"]))
    measured = measure(root, target, gate, tmp_path / "work").get(Tool.PYTEST)
    assert measured is not None and not measured.localised
    localised = localise(root, target, tmp_path / "work", measured)
    assert localised.localised
    [kilo] = [d for d in localised.diagnostics if d.node_id == "tests/test_api.py::test_kilo"]
    assert kilo.frame_file == "tests/test_api.py"  # the traceback's crash frame is the test
    executed = {e.file: dict(zip(e.lines, e.passing, strict=True)) for e in kilo.executed}
    assert {"pkg/strutils.py", "pkg/api.py", "tests/test_api.py"} <= set(executed)
    assert executed["pkg/strutils.py"][4] == 0  # only the failing test reached the bug
    assert executed["pkg/strutils.py"][2] == 1  # test_small ran the size check too
    assert 8 not in executed["pkg/strutils.py"]  # upper() is not the failing test's
    # the spectrum holds the passing tests of the re-run files only (test_other.py is not one)
    assert kilo.passing_tests == 2
    assert sorted(os.listdir(root)) == sorted([".git", "pkg", "pyproject.toml", "tests"])


def test_nothing_failing_nothing_to_localise(tmp_path: Path) -> None:
    files = {**FILES, "pkg/strutils.py": FILES["pkg/strutils.py"].replace("1000", "1024")}
    root = make_repo(tmp_path / "repo", files)
    target = target_for(root, strict=(), tools=["pytest"])
    gate = freeze_gate(root, tmp_path / "gate", QualityConfig(tools=["pytest"]))
    measured = measure(root, target, gate, tmp_path / "work").get(Tool.PYTEST)
    assert measured is not None
    assert localise(root, target, tmp_path / "work", measured) is measured


def test_coverage_data_forged_by_the_code_under_test_is_set_aside(tmp_path: Path) -> None:
    # the data file is written inside the sandboxed run: code under test can replace it with
    # anything (here at exit, after coverage.py saved); the analysis goes on without it
    # (no variable names the file now: the forger asks coverage.py, which runs in its process)
    forge = (
        "import atexit\n\nimport coverage\n\n"
        "_COV = coverage.Coverage.current()\n\n\n"
        "def _forge():\n"
        "    with open(_COV.config.data_file, 'wb') as f:\n"
        "        f.write(b'not a database' * 1000)\n\n\n"
        "if _COV is not None:\n"
        "    atexit.register(_forge)\n"
    )
    files = {**FILES, "tests/conftest.py": forge}
    root = make_repo(tmp_path / "repo", files)
    target = target_for(root, strict=(), tools=["pytest"])
    gate = freeze_gate(root, tmp_path / "gate", QualityConfig(tools=["pytest"]))
    measured = measure(root, target, gate, tmp_path / "work").get(Tool.PYTEST)
    assert measured is not None
    localised = localise(root, target, tmp_path / "work", measured)
    [kilo] = [d for d in localised.diagnostics if d.node_id == "tests/test_api.py::test_kilo"]
    assert localised.localised and kilo.executed == ()
