"""The kernel's measurements against real ruff, ruff format, pyright and pytest output."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from domain import Diagnostic, Measurements, Tool
from kernel.config import QualityConfig
from kernel.measuring.gate import freeze_gate, freeze_gate_at
from kernel.measuring.measure import Target, measure, resolve_python
from tests.planted import measure_repo, planted_repo, target_for
from tests.support import SEED_HOME, git, make_repo


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Measurements:
    base = tmp_path_factory.mktemp("planted")
    root = planted_repo(base / "repo")
    measurements, _ = measure_repo(root, base / "work")
    return measurements


def _found(m: Measurements, tool: Tool) -> list[Diagnostic]:
    measurement = m.get(tool)
    assert measurement is not None and measurement.ran, measurement
    return list(measurement.diagnostics)


def test_ruff_findings_carry_file_line_rule_message_and_fixability(planted: Measurements) -> None:
    found = _found(planted, Tool.RUFF)
    [unused] = [d for d in found if d.file == "lib/calc.py"]
    assert (unused.line, unused.column, unused.rule) == (1, 8, "F401")
    assert "`os` imported but unused" in unused.message and unused.fixable
    assert {d.rule for d in found if d.file == "lib/broken.py"} == {"invalid-syntax"}


def test_ruff_format_names_the_unformatted_and_the_unparsable_files(planted: Measurements) -> None:
    found = _found(planted, Tool.RUFF_FORMAT)
    assert {(d.file, d.rule) for d in found} == {
        ("lib/ugly.py", "unformatted"),
        ("lib/broken.py", "invalid-syntax"),
    }


def test_pyright_errors_are_one_based_and_strict_applies_only_to_the_strict_paths(
    planted: Measurements,
) -> None:
    found = _found(planted, Tool.PYRIGHT)
    [wrong] = [d for d in found if d.file == "lib/calc.py"]
    assert (wrong.line, wrong.column, wrong.rule) == (9, 12, "reportReturnType")
    strict_rules = {d.rule for d in found if d.file == "strictpkg/loose.py"}
    assert "reportMissingParameterType" in strict_rules
    # the very same code outside the strict paths is fine in pyright's basic mode
    assert not [d for d in found if d.file == "lib/loose.py"]
    assert {d.rule for d in found if d.file == "lib/broken.py"} == {"syntax"}


def test_pytest_reports_each_failing_case_with_its_crash_frame(planted: Measurements) -> None:
    found = _found(planted, Tool.PYTEST)
    by_node = {d.node_id: d for d in found if d.rule == "failed"}
    assert set(by_node) == {"tests/test_calc.py::test_double[3-7]", "tests/test_calc.py::test_boom"}
    case = by_node["tests/test_calc.py::test_double[3-7]"]
    assert (case.exc_type, case.message) == ("AssertionError", "assert 6 == 7")
    assert (case.frame_file, case.frame_line) == ("tests/test_calc.py", 8)
    boom = by_node["tests/test_calc.py::test_boom"]
    assert (boom.exc_type, boom.message) == ("ValueError", "boom inside the library")
    assert (boom.frame_file, boom.frame_line) == ("lib/calc.py", 13)


def test_a_collection_error_is_its_own_finding_and_the_other_tests_still_run(
    planted: Measurements,
) -> None:
    pytest_m = planted.get(Tool.PYTEST)
    assert pytest_m is not None and pytest_m.ran
    [broken] = [d for d in pytest_m.diagnostics if d.rule == "collection-error"]
    assert broken.file == "tests/test_broken.py"
    assert broken.exc_type == "ModuleNotFoundError" and "lib.missing_module" in broken.message
    assert "tests/test_calc.py::test_double[1-2]" in pytest_m.collected


def test_no_tests_at_all_is_a_clean_run_not_a_failure(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", {"app.py": "VALUE = 1\n"})
    m, _ = measure_repo(root, tmp_path / "work", target_for(root, tools=["pytest"]))
    pytest_m = m.get(Tool.PYTEST)
    assert pytest_m is not None
    assert (pytest_m.ran, pytest_m.exit_code, pytest_m.diagnostics) == (True, 5, ())


def test_the_interpreter_is_the_configured_one_else_the_targets_venv_else_the_daemons(
    tmp_path: Path,
) -> None:
    assert resolve_python(tmp_path, "") == sys.executable
    venv_python = tmp_path / ".venv" / "bin" / "python"
    venv_python.parent.mkdir(parents=True)
    venv_python.write_text("#!/bin/sh\n")
    assert resolve_python(tmp_path, "") == str(venv_python)
    assert resolve_python(tmp_path, "tools/py") == str(tmp_path / "tools" / "py")
    assert resolve_python(tmp_path, "/opt/py/bin/python3") == "/opt/py/bin/python3"


def test_pytest_and_pyright_use_the_targets_interpreter(tmp_path: Path) -> None:
    # a module only the target's interpreter can import: pyright resolves it only if it asks
    # that interpreter for its sys.path, and the test passes only if pytest runs with it
    extra = tmp_path / "target-site"
    extra.mkdir()
    (extra / "only_in_target.py").write_text("ANSWER: int = 42\n")
    log = tmp_path / "calls.log"
    wrapper = tmp_path / "target-python"
    wrapper.write_text(
        f'#!/bin/sh\necho "$@" >> {log}\n'
        f'PYTHONPATH="${{PYTHONPATH:+$PYTHONPATH:}}{extra}" exec {sys.executable} "$@"\n'
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    files = {
        "app.py": "from only_in_target import ANSWER\n\nVALUE: int = ANSWER\n",
        "tests/test_app.py": "from app import VALUE\n\n\ndef test_value() -> None:\n    assert VALUE == 42\n",
        "pyproject.toml": '[tool.pytest.ini_options]\npythonpath = ["."]\n',
    }
    root = make_repo(tmp_path / "repo", files)
    target = Target(
        root=root, python=str(wrapper), quality=QualityConfig(tools=["pyright", "pytest"])
    )
    m, _ = measure_repo(root, tmp_path / "work", target)
    pyright_m, pytest_m = m.get(Tool.PYRIGHT), m.get(Tool.PYTEST)
    assert pyright_m is not None and pyright_m.ran and pyright_m.diagnostics == ()
    assert pytest_m is not None and pytest_m.ran and pytest_m.diagnostics == ()
    assert pytest_m.collected == ("tests/test_app.py::test_value",)
    # pytest starts from the kernel's bootstrap (measure.BOOT), not `-m pytest` in the tree
    assert "-s -B -c import os, sys" in log.read_text()


def test_the_gate_is_the_baseline_commits_configuration(tmp_path: Path) -> None:
    root = make_repo(
        tmp_path / "repo",
        {
            "pyproject.toml": '[tool.ruff.lint]\nselect = ["F401"]\n\n[tool.pyright]\nstrict = ["a"]\n',
            "a/x.py": "import os\n",
        },
    )
    head = git(root, "rev-parse", "HEAD").strip()
    (root / "pyproject.toml").write_text('[tool.ruff.lint]\nselect = ["E"]\nignore = ["F401"]\n')
    from_commit = freeze_gate_at(root, head, tmp_path / "g1", QualityConfig())
    assert from_commit.ruff_dir is not None
    assert 'select = ["F401"]' in (from_commit.ruff_dir / "pyproject.toml").read_text()
    assert from_commit.pyright_config == {"strict": ["a"]}
    from_tree = freeze_gate(root, tmp_path / "g2", QualityConfig())
    assert from_tree.ruff_dir is not None and from_tree.pyright_config == {}
    assert "F401" in (from_tree.ruff_dir / "pyproject.toml").read_text()
    # no ruff settings, ruff named in seed.toml: the configured selection, never ruff's
    # changing defaults
    bare = make_repo(tmp_path / "bare", {"a.py": "import os\nprint(nowhere)\n"})
    named = QualityConfig(ruff_select=["F"], tools=["ruff"])
    gate = freeze_gate(bare, tmp_path / "g3", named)
    assert 'select = [\n    "F",\n]' in gate.ruff_config.read_text()
    m = measure(bare, target_for(bare, tools=["ruff"]), gate, tmp_path / "w")
    ruff_m = m.get(Tool.RUFF)
    assert ruff_m is not None and [d.rule for d in ruff_m.diagnostics] == ["F401", "F821"]
    assert sorted(os.listdir(bare)) == [".git", "a.py"]
    # ... and not named: only syntax errors and undefined names count
    small = freeze_gate(bare, tmp_path / "g4", QualityConfig(ruff_select=["F"]))
    m = measure(bare, target_for(bare), small, tmp_path / "w")
    ruff_m = m.get(Tool.RUFF)
    assert ruff_m is not None and [d.rule for d in ruff_m.diagnostics] == ["F821"]


def test_the_kernels_own_plugin_is_not_an_import_from_the_checkout(tmp_path: Path) -> None:
    # when seed measures itself, its checkout (which holds the plugin) is the forbidden root
    root = make_repo(tmp_path / "tree", {"tests/test_ok.py": "def test_ok() -> None:\n    pass\n"})
    target = Target(root=SEED_HOME, python=sys.executable, quality=QualityConfig(tools=["pytest"]))
    m, _ = measure_repo(root, tmp_path / "work", target)
    pytest_m = m.get(Tool.PYTEST)
    assert pytest_m is not None and pytest_m.ran and pytest_m.diagnostics == ()
    assert pytest_m.collected == ("tests/test_ok.py::test_ok",)


ORDINARY = {
    # a flat package imported from tests, a sibling helper in a tests/ without __init__.py,
    # `from tests.x import y`, a conftest fixture, and a src layout through `pythonpath`
    "pkg/__init__.py": "def two() -> int:\n    return 2\n",
    "src/srcpkg/__init__.py": "THREE = 3\n",
    "tests/helpers.py": "FOUR = 4\n",
    "tests/shared.py": "FIVE = 5\n",
    "tests/conftest.py": "import pytest\n\n\n@pytest.fixture\ndef six() -> int:\n    return 6\n",
    "tests/test_layouts.py": (
        "from helpers import FOUR\nfrom srcpkg import THREE\n\nimport pkg\n"
        "from tests.shared import FIVE\n\n\n"
        "def test_all(six: int) -> None:\n"
        "    assert (pkg.two(), THREE, FOUR, FIVE, six) == (2, 3, 4, 5, 6)\n\n\n"
        "def test_the_standard_library_wins() -> None:\n"
        "    import difflib, shlex, textwrap\n\n"
        "    for module in (difflib, shlex, textwrap):\n"
        "        assert 'poisoned' not in module.__file__\n"
    ),
    "pyproject.toml": '[tool.pytest.ini_options]\npythonpath = ["src"]\n',
    # modules named like the standard library's, at the top, in tests/ and in src/: none may
    # be imported in its place, by pytest or by the tests
    "shlex.py": "raise SystemExit('poisoned shlex')\n",
    "tests/difflib.py": "raise SystemExit('poisoned difflib')\n",
    "src/textwrap.py": "raise SystemExit('poisoned textwrap')\n",
}


def test_ordinary_layouts_pass_and_the_standard_library_is_never_shadowed(
    tmp_path: Path,
) -> None:
    from kernel.measuring.measure import run_pytest

    root = make_repo(tmp_path / "repo", ORDINARY)
    target = Target(root=tmp_path / "elsewhere", python=sys.executable, quality=QualityConfig())
    found: list[dict[str, frozenset[str]]] = []
    m = run_pytest(root, target, tmp_path / "work", 120, executed=found.append)
    assert m.ran and m.exit_code == 0, (m.error, m.diagnostics)
    assert m.diagnostics == ()
    assert m.collected == (
        "tests/test_layouts.py::test_all",
        "tests/test_layouts.py::test_the_standard_library_wins",
    )
    # the test map still sees the project files each test ran
    [files] = found
    assert "pkg/__init__.py" in files["tests/test_layouts.py::test_all"]


def test_the_run_carries_no_marker_of_the_kernel(tmp_path: Path) -> None:
    from kernel.measuring.measure import run_pytest

    probe = (
        "import os\nimport sys\n\n\n"
        "def test_unmarked() -> None:\n"
        "    assert not [k for k in os.environ if k.startswith(('SEED_PYTEST', 'SEED_COVER'))]\n"
        "    assert not [m for m in sys.modules if m.startswith('seed_pytest')]\n"
        "    assert not [p for p in sys.path if 'pytest_plugin' in p]\n"
        "    assert os.read(0, 1) == b''  # stdin: nothing (the configuration came there)\n"
    )
    root = make_repo(tmp_path / "repo", {"tests/test_probe.py": probe})
    target = Target(root=tmp_path / "elsewhere", python=sys.executable, quality=QualityConfig())
    m = run_pytest(root, target, tmp_path / "work", 120)
    assert m.ran and m.exit_code == 0 and m.diagnostics == (), (m.error, m.diagnostics)


def test_a_test_run_that_rewrites_the_tree_hides_nothing_from_pyright(tmp_path: Path) -> None:
    # pytest and pyright run side by side on one tree: a conftest that rewrites a module
    # as the run starts must not change what pyright judges (it reads a view made before)
    files = {
        "pkg.py": 'x: int = "not an int"\n',
        "conftest.py": (
            "import pathlib, time\n"
            "pathlib.Path(__file__).with_name('pkg.py').write_text('x: int = 1\\n')\n"
        ),
        "tests/test_pkg.py": "import time\n\n\ndef test_slow() -> None:\n    time.sleep(3)\n",
    }
    root = make_repo(tmp_path / "repo", files)
    target = Target(
        root=root, python=sys.executable, quality=QualityConfig(tools=["pyright", "pytest"])
    )
    m, _ = measure_repo(root, tmp_path / "work", target)
    pyright_m = m.get(Tool.PYRIGHT)
    assert pyright_m is not None and pyright_m.ran
    assert [(d.file, d.rule) for d in pyright_m.diagnostics] == [("pkg.py", "reportAssignmentType")]
    assert (root / "pkg.py").read_text() == "x: int = 1\n"  # the run did rewrite it
