"""The plain run: the project's own `python -m pytest`, with nothing of seed's, sandboxed like
every test run. It runs at the first analysis and again only when the test configuration
changes; what it finds that seed's run does not is named in `differences` (gaps --json,
status --json, status), never in `errors` (issue 41)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import cast

import pytest

from kernel.isolation import sandbox
from tests.support import agent_config, git, make_repo, records, seed

needs_bwrap = pytest.mark.skipif(not sandbox.available().ok, reason="needs bubblewrap")

_QUALITY = '[quality]\ntools = ["pytest"]\n'

FILES = {
    ".gitignore": "__pycache__/\nhistory/\n",
    "pyproject.toml": '[tool.pytest.ini_options]\ntestpaths = ["tests"]\n',
    # seed's runs have no .pytest_cache (-p no:cacheprovider): the `cache` fixture is not
    # there, and a test that looks for it skips; the project's own run has both
    "tests/test_a.py": (
        "import pytest\n\n\n"
        "def test_plain() -> None:\n    assert True\n\n\n"
        "def test_uses_the_cache(cache) -> None:\n"
        "    cache.set('seen', 1)\n    assert cache.get('seen', 0) == 1\n\n\n"
        "def test_skips_without_a_cache(request) -> None:\n"
        "    if getattr(request.config, 'cache', None) is None:\n"
        "        pytest.skip('no cache')\n"
        "    assert True\n"
    ),
}

COUNTS = "the project's own pytest run"
ONLY_SEED = "1 fails only in seed's run: tests/test_a.py::test_uses_the_cache"
SKIPS = "1 test skips in seed's runs but not in the project's own: tests/test_a.py::test_skips_without_a_cache"


def _gaps(root: Path) -> dict[str, object]:
    shown = seed(root, "gaps", "--json")
    assert shown.returncode == 0, shown.stderr
    return cast(dict[str, object], json.loads(shown.stdout))


def _said(report: dict[str, object]) -> list[str]:
    return [str(d) for d in cast(list[object], report["differences"])]


def _state(root: Path) -> Path:
    return root / ".git" / "seed" / "plainrun.json"


def test_the_plain_run_names_what_only_seeds_run_sees(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", FILES, config=_QUALITY)
    report = _gaps(root)
    said = _said(report)
    line = next((d for d in said if d.startswith(COUNTS)), "")
    assert "3 tests, none fail; seed's run: 3 tests, 1 fails" in line, said
    assert ONLY_SEED in line, said
    assert SKIPS in said, said
    assert report["errors"] == [], report
    assert not (root / ".pytest_cache").exists()  # it ran on an export, never the checkout
    status = json.loads(seed(root, "status", "--json").stdout)
    assert line in status["differences"], status
    assert f"differs:     {line}" in seed(root, "status").stdout


def test_the_plain_run_runs_again_only_when_the_test_configuration_changes(
    tmp_path: Path,
) -> None:
    root = make_repo(tmp_path / "repo", FILES, config=_QUALITY)
    first = _said(_gaps(root))
    state = _state(root)
    before = (state.read_bytes(), state.stat().st_mtime_ns)
    # a new commit of code: seed's analysis runs again, the plain run does not
    (root / "calc.py").write_text("X = 1\n", encoding="utf-8")
    git(root, "add", "calc.py")
    git(root, "commit", "-qm", "code")
    assert _said(_gaps(root)) == first
    assert (state.read_bytes(), state.stat().st_mtime_ns) == before
    # a conftest.py is test configuration: the plain run runs again and agrees now
    (root / "tests" / "conftest.py").write_text(
        "import pytest\n\n\n@pytest.fixture\ndef cache():\n    return {'seen': 1}\n",
        encoding="utf-8",
    )
    (root / "tests" / "test_a.py").write_text(
        "def test_plain() -> None:\n    assert True\n", encoding="utf-8"
    )
    git(root, "add", "-A")
    git(root, "commit", "-qm", "tests")
    after = _said(_gaps(root))
    assert state.stat().st_mtime_ns != before[1]
    assert not any(d.startswith(COUNTS) or "not in the project's own" in d for d in after), after


def test_projects_that_agree_are_not_named(tmp_path: Path) -> None:
    files = {**FILES, "tests/test_a.py": "def test_plain() -> None:\n    assert False\n"}
    report = _gaps(make_repo(tmp_path / "repo", files, config=_QUALITY))
    assert not any(d.startswith(COUNTS) for d in _said(report)), report
    assert report["errors"] == [], report


def test_a_plain_run_that_does_not_finish_is_one_line_never_an_error(tmp_path: Path) -> None:
    files = {
        **FILES,
        # only where pytest's cache is (the project's own run) does the test hang
        "tests/test_a.py": (
            "import time\n\n\n"
            "def test_waits(request) -> None:\n"
            "    if getattr(request.config, 'cache', None) is not None:\n"
            "        time.sleep(60)\n"
        ),
    }
    config = '[quality]\ntools = ["pytest"]\ntool_timeout_s = 8\n'
    report = _gaps(make_repo(tmp_path / "repo", files, config=config))
    said = [d for d in _said(report) if d.startswith(COUNTS)]
    assert len(said) == 1 and said[0].endswith("gave nothing to compare: it did not finish in 8s")
    assert report["errors"] == [], report
    assert report["gaps"] == [], report


def test_a_plain_run_that_writes_no_results_says_why(tmp_path: Path) -> None:
    # without pytest's junitxml plugin the project's own run has no results to read
    files = {**FILES, "pyproject.toml": '[tool.pytest.ini_options]\naddopts = "-p no:junitxml"\n'}
    report = _gaps(make_repo(tmp_path / "repo", files, config=_QUALITY))
    said = [d for d in _said(report) if d.startswith(COUNTS)]
    assert len(said) == 1 and "gave nothing to compare: it wrote no results (" in said[0], said
    assert report["errors"] == [], report


def test_no_plain_run_where_the_config_turns_it_off(tmp_path: Path) -> None:
    config = _QUALITY + "\n[analysis]\nplain_run = false\n"
    root = make_repo(tmp_path / "repo", FILES, config=config)
    assert not any(d.startswith(COUNTS) for d in _said(_gaps(root)))
    assert not _state(root).exists()


def test_the_plain_run_runs_the_selection_seed_toml_gives_seeds_runs(tmp_path: Path) -> None:
    files = {**FILES, "tests/test_b.py": "def test_b() -> None:\n    assert True\n"}
    config = '[quality]\ntools = ["pytest"]\npytest_args = ["tests/test_b.py"]\n'
    report = _gaps(make_repo(tmp_path / "repo", files, config=config))
    # test_a.py is outside the selection in both runs: they agree
    assert not any(d.startswith(COUNTS) or "test_a" in d for d in _said(report)), report


def test_status_names_each_line_once_after_the_daemons_analysis(tmp_path: Path) -> None:
    test = (
        "import pytest\n\n\n"
        "@pytest.mark.parametrize('n', [1, 2])\n"
        "def test_skips_without_a_cache(request, n) -> None:\n"
        "    if getattr(request.config, 'cache', None) is None:\n"
        "        pytest.skip('no cache')\n"
    )
    root = make_repo(tmp_path / "repo", {**FILES, "tests/test_a.py": test}, config=_QUALITY)
    said = _said(_gaps(root))
    plural = "2 tests skip in seed's runs but not in the project's own"
    assert any(d.startswith(plural) for d in said), said
    # what the daemon's analysis leaves in history/status.json for `status`
    (root / "history").mkdir(exist_ok=True)
    (root / "history" / "status.json").write_text(json.dumps({"differences": said}))
    shown = json.loads(seed(root, "status", "--json").stdout)["differences"]
    assert sorted(shown) == sorted(set(shown)), shown
    assert [d for d in shown if d.startswith(plural)] == [d for d in said if d.startswith(plural)]


@needs_bwrap
def test_the_plain_run_is_sandboxed_like_seeds_test_runs(tmp_path: Path) -> None:
    outside = tmp_path / "escaped.txt"
    test = (
        "import pathlib\n\n\n"
        "def test_writes_outside(request) -> None:\n"
        "    if getattr(request.config, 'cache', None) is not None:  # the plain run only\n"
        f"        pathlib.Path({str(outside)!r}).write_text('out')\n"
    )
    root = make_repo(tmp_path / "repo", {**FILES, "tests/test_a.py": test}, config=_QUALITY)
    report = _gaps(root)
    assert _state(root).is_file(), report  # the plain run ran
    # it wrote into the sandbox's private /tmp, gone with the run
    assert not outside.exists()


@needs_bwrap
def test_an_iterations_report_names_what_seeds_runs_measured_otherwise(tmp_path: Path) -> None:
    # the agent edits an unrelated file: refused, and its report says where seed's run of
    # the base differs from the project's own (the gap it chose is one only seed's run has)
    steps = [{"write": "notes.txt", "text": "nothing\n"}]
    root = make_repo(tmp_path / "repo", FILES, config=_QUALITY + agent_config(tmp_path, steps))
    done = seed(root, "once")
    assert done.returncode != 0, done.stderr
    (record,) = records(root)
    assert any(ONLY_SEED in d for d in record["differences"]), record["differences"]
    report = (root / "history" / record["iteration_id"] / "report.md").read_text()
    assert "## Where seed's runs differ from the project's own" in report
    assert ONLY_SEED in report, report


# a stand-in for a way seed's runs import otherwise than the project's own (they turn off
# pytest's plugin autoload): the tree's root leaves sys.path in seed's runs only
SEEDS_OWN = {
    ".gitignore": "__pycache__/\nhistory/\n",
    "helpers/__init__.py": "VALUE = 1\n",
    "conftest.py": (
        "import os\nimport sys\n\n"
        "if os.environ.get('PYTEST_DISABLE_PLUGIN_AUTOLOAD'):\n"
        "    here = os.path.dirname(os.path.realpath(__file__))\n"
        "    sys.path[:] = [p for p in sys.path if os.path.realpath(p or '.') != here]\n"
    ),
    "tests/test_h.py": "import helpers\n\n\ndef test_value() -> None:\n    assert helpers.VALUE == 1\n",
}


@needs_bwrap
def test_a_module_only_seeds_runs_cannot_import_is_seeds_problem_not_the_persons_setup(
    tmp_path: Path,
) -> None:
    root = make_repo(tmp_path / "repo", SEEDS_OWN, config=_QUALITY)
    report = _gaps(root)
    errors = "\n".join(str(e) for e in cast(list[object], report["errors"]))
    assert "seed's runs cannot import `helpers`" in errors, errors
    assert "this is seed's to solve, not your setup" in errors, errors
    assert "pip install" not in errors, errors  # no advice about what is installed
    assert report["gaps"] == [], report["gaps"]
