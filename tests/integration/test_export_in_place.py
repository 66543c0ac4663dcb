"""The code under test is the export's: inside the sandbox the export sits in the checkout's
place, so editable installs (`.pth` path entries, setuptools finders) and the subprocesses a
test starts all import the export's code; the person's environment and the build products
git ignores are shown read-only; an environment that cannot import the project, or an import
that still reaches the checkout (the sandbox off), is a setup problem, never a gap."""

from __future__ import annotations

import json
import site
import subprocess
import venv
from pathlib import Path

import pytest

from kernel.isolation import sandbox
from tests.support import git, make_repo, seed

needs_bwrap = pytest.mark.skipif(not sandbox.available().ok, reason="needs bubblewrap")

_SITE = next(p for p in site.getsitepackages() if p.endswith("site-packages"))
"""This interpreter's packages (pytest), which the fixture's environment sees as a `.pth`
entry does: the environment stays small and offline."""

_PURELIB = "import sysconfig; print(sysconfig.get_path('purelib'))"
_QUALITY = '[quality]\ntools = ["pytest"]\npython = ".venv/bin/python"\n'


def _environment(root: Path, *entries: Path) -> Path:
    """A `.venv` in the checkout, the project installed editable as pip's setuptools backend
    leaves it: a `.pth` naming each entry (beside one that gives the environment pytest)."""
    venv.EnvBuilder(with_pip=False, symlinks=True).create(root / ".venv")
    found = subprocess.run(
        [str(root / ".venv" / "bin" / "python"), "-c", _PURELIB],
        capture_output=True,
        text=True,
        check=True,
    )
    packages = Path(found.stdout.strip())
    (packages / "_shared.pth").write_text(f"{_SITE}\n", encoding="utf-8")
    if entries:
        (packages / "__editable__.project.pth").write_text(
            "".join(f"{e}\n" for e in entries), encoding="utf-8"
        )
    return packages


def _gaps(root: Path) -> dict[str, object]:
    shown = seed(root, "gaps", "--json")
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)


def _keys(report: dict[str, object]) -> list[str]:
    return [str(g["key"]) for g in report["gaps"]]  # type: ignore[index, union-attr]


SRC = {
    ".gitignore": ".venv/\nsrc/pkg/_version.py\n__pycache__/\nhistory/\nsecret.env\n",
    "src/pkg/__init__.py": "from pkg._version import VERSION\n\nWHO = 'export'\n",
    "src/pkg/__main__.py": "import pkg\n\nprint(pkg.WHO, pkg.VERSION)\n",
    "tests/test_pkg.py": (
        "import subprocess, sys\n\nimport pkg\nimport pkg._version\n\n\n"
        "def test_the_code_is_the_exports() -> None:\n"
        "    assert pkg.WHO == 'export'\n\n\n"
        "def test_a_subprocess_runs_the_exports_code() -> None:\n"
        "    out = subprocess.run([sys.executable, '-m', 'pkg'], capture_output=True, text=True)\n"
        "    assert out.stdout == 'export 1.2\\n', out.stderr\n\n\n"
        "def test_the_generated_version_is_read_only() -> None:\n"
        "    try:\n"
        "        open(pkg._version.__file__, 'a').close()\n"
        "    except OSError:\n"
        "        return\n"
        "    raise AssertionError('the checkout is writable')\n\n\n"
        "def test_nothing_else_of_the_persons_side_is_there() -> None:\n"
        "    import pathlib\n\n"
        "    top = pathlib.Path(pkg.__file__).parents[2]\n"
        "    assert not (top / 'secret.env').exists()\n"
        "    (top / 'written.txt').write_text('by a test')\n"
    ),
}


def _src_project(tmp_path: Path, config: str = "") -> Path:
    root = make_repo(tmp_path / "repo", SRC, config=_QUALITY + config)
    # the person's own edit, not committed: only the export holds HEAD's code
    (root / "src" / "pkg" / "__init__.py").write_text(
        "from pkg._version import VERSION\n\nWHO = 'checkout'\n", encoding="utf-8"
    )
    (root / "src" / "pkg" / "_version.py").write_text("VERSION = '1.2'\n", encoding="utf-8")
    (root / "secret.env").write_text("TOKEN=1\n", encoding="utf-8")
    _environment(root, root / "src")
    return root


@needs_bwrap
def test_an_editable_src_layout_and_its_subprocesses_run_the_exports_code(tmp_path: Path) -> None:
    root = _src_project(tmp_path)
    report = _gaps(root)
    assert _keys(report) == []
    assert report["errors"] == []
    assert (root / "src" / "pkg" / "_version.py").read_text() == "VERSION = '1.2'\n"
    assert not (root / "written.txt").exists()  # the export took it, not the checkout


FLAT = {
    ".gitignore": ".venv/\n__pycache__/\nhistory/\n",
    "flat/__init__.py": "WHO = 'export'\n",
    "tests/test_flat.py": (
        "import subprocess, sys\n\n\n"
        "def test_a_subprocess_imports_the_export() -> None:\n"
        "    code = 'import flat; print(flat.WHO, flat.__file__)'\n"
        "    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,\n"
        "                         cwd='/')\n"
        "    assert out.stdout.startswith('export '), out.stderr\n"
    ),
}


@needs_bwrap
def test_a_flat_layout_on_a_pth_entry_runs_the_exports_code(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", FLAT, config=_QUALITY)
    (root / "flat" / "__init__.py").write_text("WHO = 'checkout'\n", encoding="utf-8")
    _environment(root, root)
    assert _keys(_gaps(root)) == []


def test_an_import_from_the_checkout_is_a_setup_problem_not_a_gap(tmp_path: Path) -> None:
    # the sandbox off: nothing can put the export in the checkout's place
    root = _src_project(tmp_path, config='[guard]\nsandbox = "off"\n')
    report = _gaps(root)
    assert not [k for k in _keys(report) if "outside-import" in k]
    errors = "\n".join(str(e) for e in report["errors"])  # type: ignore[union-attr]
    assert "checkout" in errors and "sandbox" in errors
    status = json.loads(seed(root, "status", "--json").stdout)
    assert any("pkg" in line for line in status["setup"])


@needs_bwrap
def test_a_project_its_environment_cannot_import_is_a_setup_problem(tmp_path: Path) -> None:
    root = _src_project(tmp_path)
    # the environment without the project installed: `import pkg` fails everywhere
    packages = root / ".venv"
    for pth in packages.rglob("__editable__.project.pth"):
        pth.unlink()
    report = _gaps(root)
    assert _keys(report) == []
    errors = "\n".join(str(e) for e in report["errors"])  # type: ignore[union-attr]
    assert "pkg" in errors and "pip install -e" in errors
    text = seed(root, "status").stdout
    assert "pip install -e" in text
    log = (root / "history" / "daemon.log").read_text()
    assert "pip install -e" in log


def test_an_environment_without_pytest_is_a_setup_problem(tmp_path: Path) -> None:
    # a unittest project whose .venv has no pytest: seed says what to install, no gap
    files = {
        "pkg.py": "def one() -> int:\n    return 1\n",
        "tests/test_pkg.py": (
            "import unittest\n\nimport pkg\n\n\nclass T(unittest.TestCase):\n"
            "    def test_one(self) -> None:\n        self.assertEqual(pkg.one(), 1)\n"
        ),
        ".gitignore": ".venv/\nhistory/\n",
        "seed.toml": _QUALITY,
    }
    root = make_repo(tmp_path / "repo", files)
    venv.EnvBuilder(with_pip=False, symlinks=True).create(root / ".venv")
    report = _gaps(root)
    assert _keys(report) == []
    errors = "\n".join(str(e) for e in report["errors"])  # type: ignore[union-attr]
    assert "has no pytest" in errors and "pip install pytest" in errors
    status = json.loads(seed(root, "status", "--json").stdout)
    assert any("has no pytest" in line for line in status["setup"])


_PLUGIN = "import pytest\n\n\n@pytest.fixture\ndef provided() -> str:\n    return 'by the plugin'\n"
_FAILS_PASS = (
    "import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\n"
    "def pytest_runtest_makereport(item, call):\n"
    "    outcome = yield\n    report = outcome.get_result()\n"
    "    if report.failed:\n        report.outcome = 'passed'\n"
)


def _plugin(packages: Path, name: str, code: str) -> dict[str, str]:
    """A pytest plugin installed as pip leaves one: its module and a dist-info naming it."""
    info = f"{name}-1.0.dist-info"
    files = {
        f"{name}.py": code,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n",
        f"{info}/entry_points.txt": f"[pytest11]\n{name} = {name}\n",
        f"{info}/RECORD": "",
    }
    for place, text in files.items():
        (packages / place).parent.mkdir(parents=True, exist_ok=True)
        (packages / place).write_text(text, encoding="utf-8")
    return files


PLUGGED = {
    ".gitignore": ".venv/\n__pycache__/\nhistory/\n",
    "tests/test_plugged.py": (
        "def test_the_plugins_fixture(provided: str) -> None:\n"
        "    assert provided == 'by the plugin'\n\n\n"
        "def test_a_real_failure() -> None:\n"
        "    assert 1 == 2\n"
    ),
}


@needs_bwrap
def test_a_plugin_installed_in_the_checkouts_venv_is_loaded_and_one_the_tree_adds_there_never(
    tmp_path: Path,
) -> None:
    # the person's .venv inside the checkout (the usual place): its plugins are the person's,
    # shown read-only over the export, and pytest loads them as in the person's own run
    root = make_repo(tmp_path / "repo", PLUGGED, config=_QUALITY)
    packages = _environment(root)
    _plugin(packages, "person_plugin", _PLUGIN)
    # a commit that puts a plugin at the same place in the tree: the person's venv covers it
    inside = packages.relative_to(root)
    for place, text in _plugin(tmp_path / "tree", "tree_plugin", _FAILS_PASS).items():
        (root / inside / place).parent.mkdir(parents=True, exist_ok=True)
        (root / inside / place).write_text(text, encoding="utf-8")
    git(root, "add", "-f", str(inside))
    git(root, "commit", "-qm", "a plugin in the tree")
    for place in _plugin(tmp_path / "tree", "tree_plugin", ""):
        (root / inside / place).unlink()  # the person's venv has no such plugin
    assert _keys(_gaps(root)) == ["pytest:tests/test_plugged.py::test_a_real_failure"]
