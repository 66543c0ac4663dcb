"""The import mode serves the project (issue 41): the tree's root packages and test folders
come first on sys.path, as pytest's default prepend mode puts them, so a project's `test/`
package is its own; what was imported before the project's code ran (the interpreter's,
pytest's, the kernel's plugin's) stays the standard library's."""

from __future__ import annotations

import json
import shutil
import site
import venv
from pathlib import Path

from tests.support import make_repo, seed

_QUALITY = '[quality]\ntools = ["pytest"]\n'

PDOC_LIKE = {
    ".gitignore": "history/\n__pycache__/\n",
    "pdoclike/__init__.py": "def double(x: int) -> int:\n    return x * 3\n",
    # mitmproxy/pdoc: the tests are a package named `test`, as the standard library's is
    "test/__init__.py": "",
    "test/helpers.py": "EXPECTED = 4\n",
    "test/test_double.py": (
        "from pdoclike import double\nfrom test.helpers import EXPECTED\n\n\n"
        "def test_double() -> None:\n    assert double(2) == EXPECTED\n\n\n"
        "def test_zero() -> None:\n    assert double(0) == 0\n"
    ),
}


def _gaps(root: Path) -> dict[str, object]:
    shown = seed(root, "gaps", "--json")
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)


def _keys(report: dict[str, object]) -> list[str]:
    return sorted(str(g["key"]) for g in report["gaps"])  # type: ignore[index, union-attr]


def test_a_suite_in_a_package_named_test_is_the_projects_and_its_failures_are_gaps(
    tmp_path: Path,
) -> None:
    root = make_repo(tmp_path / "repo", PDOC_LIKE, config=_QUALITY)
    report = _gaps(root)
    assert _keys(report) == ["pytest:test/test_double.py::test_double"]
    assert report["errors"] == []
    status = json.loads(seed(root, "status", "--json").stdout)
    assert status["setup"] == []


# The plugin holds `json` (its facts are JSON lines): a tree-root json.py, and a conftest
# that drops the standard library's json from sys.modules to import the tree's, would turn
# every failure into a pass if the plugin's `json` were the tree's.
FORGED_JSON = (
    "import sys\n\n"
    "def dumps(record, *args, **kwargs):\n"
    "    if record.get('outcome') == 'failed':\n"
    "        record = {**record, 'outcome': 'passed'}\n"
    "    return repr(record).replace(\"'\", '\"')\n\n"
    "def loads(text, *args, **kwargs):\n"
    "    return {}\n"
)
SHADOWING_CONFTEST = (
    "import sys\n\n"
    "sys.modules.pop('json', None)\n"
    "import json  # the tree's, now: the tree is first on sys.path\n\n"
    "assert hasattr(json, 'loads')\n"
)


def test_a_tree_module_cannot_replace_one_the_plugin_already_holds(tmp_path: Path) -> None:
    files = {**PDOC_LIKE, "json.py": FORGED_JSON, "conftest.py": SHADOWING_CONFTEST}
    root = make_repo(tmp_path / "repo", files, config=_QUALITY)
    report = _gaps(root)
    # the failure is still a failure, and the passing test still passes
    assert _keys(report) == ["pytest:test/test_double.py::test_double"]
    assert report["errors"] == []


_SITE = next(p for p in site.getsitepackages() if p.endswith("site-packages"))
"""This interpreter's packages (pytest), which the fixture's environment sees through a
`.pth` entry: the environment stays small and offline."""

SRC = {
    ".gitignore": ".venv/\nhistory/\n__pycache__/\n",
    "src/pkg/__init__.py": "",
    "src/pkg/sub.py": "def one() -> int:\n    return 1\n",
    "tests/test_sub.py": (
        "from pkg.sub import one\n\n\ndef test_one() -> None:\n    assert one() == 1\n"
    ),
    "seed.toml": '[quality]\ntools = ["pytest"]\npython = ".venv/bin/python"\n',
}


def _environment(root: Path) -> Path:
    """A `.venv` in the checkout that sees pytest, with nothing of the project installed."""
    venv.EnvBuilder(with_pip=False, symlinks=True).create(root / ".venv")
    [packages] = (root / ".venv").glob("lib/python3*/site-packages")
    (packages / "_shared.pth").write_text(f"{_SITE}\n", encoding="utf-8")
    return packages


def test_the_advice_says_what_the_environment_has_installed(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", SRC)
    packages = _environment(root)
    # an old release of the project installed as a copy: it has no pkg.sub
    (packages / "pkg").mkdir()
    (packages / "pkg" / "__init__.py").write_text("", encoding="utf-8")
    info = packages / "pkg-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: pkg\nVersion: 0.1\n")
    (info / "RECORD").write_text("pkg/__init__.py,,\npkg-0.1.dist-info/METADATA,,\n")
    errors = "\n".join(str(e) for e in _gaps(root)["errors"])  # type: ignore[union-attr]
    assert f"imports pkg from {packages / 'pkg'} (pkg 0.1), not from this repository" in errors
    assert "has no pkg installed" not in errors
    # with nothing installed, the advice says so
    shutil.rmtree(packages / "pkg")
    shutil.rmtree(info)
    errors = "\n".join(str(e) for e in _gaps(root)["errors"])  # type: ignore[union-attr]
    assert "cannot import pkg, which this repository holds (src/pkg)" in errors
    assert "has no pkg installed: install the project into it" in errors
