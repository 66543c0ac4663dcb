"""pytest as the project runs it: its selection and configuration, its virtualenv active,
outcomes as pytest counts them, an untraced gap run, a version for setuptools-scm (issue 24)."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from collections.abc import Callable
from pathlib import Path

import pytest

from domain import Measurement
from kernel.config import QualityConfig
from kernel.measuring.gate import read_at
from kernel.measuring.measure import Target, run_pytest, scm_version
from kernel.measuring.pytestconfig import differences
from kernel.measuring.testmap import TestFiles
from tests.support import git, make_repo

PASSING = "def test_ok() -> None:\n    pass\n"


def _tree(path: Path, files: dict[str, str]) -> Path:
    """An export: the files without .git."""
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text, encoding="utf-8")
    return path


def _run(
    tree: Path,
    tmp: Path,
    python: str = sys.executable,
    root: Path | None = None,
    executed: Callable[[TestFiles], None] | None = None,
) -> Measurement:
    target = Target(root=root or tmp / "elsewhere", python=python, quality=QualityConfig())
    return run_pytest(tree, target, tmp / "work", 120, executed=executed)


@pytest.mark.parametrize(
    ("name", "section"), [("tox.ini", "[pytest]"), ("setup.cfg", "[tool:pytest]")]
)
def test_testpaths_in_tox_ini_or_setup_cfg_keep_a_broken_folder_out(
    tmp_path: Path, name: str, section: str
) -> None:
    tree = _tree(
        tmp_path / "tree",
        {
            name: f"{section}\ntestpaths = tests\n",
            "tests/test_ok.py": PASSING,
            # the project runs `pytest` (its testpaths): this folder is never collected
            "bench/conftest.py": "raise RuntimeError('only for the benchmark runner')\n",
            "bench/test_speed.py": PASSING,
        },
    )
    # reached through a link (macOS' /tmp, a home folder on another disk): pytest compares
    # the folder it starts in with its rootdir as written
    (tmp_path / "link").symlink_to(tree)
    m = _run(tmp_path / "link", tmp_path)
    assert m.ran and m.diagnostics == (), (m.error, m.diagnostics)
    assert m.collected == ("tests/test_ok.py::test_ok",)


def _venv(path: Path) -> Path:
    """A real virtualenv (no pip) that sees this interpreter's packages, with a console script."""
    subprocess.run(
        [getattr(sys, "_base_executable", sys.executable), "-m", "venv", "--without-pip", path],
        check=True,
    )
    site = Path(
        subprocess.run(
            [
                path / "bin" / "python",
                "-c",
                "import sysconfig; print(sysconfig.get_path('purelib'))",
            ],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    (site / "outer.pth").write_text(sysconfig.get_path("purelib") + "\n")
    script = path / "bin" / "greet"
    script.write_text("#!/bin/sh\necho hello from the venv\n")
    script.chmod(0o755)
    return path


def test_the_targets_virtualenv_is_active_for_its_console_scripts(tmp_path: Path) -> None:
    venv = _venv(tmp_path / "venv")
    probe = (
        "import os\nimport shutil\nimport subprocess\nimport sys\n\n\n"
        "def test_console_script() -> None:\n"
        "    out = subprocess.run(['greet'], capture_output=True, text=True, check=True).stdout\n"
        "    assert out == 'hello from the venv\\n'\n\n\n"
        "def test_active() -> None:\n"
        f"    assert os.environ['VIRTUAL_ENV'] == {str(venv)!r}\n"
        f"    assert shutil.which('python') == {str(venv / 'bin' / 'python')!r}\n"
    )
    tree = _tree(tmp_path / "tree", {"tests/test_cli.py": probe})
    m = _run(tree, tmp_path, python=str(venv / "bin" / "python"))
    assert m.ran and m.diagnostics == (), (m.error, m.diagnostics)
    assert len(m.passed) == 2


XFAIL_PLUGIN = (
    "import pytest\n\n\n"
    "@pytest.hookimpl(hookwrapper=True)\n"
    "def pytest_runtest_makereport(item, call):\n"
    "    outcome = yield\n"
    "    report = outcome.get_result()\n"
    "    if report.when == 'call' and report.failed and item.get_closest_marker('known_bug'):\n"
    "        report.outcome = 'skipped'\n"
    "        report.wasxfail = 'a known bug'\n"
)


def test_a_failure_the_projects_plugin_reports_as_xfailed_is_no_gap(tmp_path: Path) -> None:
    tree = _tree(
        tmp_path / "tree",
        {
            "tests/conftest.py": XFAIL_PLUGIN,
            "tests/test_bug.py": (
                "import pytest\n\n\n@pytest.mark.known_bug\ndef test_known() -> None:\n"
                "    assert 1 == 2\n\n\ndef test_real() -> None:\n    assert 1 == 3\n"
            ),
            "pytest.ini": "[pytest]\nmarkers =\n    known_bug: reported as xfail\n",
        },
    )
    m = _run(tree, tmp_path)
    assert m.ran, m.error
    # the one failure pytest itself counts, and nothing made up from the rewritten one
    assert [(d.rule, d.node_id) for d in m.diagnostics] == [
        ("failed", "tests/test_bug.py::test_real")
    ]


TRACE_SENSITIVE = (
    "import sys\n\n\n"
    "def test_nobody_traces() -> None:\n"
    "    assert sys.gettrace() is None\n\n\n"
    "def test_recursion_near_the_limit() -> None:\n"
    "    def down(n: int) -> int:\n"
    "        return 0 if n == 0 else 1 + down(n - 1)\n\n"
    "    depth = 0\n"
    "    frame = sys._getframe()\n"
    "    while frame is not None:\n"
    "        depth, frame = depth + 1, frame.f_back\n"
    "    old = sys.getrecursionlimit()\n"
    "    sys.setrecursionlimit(depth + 60)\n"
    "    try:\n"
    "        assert down(50) == 50\n"
    "    finally:\n"
    "        sys.setrecursionlimit(old)\n"
)


def test_the_gap_run_is_never_traced(tmp_path: Path) -> None:
    tree = _tree(tmp_path / "tree", {"tests/test_trace.py": TRACE_SENSITIVE})
    maps: list[TestFiles] = []
    m = _run(tree, tmp_path, executed=maps.append)
    assert m.ran and m.diagnostics == (), (m.error, m.diagnostics)
    assert len(m.passed) == 2
    # the test map is still made (before 3.12: by a traced run of its own)
    names = ("test_nobody_traces", "test_recursion_near_the_limit")
    assert maps and set(maps[0]) == {f"tests/test_trace.py::{n}" for n in names}


VERSION_LOOKUP = (
    # what setuptools-scm and hatch-vcs do: the pretend version, else ask git
    "import os\nimport subprocess\n\n\n"
    "def version() -> str:\n"
    "    pretend = os.environ.get('SETUPTOOLS_SCM_PRETEND_VERSION')\n"
    "    if pretend:\n"
    "        return pretend\n"
    "    found = subprocess.run(['git', 'describe', '--tags'], capture_output=True, text=True)\n"
    "    if found.returncode:\n"
    "        raise LookupError('setuptools-scm was unable to detect version')\n"
    "    return found.stdout.strip()\n"
)


def test_a_package_built_from_the_export_gets_its_version(tmp_path: Path) -> None:
    files = {
        "scmver.py": VERSION_LOOKUP,
        "tests/test_version.py": (
            "import scmver\n\n\ndef test_version() -> None:\n"
            "    assert scmver.version() == '1.4.0'\n"
        ),
        "pytest.ini": "[pytest]\npythonpath = .\n",
    }
    repo = make_repo(tmp_path / "repo", files)
    git(repo, "tag", "-a", "v1.4.0", "-m", "release")
    tree = _tree(tmp_path / "tree", files)
    m = _run(tree, tmp_path, root=repo)
    assert m.ran and m.diagnostics == (), (m.error, m.diagnostics)


def test_the_version_is_setuptools_scms_guess_for_the_base_commit(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"a.py": "A = 1\n"})
    first = git(repo, "rev-parse", "--short", "HEAD").strip()
    assert scm_version(repo) == f"0.1.dev1+g{first}"
    git(repo, "tag", "v2.0rc1")
    assert scm_version(repo) == "2.0rc1"
    (repo / "a.py").write_text("A = 2\n")
    git(repo, "commit", "-qam", "next")
    short = git(repo, "rev-parse", "--short", "HEAD").strip()
    assert scm_version(repo) == f"2.1.dev1+g{short}"
    assert scm_version(tmp_path) == ""  # no repository: no version made up


def test_only_the_kernels_overrides_leave_the_projects_addopts(tmp_path: Path) -> None:
    # the project stops at its first failure, runs stepwise and in workers; the kernel needs
    # every test's outcome in one process, and says so in status
    config = "[pytest]\naddopts = -x --sw --maxfail=1 -n 2 -m 'not slow'\ntestpaths = tests\n"
    failing = (
        "def test_one() -> None:\n    assert False\n\n\ndef test_two() -> None:\n    assert False\n"
    )
    slow = "import pytest\n\n\n@pytest.mark.slow\ndef test_slow() -> None:\n    assert False\n"
    files = {"tox.ini": config, "tests/test_fail.py": failing, "tests/test_slow.py": slow}
    tree = _tree(tmp_path / "tree", files)
    m = _run(tree, tmp_path)
    assert m.ran, m.error
    # both failures, and the project's own marker selection still holds
    assert sorted(d.node_id for d in m.diagnostics) == [
        "tests/test_fail.py::test_one",
        "tests/test_fail.py::test_two",
    ]
    repo = make_repo(tmp_path / "repo", files)
    lines = differences(read_at(repo, "HEAD"))
    assert lines[0] == "pytest: configured by tox.ini; its testpaths, markers and plugins apply"
    named = " ".join(lines)
    for option in ("-x (", "--sw (", "--maxfail (", "-n (", "no .pytest_cache"):
        assert option in named, option
    assert "--import-mode" not in named  # the project's own import mode holds
    assert "-m (" not in named and "slow" not in named
