"""The two commands on a fresh machine: seed.py bootstraps its own virtualenv, or explains what is missing."""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from tests.support import SEED


def _bare_python(tmp_path: Path) -> Path:
    """An interpreter with nothing installed (like a fresh machine's python3)."""
    target = tmp_path / "bare"
    venv.EnvBuilder(with_pip=False).create(target)
    return target / "bin" / "python"


def _env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("VIRTUAL_ENV", "PYTHONPATH", "SEED_BOOTSTRAPPED", "SEED_VENV")
    }
    env.update(extra)
    return env


def test_no_bootstrap_refuses_and_names_what_is_missing(tmp_path: Path) -> None:
    python = _bare_python(tmp_path)
    result = subprocess.run(
        [str(python), str(SEED), "--no-bootstrap", "status"],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(),
        check=False,
    )
    assert result.returncode == 2
    assert "pydantic" in result.stderr and "requirements.lock" in result.stderr
    assert "--no-bootstrap" in result.stderr


def test_the_ray_engine_needs_the_ray_lock_and_only_it_does(tmp_path: Path) -> None:
    python = _bare_python(tmp_path)
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    said: dict[str, str] = {}
    for engine in ("local", "ray"):
        (root / "seed.toml").write_text(f'[scale]\nengine = "{engine}"\n')
        result = subprocess.run(
            [str(python), str(SEED), "--no-bootstrap", "--root", str(root), "once"],
            capture_output=True,
            text=True,
            timeout=120,
            env=_env(),
            check=False,
        )
        assert result.returncode == 2
        said[engine] = result.stderr
    assert "requirements-ray.lock" in said["ray"] and ", ray." in said["ray"]
    assert "requirements-ray.lock" not in said["local"] and ", ray." not in said["local"]


@pytest.mark.slow
def test_first_run_creates_the_virtualenv_and_reexecutes(tmp_path: Path) -> None:
    python = _bare_python(tmp_path)
    target = tmp_path / "venv"
    result = subprocess.run(
        [str(python), str(SEED), "--help"],
        capture_output=True,
        text=True,
        timeout=900,
        env=_env(SEED_VENV=str(target)),
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "usage: seed.py" in result.stdout
    assert f"creating a virtualenv in {target}" in result.stderr
    assert (target / "bin" / "python").exists()
    assert any(p.name.startswith(".seed-requirements-") for p in target.iterdir())
    again = subprocess.run(
        [str(python), str(SEED), "--help"],
        capture_output=True,
        text=True,
        timeout=300,
        env=_env(SEED_VENV=str(target)),
        check=False,
    )
    assert again.returncode == 0 and "creating a virtualenv" not in again.stderr
    assert sys.version_info >= (3, 11)
