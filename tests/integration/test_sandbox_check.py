"""The sandbox check tells the truth: where seed and the target live (under /tmp, reached
through a link) never matters; the check and the real runs start the same interpreters."""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from kernel.config import GuardConfig
from kernel.isolation import jails, sandbox
from kernel.isolation.paths import Paths
from tests.support import SAMPLE, make_repo

pytestmark = pytest.mark.usefixtures("bwrap")

_ROOT = Path(__file__).resolve().parents[2]
_SITE = next(p for p in site.getsitepackages() if p.endswith("site-packages"))


def _venv(where: Path) -> Path:
    """A small virtualenv that sees this interpreter's packages (pydantic, pytest)."""
    venv.EnvBuilder(with_pip=False, symlinks=True).create(where)
    purelib = subprocess.run(
        [
            str(where / "bin" / "python"),
            "-c",
            "import sysconfig; print(sysconfig.get_path('purelib'))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(purelib) / "_shared.pth").write_text(f"{_SITE}\n", encoding="utf-8")
    return where / "bin" / "python"


@pytest.fixture
def linked(tmp_path: Path) -> Path:
    """A /tmp-like folder reached through a link (`/tmp/work -> /tmp/real`): the sandbox covers
    /tmp with its own, so the link itself is not there unless the kernel puts it there."""
    assert str(tmp_path).startswith("/tmp/")
    (tmp_path / "real").mkdir()
    (tmp_path / "work").symlink_to(tmp_path / "real")
    return tmp_path / "work"


def test_the_check_passes_with_seeds_python_under_a_linked_tmp_folder(linked: Path) -> None:
    python = _venv(linked / "seed-venv")
    probe = subprocess.run(
        [str(python), "-c", "from kernel.isolation import sandbox; print(sandbox.available())"],
        cwd=_ROOT,
        env={**os.environ, "PYTHONPATH": str(_ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert probe.returncode == 0, probe.stderr
    assert "ok=True" in probe.stdout, probe.stdout


_REAL_RUNS = """
import sys
from pathlib import Path
from kernel.isolation import jails, procs
from kernel.config import GuardConfig
from kernel.isolation.paths import Paths

root, target_python = Path(sys.argv[1]), Path(sys.argv[2])
paths = Paths(root=root, common=root / ".git")
guard = GuardConfig()
problem = jails.check(paths, guard, target_python)
print("check:", problem or "ok")
measure = jails.measurement_jail(paths, guard)
assert measure is not None
jailed = measure([str(target_python), "-c", "import calc; print('target', calc.add(2, 3))"], root, ())
done = procs.run(jailed.argv, cwd=str(root), timeout_s=60, merge_stderr=True)
print(done.text())
module = jails.module_jail(paths, guard)
assert module is not None
code = Path(sys.argv[3])
argv = module([sys.executable, "-c", "import pydantic, kernel; print('module server ok')"], code)
done = procs.run(argv, cwd="/", timeout_s=60, merge_stderr=True)
print(done.text())
"""


def test_real_runs_start_with_seed_and_the_target_under_a_linked_tmp_folder(
    linked: Path,
) -> None:
    # seed's own checkout and interpreter, and the target with its own environment, all
    # under the linked folder, as a newcomer's `git clone` into /tmp leaves them
    seed_copy = linked / "seed"
    seed_copy.mkdir()
    for name in ("kernel", "domain", "modules"):
        shutil.copytree(_ROOT / name, seed_copy / name, ignore=shutil.ignore_patterns("tests"))
    seed_python = _venv(linked / "seed-venv")
    target = make_repo(linked / "target", SAMPLE)
    target_python = _venv(target / ".venv")
    done = subprocess.run(
        [str(seed_python), "-c", _REAL_RUNS, str(target), str(target_python), str(seed_copy)],
        cwd=seed_copy,
        env={**os.environ, "PYTHONPATH": str(seed_copy)},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "check: ok" in done.stdout, done.stdout
    assert "target 5" in done.stdout, done.stdout
    assert "module server ok" in done.stdout, done.stdout


def test_a_target_interpreter_the_sandbox_cannot_start_is_named(tmp_path: Path) -> None:
    # the check runs the target's interpreter as a test run does: one that cannot start in
    # the sandbox is named, never "install bubblewrap"
    root = make_repo(tmp_path / "target", SAMPLE)
    broken = root / "python"
    broken.write_text("#!/nonexistent/interpreter\n")
    broken.chmod(0o755)
    problem = jails.check(Paths(root=root, common=root / ".git"), GuardConfig(), broken)
    assert str(broken) in problem
    assert "install bubblewrap" not in problem
    assert sandbox.available().ok
    assert sys.executable


def test_an_editable_install_made_through_a_link_imports_the_export(linked: Path) -> None:
    # `pip install -e .` run in /tmp/work/target writes that name into a .pth file; the
    # sandbox must know it, and show the export there as it does the checkout
    target = make_repo(linked / "target", {"src/pkg/__init__.py": "WHO = 'checkout'\n"})
    _venv(target / ".venv")
    python = target.resolve() / ".venv" / "bin" / "python"  # as seed names it: the root resolved
    purelib = next((target / ".venv" / "lib").glob("python3*/site-packages"))
    (purelib / "__editable__.pkg.pth").write_text(f"{target / 'src'}\n", encoding="utf-8")
    export = linked.resolve() / "export"  # seed exports under the resolved root
    shutil.copytree(target / "src", export / "src")
    (export / "src" / "pkg" / "__init__.py").write_text("WHO = 'export'\n")
    paths = Paths(root=target.resolve(), common=target.resolve() / ".git")
    jail = jails.measurement_jail(paths, GuardConfig())
    assert jail is not None
    jailed = jail([str(python), "-c", "import pkg; print(pkg.WHO)"], export, ())
    done = subprocess.run(jailed.argv, cwd="/", capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "export", done.stdout + done.stderr
