"""A fixture repository with one planted gap of every kind, measured by the real tools."""

from __future__ import annotations

import sys
from pathlib import Path

from domain import Measurements
from kernel.config import QualityConfig
from kernel.measuring.gate import Gate, freeze_gate
from kernel.measuring.measure import Target, measure
from tests.support import make_repo

PLANTED: dict[str, str] = {
    "pyproject.toml": (
        '[tool.ruff.lint]\nselect = ["E", "F"]\n\n[tool.ruff.format]\n\n[tool.pyright]\n\n'
        '[tool.pytest.ini_options]\npythonpath = ["."]\n'
    ),
    "lib/__init__.py": "",
    "lib/calc.py": (
        "import os\n"  # ruff F401 (fixable)
        "\n\n"
        "def double(x: int) -> int:\n"
        "    return x * 2\n"
        "\n\n"
        "def halve(x: int) -> str:\n"
        "    return x // 2\n"  # pyright reportReturnType, in any mode
        "\n\n"
        "def boom() -> None:\n"
        '    raise ValueError("boom inside the library")\n'
    ),
    "lib/loose.py": "def ident(x):\n    return x\n",  # fine in basic mode
    "strictpkg/__init__.py": "",
    "strictpkg/loose.py": "def ident(x):\n    return x\n",  # strict only: parameter type missing
    "lib/ugly.py": "VALUES = [1,\n  2]\n",  # ruff format would rewrite it
    "lib/broken.py": "def oops(:\n    pass\n",  # a syntax error
    "tests/test_calc.py": (
        "import pytest\n"
        "\n"
        "from lib.calc import boom, double\n"
        "\n\n"
        '@pytest.mark.parametrize(("x", "want"), [(1, 2), (3, 7)])\n'
        "def test_double(x: int, want: int) -> None:\n"
        "    assert double(x) == want\n"
        "\n\n"
        "def test_boom() -> None:\n"
        "    boom()\n"
    ),
    "tests/test_broken.py": "import lib.missing_module\n\n\ndef test_never() -> None:\n    pass\n",
    ".gitignore": "history/*\ninbox/*\n__pycache__/\n",
}
"""The planted gaps, by the tool that finds them:
ruff: F401 in lib/calc.py, invalid-syntax in lib/broken.py;
ruff format: lib/ugly.py (and lib/broken.py cannot be parsed);
pyright: reportReturnType in lib/calc.py, a syntax error in lib/broken.py, and (strict only)
reportMissingParameterType and friends in strictpkg/loose.py (lib/loose.py, the same code
outside the strict paths, has none);
pytest: test_double[3-7] fails, test_boom fails with a frame in lib/calc.py, and
tests/test_broken.py cannot be collected."""


OLD_STYLE = (
    "import os\n"
    "from typing import List, Optional\n"
    "\n\n"
    "def total(x: Optional[List[int]]) -> int:\n"
    '    return sum(x or [], start=int("0"))\n'
)
"""UP006/UP045 (and UP035) over old-style annotations, F401 for os: all safely fixable."""

WRITING: dict[str, str] = {
    "pyproject.toml": (
        "[tool.ruff]\n"
        "fix = true\n"
        "unsafe-fixes = true\n"
        "show-fixes = true\n"
        'cache-dir = ".ruff-here"\n'
        'output-format = "concise"\n'
        'select = ["UP", "F401"]\n'
        "\n[tool.ruff.format]\n"
        'quote-style = "single"\n'
        "\n[tool.pyright]\n"
        'typeCheckingMode = "basic"\n'
        "\n[tool.pytest.ini_options]\n"
        'addopts = "-p cacheprovider"\n'
    ),
    "old.py": OLD_STYLE,
    "typed.py": 'WORD: int = "seven"\n',
    "tests/test_old.py": "from old import total\n\n\ndef test_total():\n    assert total([1, 2]) == 3\n",
    ".gitignore": "history/*\ninbox/*\n",
}
"""A target whose ruff configuration fixes (unsafely too), caches in the tree and formats;
and one pyright error (typed.py)."""


def target_for(root: Path, strict: tuple[str, ...] = ("strictpkg",), **quality: object) -> Target:
    """A Target for a fixture repository, run with this interpreter."""
    return Target(
        root=root,
        python=sys.executable,
        quality=QualityConfig.model_validate(quality),
        strict=strict,
    )


def planted_repo(path: Path, files: dict[str, str] | None = None) -> Path:
    """The planted repository (or another file set) committed at path."""
    return make_repo(path, PLANTED if files is None else files)


def measure_repo(root: Path, work: Path, target: Target | None = None) -> tuple[Measurements, Gate]:
    """Every tool on a repository's files, with its own gate."""
    chosen = target or target_for(root)
    gate = freeze_gate(root, work / "gate", chosen.quality)
    return measure(root, chosen, gate, work / "pytest"), gate
