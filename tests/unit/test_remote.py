"""A remote agent run without Ray: the worker's side in this process, the kernel's side after.

The worker clones from the kernel's bundle, runs the agent in its own sandbox and sends the
files it left as a binary patch; the kernel applies a patch only inside a fresh checkout (never
outside it or into its .git), up to a bound.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernel.isolation import agentgit, remote, sandbox, worker
from kernel.isolation.paths import Paths, discover
from tests.support import binary_patch, git, make_repo

FILES = {
    "calc.py": "def add(a, b):\n    return a + b\n",
    "gone.txt": "to be removed\n",
    "run.sh": "#!/bin/sh\necho hi\n",
    ".gitignore": "*.log\n",
}

AGENT = r"""
import os, pathlib, sys
here = pathlib.Path(sys.argv[1])
(here / "calc.py").write_text("def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n")
(here / "blob.bin").write_bytes(bytes(range(256)) * 4)
(here / "gone.txt").unlink()
os.chmod(here / "run.sh", 0o755)
os.symlink("calc.py", here / "alias.py")
(here / "noise.log").write_text("ignored by the base's .gitignore\n")
pathlib.Path(os.environ["SEED_RESULT_FILE"]).write_text('{"ok": true}')
print("agent ran in", os.getcwd() == str(here), "prompt:", pathlib.Path(sys.argv[2]).read_text())
"""


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Paths:
    """A repository with a text file, one to delete and a script, and a cache of its own."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return discover(make_repo(tmp_path / "repo", FILES))


def _head(paths: Paths) -> str:
    return git(paths.root, "rev-parse", "HEAD").strip()


def _job(paths: Paths, tmp_path: Path, argv: list[str], **more: object) -> remote.Job:
    values: dict[str, object] = {
        "repository": "demo",
        "candidate": "c1",
        "base": _head(paths),
        "argv": tuple(argv),
        "prompt": "add sub",
        "iteration_id": "iter-0001",
        "timeout_s": 60.0,
        "cache": str(tmp_path / "worker"),
    }
    values.update(more)
    return remote.Job(**values)  # type: ignore[arg-type]


def _patch(paths: Paths, tmp_path: Path, edit: str) -> bytes:
    """A patch made the way a worker makes it: `git diff --binary` of a copy edited by `edit`
    (shell, run in the copy)."""
    copy = tmp_path / "copy"
    shutil.rmtree(copy, ignore_errors=True)
    git(tmp_path, "clone", "-q", str(paths.root), str(copy))
    subprocess.run(["sh", "-c", edit], cwd=copy, check=True)
    return binary_patch(copy)


def test_the_worker_runs_the_agent_sandboxed_and_the_kernel_gets_exactly_its_files(
    repo: Paths, tmp_path: Path, bwrap: None
) -> None:
    job = _job(repo, tmp_path, [sys.executable, "-c", AGENT, "{worktree}", "{prompt_file}"])
    got = worker.work(job, remote.bundle(repo, job.base, "t"))
    assert got.refused == "" and got.exit_code == 0 and not got.timed_out, got
    assert "agent ran in True prompt: add sub" in got.log
    assert got.result == '{"ok": true}' and got.usage_said == "reported by the worker"
    assert got.host and got.duration_s > 0
    # the worker leaves nothing of the run behind; its clone stays cached
    cache = tmp_path / "worker"
    assert not any((cache / "runs").iterdir()) and not any((cache / "homes").iterdir())
    assert (cache / "repos" / "demo" / ".git").is_dir()
    checkout = remote.apply(repo, "wt-apply", job.base, got.patch)
    assert checkout == repo.checkouts / "wt-apply"
    assert (checkout / "blob.bin").read_bytes() == bytes(range(256)) * 4
    assert "def sub" in (checkout / "calc.py").read_text()
    assert not (checkout / "gone.txt").exists() and not (checkout / "noise.log").exists()
    assert os.access(checkout / "run.sh", os.X_OK)
    assert os.readlink(checkout / "alias.py") == "calc.py"
    # a fresh agent checkout: its own .git at the base, the patch not committed
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=checkout, capture_output=True, text=True, check=True
    )
    assert head.stdout.strip() == job.base
    agentgit.remove(checkout)


def test_a_second_job_reuses_the_workers_clone(repo: Paths, tmp_path: Path, bwrap: None) -> None:
    job = _job(repo, tmp_path, ["true"])
    assert worker.work(job, remote.bundle(repo, job.base, "t")).patch == b""
    # the base is in the cached clone: an empty bundle is never read
    again = worker.work(remote.Job(**{**job.__dict__, "candidate": "c2"}), b"")
    assert again.refused == "" and again.exit_code == 0 and again.patch == b""


HOSTILE = {
    "dotdot": (
        "diff --git a/../escaped b/../escaped\nnew file mode 100644\nindex 0000000..1\n"
        "--- /dev/null\n+++ b/../escaped\n@@ -0,0 +1 @@\n+owned\n"
    ),
    "dotgit": (
        "diff --git a/.git/hooks/post-checkout b/.git/hooks/post-checkout\n"
        "new file mode 100755\n--- /dev/null\n+++ b/.git/hooks/post-checkout\n"
        "@@ -0,0 +1 @@\n+owned\n"
    ),
    "dotgit-case": (
        "diff --git a/.GIT/config b/.GIT/config\nnew file mode 100644\n--- /dev/null\n"
        "+++ b/.GIT/config\n@@ -0,0 +1 @@\n+owned\n"
    ),
    "absolute": (
        "diff --git a//tmp/escaped b//tmp/escaped\nnew file mode 100644\n--- /dev/null\n"
        "+++ b//tmp/escaped\n@@ -0,0 +1 @@\n+owned\n"
    ),
    "through-a-link": (
        "diff --git a/out b/out\nnew file mode 120000\n--- /dev/null\n+++ b/out\n"
        "@@ -0,0 +1 @@\n+../../\n\\ No newline at end of file\n"
        "diff --git a/out/escaped b/out/escaped\nnew file mode 100644\n--- /dev/null\n"
        "+++ b/out/escaped\n@@ -0,0 +1 @@\n+owned\n"
    ),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hand_made_patch_reaching_outside_or_into_git_is_refused_and_writes_nothing(
    repo: Paths, tmp_path: Path, name: str
) -> None:
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(remote.PatchRefused, match="refused"):
        remote.apply(repo, "wt-hostile", _head(repo), HOSTILE[name].encode())
    assert not (repo.checkouts / "wt-hostile").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert not Path("/tmp/escaped").exists()
    assert not (repo.root / ".git" / "hooks" / "post-checkout").exists()
    assert git(repo.root, "status", "--porcelain") == ""


def test_a_patch_over_the_bound_is_refused_with_its_size(repo: Paths, tmp_path: Path) -> None:
    patch = _patch(repo, tmp_path, "head -c 5000 /dev/urandom > big.bin")
    with pytest.raises(remote.PatchRefused, match=rf"{len(patch):,} bytes, over the bound 1,000"):
        remote.apply(repo, "wt-big", _head(repo), patch, limit=1000)
    assert not (repo.checkouts / "wt-big").exists()


def test_a_worker_without_bubblewrap_refuses_and_never_runs_the_agent(
    repo: Paths, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker whose PATH holds no bwrap (as on a machine without bubblewrap)."""
    ran = tmp_path / "ran"
    empty = tmp_path / "no-bwrap"
    empty.mkdir()
    job = _job(repo, tmp_path, ["/bin/touch", str(ran)])
    bundle = remote.bundle(repo, job.base, "t")
    monkeypatch.setenv("PATH", str(empty))
    sandbox.available.cache_clear()
    try:
        got = worker.work(job, bundle)
    finally:
        sandbox.available.cache_clear()
    assert got.refused.startswith("refused: no sandbox on this worker: bubblewrap (bwrap) is not")
    assert got.exit_code is None and got.patch == b"" and not ran.exists()


def test_processes_started_while_adopting_survive_the_orphan_sweep() -> None:
    """A local Ray instance's processes are the daemon's children: the sweep after every run
    would end them (and their process group) unless they are adopted."""
    from kernel.isolation import procs
    from kernel.isolation.rayengine import adopting

    with adopting() as adopted:
        kept = subprocess.Popen(["sleep", "30"], start_new_session=True)
    stray = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        assert adopted == [kept.pid]
        done = procs.run(["true"], cwd="/", timeout_s=10, sweep_rounds=1)
        # other tests' leftovers in this process may be swept too: only these two are ours
        assert stray.pid in done.escaped and kept.pid not in done.escaped and kept.poll() is None
    finally:
        for process in (kept, stray):
            process.kill()
            process.wait()
        for pid in adopted:
            procs.forget_known(pid)


def test_nothing_the_daemon_loads_imports_ray() -> None:
    """Every kernel module imported (the Ray engine's too): Ray is loaded only when an engine
    starts."""
    code = (
        "import importlib, pkgutil, sys, kernel\n"
        "for m in pkgutil.walk_packages(kernel.__path__, 'kernel.'):\n"
        "    if 'pytest_plugin' not in m.name: importlib.import_module(m.name)\n"
        "import seed\n"
        "assert 'kernel.isolation.rayengine' in sys.modules\n"
        "print(sorted(n for n in sys.modules if n == 'ray' or n.startswith('ray.')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_start_installs_the_ray_extra_only_for_the_ray_engine(tmp_path: Path) -> None:
    from kernel.shell.bootstrap import ray_wanted

    config = tmp_path / "seed.toml"
    assert not ray_wanted(config)
    config.write_text('[scale]\nengine = "local"\n')
    assert not ray_wanted(config)
    config.write_text('[scale]\nengine = "ray"\naddress = ""\n')
    assert ray_wanted(config)
    config.write_text("[scale\n")
    assert not ray_wanted(config)


def test_scale_defaults_to_this_machine_and_a_bad_door_is_named(tmp_path: Path) -> None:
    from kernel.config import load_config
    from kernel.errors import ConfigError

    config = tmp_path / "seed.toml"
    config.write_text("")
    scale = load_config(config).scale
    assert (scale.engine, scale.address, scale.door, scale.worker_cache) == ("local", "", "", "")
    config.write_text('[scale]\nengine = "ray"\ndoor = "0.0.0.0:7000"\n')
    assert load_config(config).scale.door == "0.0.0.0:7000"
    config.write_text('[scale]\ndoor = "anywhere at all"\n')
    with pytest.raises(ConfigError, match=r"scale\.door"):
        load_config(config)
    config.write_text('[scale]\nengine = "kubernetes"\n')
    with pytest.raises(ConfigError, match=r"scale\.engine"):
        load_config(config)
