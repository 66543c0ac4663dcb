"""Helpers for tests that drive seed on real git repositories in temporary folders."""

from __future__ import annotations

import atexit
import fcntl
import functools
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from domain import InboxItem, InboxText
from kernel.host.host import ModuleHost
from kernel.shell import bootstrap

SEED_HOME = Path(__file__).resolve().parent.parent
SEED = SEED_HOME / "seed.py"
FAKES = SEED_HOME / "tests" / "fakes"
AGENT = FAKES / "scripted_agent.py"

SAMPLE: dict[str, str] = {
    "calc.py": "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n",
    "tests/test_calc.py": "from calc import add, mul\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n",
    ".gitignore": "history/*\ninbox/*\n*.log\n__pycache__/\n",
    # ruff (the rules ruff long selected by default) and ruff format take part; pyright does not
    "pyproject.toml": '[tool.ruff.lint]\nselect = ["E4", "E7", "E9", "F"]\n\n[tool.ruff.format]\n',
}
"""A tiny clean project: two passing tests, no lint or type errors."""


def git(root: Path, *args: str) -> str:
    """Run git in root and return stdout (raises on failure)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        GIT_AUTHOR_NAME="user",
        GIT_AUTHOR_EMAIL="user@example.com",
        GIT_COMMITTER_NAME="user",
        GIT_COMMITTER_EMAIL="user@example.com",
    )
    return subprocess.run(
        ["git", *args], cwd=root, env=env, check=True, capture_output=True, text=True
    ).stdout


def make_repo(path: Path, files: Mapping[str, str], config: str | None = None) -> Path:
    """A git repository at path with these files committed on branch main (seed.toml too, if given)."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    for name, text in files.items():
        target = path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    if config is not None:
        (path / "seed.toml").write_text(config, encoding="utf-8")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    return path


def agent_config(
    tmp: Path,
    steps: Sequence[dict[str, Any]],
    *,
    timeout_s: float = 120,
    extra: str = "",
    rounds: Sequence[Sequence[dict[str, Any]]] = (),
) -> str:
    """seed.toml for the scripted agent with these steps; with `rounds`, one list of steps per
    round and that many rounds (else no repair round: one run, judged once)."""
    script = tmp / f"script-{len(list(tmp.glob('script-*.json')))}.json"
    body = {"rounds": [list(r) for r in rounds]} if rounds else {"steps": list(steps)}
    script.write_text(json.dumps(body), encoding="utf-8")
    argv = json.dumps([sys.executable, str(AGENT), str(script)])
    repair = max(len(rounds) - 1, 0)
    return (
        f'[agent]\nbackend = "command"\ncommand = {argv}\ntimeout_s = {timeout_s}\n'
        f"repair_rounds = {repair}\n{extra}"
    )


@functools.cache
def daemon_python() -> str:
    """The interpreter test daemons run with: seed's runtime lock only, as in a person's
    bootstrap virtualenv, kept under ~/.cache/seed by the lock's text and this Python.

    The suite's own interpreter has the test extras, and a daemon measures a project without a
    .venv with its own interpreter: hypothesis's pytest plugin alone costs every measured
    pytest run about a second (it imports all of hypothesis, rewritten afresh each run).
    Run by a seed daemon (seed measuring its own tests: sandboxed, no network to install
    with), this interpreter: the daemon's."""
    if os.environ.get("SEED_DEPTH"):
        return sys.executable
    lock = bootstrap.RUNTIME_LOCK
    key = hashlib.sha256(lock.read_bytes() + sys.version.encode() + sys.base_prefix.encode())
    env_dir = Path.home() / ".cache" / "seed" / f"test-daemon-{key.hexdigest()[:16]}"
    env_dir.parent.mkdir(parents=True, exist_ok=True)
    # the suite's workers start at once: one installs, the others wait for it
    with (env_dir.parent / f"{env_dir.name}.lock").open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        bootstrap.install(env_dir, lock)
    return str(env_dir / "bin" / "python")


def seed_argv(root: Path, *args: str, python: str | None = None) -> list[str]:
    """argv that runs seed.py on root (no bootstrap) with `python`, by default daemon_python()."""
    return [python or daemon_python(), str(SEED), "--no-bootstrap", "--root", str(root), *args]


def seed(
    root: Path,
    *args: str,
    timeout: float = 300,
    env: Mapping[str, str] | None = None,
    python: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run seed.py once to completion."""
    return subprocess.run(
        seed_argv(root, *args, python=python),
        capture_output=True,
        text=True,
        timeout=timeout,
        env=seed_env(env),
        stdin=subprocess.DEVNULL,
        check=False,
    )


UNSANDBOXED = '[guard]\nsandbox = "off"\n'
"""seed.toml lines for tests of the unsandboxed path (host pids, survivors of a killed daemon)."""

AGENT_IO = Path(tempfile.gettempdir()) / f"seed-agent-io-{os.getpid()}"
"""Where scripted agents leave barriers and traces: the one folder outside its worktree that
a sandboxed agent may write in these tests (SEED_SANDBOX_WRITABLE)."""


def agent_io(tmp: Path) -> Path:
    """A folder of AGENT_IO for one test's barrier files."""
    folder = AGENT_IO / f"{tmp.parent.name}-{tmp.name}"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def seed_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """This environment for a seed.py child, as a top-level daemon (no SEED_DEPTH), plus env."""
    full_env = {k: v for k, v in os.environ.items() if k != "SEED_DEPTH"}
    AGENT_IO.mkdir(parents=True, exist_ok=True)
    full_env["SEED_SANDBOX_WRITABLE"] = str(AGENT_IO)
    full_env.update(env or {})
    return full_env


def start_daemon(
    root: Path,
    *args: str,
    env: Mapping[str, str] | None = None,
    stdout: int = subprocess.PIPE,
    python: str | None = None,
) -> subprocess.Popen[str]:
    """Start seed.py on root (`run` unless args say otherwise) as a subprocess, stdin closed."""
    return subprocess.Popen(
        seed_argv(root, *args, python=python),
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        env=seed_env(env),
    )


def records(root: Path) -> list[dict[str, Any]]:
    """Every line of history/records.jsonl."""
    path = root / "history" / "records.jsonl"
    if not path.exists():
        return []
    return [
        json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
    ]


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file of the checkout (tracked, untracked and ignored, byte for byte) but history/, and the refs."""
    files: dict[str, bytes] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith((".git/", "history/")) or rel in (".git", "history") or path.is_dir():
            continue
        files[rel] = os.readlink(path).encode() if path.is_symlink() else path.read_bytes()
    files["<HEAD>"] = git(root, "rev-parse", "HEAD").encode()
    files["<branch>"] = git(root, "symbolic-ref", "HEAD").encode()
    refs = [line for line in git(root, "show-ref").splitlines() if "refs/heads/seed/" not in line]
    files["<refs>"] = "\n".join(refs).encode()
    files["<index>"] = git(root, "diff", "--cached", "--name-status").encode()
    return files


def agent_checkouts(root: Path) -> Path:
    """The folder of the agents' checkouts for this repository (outside its .git)."""
    from kernel.isolation.paths import discover

    return discover(root).checkouts


def worktrees(root: Path) -> list[str]:
    """Paths of every worktree git knows about."""
    return [
        line.split(" ", 1)[1]
        for line in git(root, "worktree", "list", "--porcelain").splitlines()
        if line.startswith("worktree ")
    ]


def branches(root: Path, prefix: str = "seed/") -> list[str]:
    """Local branches under a prefix."""
    out = git(root, "for-each-ref", "--format=%(refname:short)", f"refs/heads/{prefix}")
    return [line for line in out.splitlines() if line]


def pid_alive(pid: int) -> bool:
    """Whether a process exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2 :].split()[0] != "Z"


def wait_for(
    condition: Callable[[], bool],
    timeout: float = 60.0,
    what: str = "condition",
    alive: subprocess.Popen[str] | None = None,
) -> None:
    """Poll until condition() is true, or fail the test (at once if the `alive` process exits)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        if alive is not None and alive.poll() is not None:
            _, err = alive.communicate()
            raise AssertionError(
                f"the process exited ({alive.returncode}) before {what}: {err[-3000:]}"
            )
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


FAKE_CLIS = FAKES / "cli"
"""Fake claude, codex, aider, mini, gemini and opencode executables (tests/fakes/fake_*.py)."""

BROKEN_ADD = {**SAMPLE, "calc.py": SAMPLE["calc.py"].replace("return a + b", "return a - b")}
"""SAMPLE with a bug: tests/test_calc.py::test_add fails."""

FIX_ADD = [{"replace": "calc.py", "old": "return a - b", "new": "return a + b"}]
"""The scripted edit that fixes BROKEN_ADD."""


def fake_cli_config(backend: str, extra: str = "") -> str:
    """seed.toml for a fake agent CLI: the backend, and the fakes' variables passed through."""
    return (
        f'[agent]\nbackend = "{backend}"\nenv = ["FAKE_AGENT_SCRIPT", "FAKE_AGENT_TRACE"]\n'
        f"repair_rounds = 0\n{extra}"
    )


def fake_cli_env(
    tmp: Path, behaviour: Mapping[str, Any], path: str | None = None
) -> dict[str, str]:
    """Environment for seed: the fakes first on PATH, their script, and a trace file."""
    io = tmp / "agent-io"
    io.mkdir(exist_ok=True)
    script = io / f"fake-script-{len(list(io.glob('fake-script-*.json')))}.json"
    script.write_text(json.dumps(dict(behaviour)), encoding="utf-8")
    return {
        "PATH": path if path is not None else f"{FAKE_CLIS}{os.pathsep}{os.environ['PATH']}",
        "FAKE_AGENT_SCRIPT": str(script),
        "FAKE_AGENT_TRACE": str(io / "fake-trace.jsonl"),
        # the sandboxed fake reads its script and writes its trace here, nowhere else
        "SEED_SANDBOX_WRITABLE": os.pathsep.join([str(io), str(AGENT_IO)]),
    }


def fake_trace(tmp: Path) -> list[dict[str, Any]]:
    """Every run of a fake CLI (its --version calls included), in order."""
    path = tmp / "agent-io" / "fake-trace.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def isolated_path(tmp: Path, fakes: Sequence[str]) -> str:
    """A PATH holding only git, bwrap, python3 and these fake CLIs (so no real agent can be found)."""
    import shutil

    bin_dir = tmp / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    tools = {"git": shutil.which("git"), "bwrap": shutil.which("bwrap"), "python3": sys.executable}
    for name, target in tools.items():
        if target and not (bin_dir / name).exists():
            (bin_dir / name).symlink_to(target)
    for name in fakes:
        (bin_dir / name).symlink_to(FAKE_CLIS / name)
    return str(bin_dir)


AGENTS_DOC = SEED_HOME / "docs" / "agents.md"
"""The page with each backend's section ("## ... (`backend`)") and its tested seed.toml."""


def agent_section(backend: str) -> str:
    """The text of docs/agents.md's section for a backend, up to the next section."""
    import re

    text = AGENTS_DOC.read_text(encoding="utf-8")
    heading = re.search(rf"^##+ .*\(`{re.escape(backend)}`\)$", text, re.MULTILINE)
    assert heading, f"docs/agents.md has no section for {backend}"
    return re.split(r"^##+ ", text[heading.end() :], maxsplit=1, flags=re.MULTILINE)[0]


def agent_examples(backend: str) -> list[dict[str, Any]]:
    """Every seed.toml example of docs/agents.md's section for a backend, in order."""
    import re
    import tomllib

    blocks = re.findall(r"```toml\n(.*?)```", agent_section(backend), re.DOTALL)
    assert blocks, f"docs/agents.md's {backend} section has no toml example"
    return [tomllib.loads(block) for block in blocks]


def docs_example(backend: str) -> dict[str, Any]:
    """The first seed.toml example of docs/agents.md's section for a backend."""
    return agent_examples(backend)[0]


_READERS: list[ModuleHost] = []


def read_tasks(tasks: list[InboxText]) -> list[InboxItem | str]:
    """Inbox tasks read by seed's own modules, as a Context's host reads them (one module
    host for the test process, started on first use and stopped at its exit)."""
    if not _READERS:
        _READERS.append(ModuleHost(SEED_HOME, Path(os.devnull)))
        atexit.register(_READERS[0].stop)
    if not _READERS[0].running:
        _READERS[0].start()
    return _READERS[0].read_inbox(tasks)


def binary_patch(copy: Path) -> bytes:
    """What a worker sends back: `git diff --binary` of everything changed in a clone."""
    git(copy, "add", "-A")
    return subprocess.run(
        ["git", "diff", "--cached", "--binary", "--full-index", "HEAD"],
        cwd=copy,
        capture_output=True,
        check=True,
    ).stdout
