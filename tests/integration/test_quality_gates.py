"""seed holds itself to its own gates: ruff, ruff format and pyright (strict on kernel/, domain/, modules/)."""

from __future__ import annotations

import subprocess
import sys

from kernel.measuring.measure import ruff_binary
from tests.support import SEED_HOME


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv,
        cwd=SEED_HOME,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def test_ruff_check_is_clean() -> None:
    result = _run(ruff_binary(), "check", "--no-cache", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_is_clean() -> None:
    result = _run(ruff_binary(), "format", "--check", "--no-cache", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_pyright_is_clean() -> None:
    result = _run(sys.executable, "-m", "pyright", "--pythonpath", sys.executable)
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr
