"""The command line on a person's first day: where seed works, pipes, ids, --version, init,
stopping, and live progress while an agent works (real subprocesses, real git)."""

from __future__ import annotations

import itertools
import os
import pty
import signal
import subprocess
import sys
import threading
import time
import tomllib
from pathlib import Path

import pytest

from domain import DaemonStatus
from kernel.config import load_config
from tests.histories import synthetic, write_records
from tests.support import (
    SAMPLE,
    SEED,
    SEED_HOME,
    agent_config,
    agent_io,
    daemon_python,
    git,
    make_repo,
    records,
    seed,
    seed_env,
    start_daemon,
    wait_for,
)


def _here(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """seed.py run from cwd with no --root, as a person types it."""
    return subprocess.run(
        [sys.executable, str(SEED), "--no-bootstrap", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env=seed_env(),
        stdin=subprocess.DEVNULL,
        check=False,
    )


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_repo(
        tmp_path_factory.mktemp("first-day") / "target", SAMPLE, '[agent]\nbackend = "none"\n'
    )


def test_status_names_the_repository_the_person_stands_in(target: Path) -> None:
    (target / "tests").mkdir(exist_ok=True)
    result = _here(target / "tests", "status", "--json")
    assert result.returncode == 0, result.stderr
    assert DaemonStatus.model_validate_json(result.stdout).root == str(target)
    shown = _here(target, "status").stdout
    assert f"repository:  {target}" in shown


def test_outside_any_repository_is_a_clear_usage_error(tmp_path: Path) -> None:
    result = _here(tmp_path, "status")
    assert result.returncode == 2
    assert "not inside a git repository" in result.stderr and str(tmp_path) in result.stderr


def test_a_removed_current_directory_is_a_usage_error(tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    in_gone = ["sh", "-c", 'cd "$1" && rmdir "$1" && shift && exec "$@"', "sh", str(gone)]
    result = subprocess.run(
        [*in_gone, sys.executable, str(SEED), "--no-bootstrap", "status"],
        capture_output=True,
        text=True,
        timeout=120,
        env=seed_env(),
        check=False,
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "give --root DIR" in result.stderr


def test_root_and_config_are_accepted_after_the_command(target: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.toml"
    other.write_text('[agent]\nbackend = "ruff-fix"\n')
    result = _here(tmp_path, "status", "--json", "--root", str(target), "--config", str(other))
    assert result.returncode == 0, result.stderr
    status = DaemonStatus.model_validate_json(result.stdout)
    assert status.root == str(target) and status.backend == "ruff-fix"
    # `once --root X`: test_once_off_a_terminal_prints_one_line_per_phase


def test_status_shows_a_dirty_checkout_and_the_test_interpreter(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", SAMPLE, '[agent]\nbackend = "none"\n')
    (repo / "calc.py").write_text(SAMPLE["calc.py"] + "# mine\n")
    (repo / "notes.txt").write_text("draft\n")
    status = DaemonStatus.model_validate_json(seed(repo, "status", "--json").stdout)
    assert status.dirty == ("calc.py", "notes.txt")
    assert status.python == daemon_python() and "no .venv" in status.python_reason
    shown = seed(repo, "status").stdout
    assert "uncommitted: calc.py, notes.txt" in shown
    assert f"python:      {daemon_python()}" in shown


def _closed_pipe(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run seed with stdout a pipe whose reader has already gone (`| head` that stopped early)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [sys.executable, str(SEED), "--no-bootstrap", "--root", str(root), *args],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=300,
            env=seed_env(),
            stdin=subprocess.DEVNULL,
            check=False,
        )
    finally:
        os.close(write_end)


@pytest.fixture(scope="module")
def with_history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = make_repo(
        tmp_path_factory.mktemp("hist") / "repo", SAMPLE, '[agent]\nbackend = "none"\n'
    )
    write_records(repo / "history", synthetic(12))
    return repo


@pytest.mark.parametrize("args", [("status",), ("history", "--json"), ("history",)])
def test_a_pipe_closed_early_ends_quietly(with_history: Path, args: tuple[str, ...]) -> None:
    result = _closed_pipe(with_history, *args)
    assert "Traceback" not in result.stderr and "BrokenPipe" not in result.stderr, result.stderr
    assert result.returncode in (0, -signal.SIGPIPE)


def test_history_finds_an_iteration_by_number_or_prefix(with_history: Path) -> None:
    by_number = seed(with_history, "history", "2", "--json")
    assert by_number.returncode == 0, by_number.stderr
    assert '"iteration_id": "iter-0002-' in by_number.stdout
    by_prefix = seed(with_history, "history", "iter-0002", "--json")
    assert by_prefix.stdout == by_number.stdout
    ambiguous = seed(with_history, "history", "iter-001")
    assert ambiguous.returncode == 2
    assert "iter-001 matches 3 iterations" in ambiguous.stderr
    assert all(f"iter-001{n}-" in ambiguous.stderr for n in (0, 1, 2))
    assert seed(with_history, "history", "99").returncode == 2


def test_version(tmp_path: Path) -> None:
    result = _here(tmp_path, "--version")
    assert result.returncode == 0, result.stderr
    described = subprocess.run(
        ["git", "describe", "--always", "--dirty", "--tags"],
        cwd=SEED_HOME,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    assert result.stdout.startswith("seed ") and described in result.stdout


def test_init_writes_a_short_commented_config_and_says_what_next(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    result = _here(repo, "init")
    assert result.returncode == 0, result.stderr
    text = (repo / "seed.toml").read_text()
    config = load_config(repo / "seed.toml")  # valid: the daemon reads it as written
    assert config.agent.backend == "auto"
    parsed = tomllib.loads(text)
    assert set(parsed) <= {"agent", "budget", "guard", "quality"}
    assert "prices" not in parsed.get("agent", {})
    comments = [line for line in text.splitlines() if line.lstrip().startswith("#")]
    assert len(comments) >= 8 and len(text.splitlines()) <= 40
    for word in ("model", "max_cost_usd_per_day", "sandbox", "python"):
        assert word in text
    steps = result.stdout[result.stdout.index("next:") :]
    assert "seed.py status" in steps and "seed.py once" in steps and "seed.py run" in steps


def test_the_daemon_logs_a_stopped_line(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", SAMPLE, '[agent]\nbackend = "none"\n')
    daemon = start_daemon(repo)
    try:
        wait_for(
            lambda: '"phase": "idle"' in _read(repo / "history" / "status.json"),
            what="the daemon to go idle",
            alive=daemon,
        )
    finally:
        daemon.send_signal(signal.SIGTERM)
        _, err = daemon.communicate(timeout=60)
    assert daemon.returncode == 0, err
    assert err.rstrip().splitlines()[-1].endswith("stopped (SIGTERM)")
    assert "stopped (SIGTERM)" in (repo / "history" / "daemon.log").read_text()


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def test_once_shows_the_agents_latest_line_and_use_so_far_while_it_works(tmp_path: Path) -> None:
    barrier, more = agent_io(tmp_path) / "go", agent_io(tmp_path) / "more"
    steps = [
        {"result": {"summary": "half way", "tokens_used": 1200, "cost_usd": 0.01}},
        {"print": "reading calc.py to find the bug"},
        {"wait_for": str(more)},
        {"result": {"summary": "done", "tokens_used": 3400, "cost_usd": 0.03}},
        {"print": "\nediting calc.py"},
        {"wait_for": str(barrier)},
        {"replace": "calc.py", "old": "a * b", "new": "b * a"},
    ]
    files = {**SAMPLE, "ROADMAP.md": "# Soon\n- [ ] tidy mul\n"}
    repo = make_repo(tmp_path / "repo", files, agent_config(tmp_path, steps))
    main, child = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, str(SEED), "--no-bootstrap", "--root", str(repo), "once"],
        stdin=subprocess.DEVNULL,
        stdout=child,
        stderr=subprocess.DEVNULL,
        env=seed_env({"COLUMNS": "240"}),  # the line is cut to the terminal's width
    )
    os.close(child)
    seen = b""
    try:
        deadline = time.monotonic() + 120
        while b"reading calc.py to find the bug" not in seen and time.monotonic() < deadline:
            seen += _read_some(main)
        assert b"reading calc.py to find the bug" in seen, seen[-2000:]
        assert b"agent running" in seen and b"\r" in seen  # one line, drawn again in place
        _follows_the_running_daemon(repo)
        # the tokens and cost so far, from the run's own output while it runs, and growing
        seen += _read_until(main, b"1,200 tokens, $0.0100 so far | agent: reading calc.py")
        more.write_text("go")
        seen += _read_until(main, b"3,400 tokens, $0.0300 so far | agent: editing calc.py")
        shown = seed(repo, "status").stdout
        assert "3,400 tokens, $0.0300 so far" in shown, shown
    finally:
        more.write_text("go")
        barrier.write_text("go")
        process.wait(timeout=120)
        os.close(main)
    assert process.returncode == 0
    [record] = records(repo)
    assert (record["tokens_used"], record["cost_usd"]) == (3400, 0.03)  # the run's end decides
    assert '"used"' not in (repo / "history" / "status.json").read_text()


def _read_until(fd: int, wanted: bytes) -> bytes:
    seen = b""
    deadline = time.monotonic() + 60
    while wanted not in seen and time.monotonic() < deadline:
        seen += _read_some(fd)
    assert wanted in seen, seen[-2000:]
    return seen


def _follows_the_running_daemon(repo: Path) -> None:
    """`status --follow` from elsewhere shows the agent at work, and Ctrl-C ends it quietly."""
    follow = subprocess.Popen(
        [sys.executable, str(SEED), "--no-bootstrap", "status", "--follow", "--root", str(repo)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=seed_env(),
    )
    stream = follow.stdout
    assert stream is not None
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(stream.readline, "")), daemon=True)
    reader.start()
    try:
        wait_for(
            lambda: any(line.startswith("agent running: command on") for line in lines),
            what="status --follow to show the agent",
            alive=follow,
        )
    finally:
        follow.send_signal(signal.SIGINT)
        _, err = follow.communicate(timeout=60)
    assert follow.returncode == 0 and "Traceback" not in err, err


def _read_some(fd: int) -> bytes:
    import select

    ready, _, _ = select.select([fd], [], [], 0.5)
    if not ready:
        return b""
    try:
        return os.read(fd, 4096)
    except OSError:  # the child closed its side
        time.sleep(0.1)
        return b""


def test_once_off_a_terminal_prints_one_line_per_phase(tmp_path: Path) -> None:
    files = {**SAMPLE, "calc.py": "import os\n\n\n" + SAMPLE["calc.py"]}
    repo = make_repo(tmp_path / "repo", files, '[agent]\nbackend = "ruff-fix"\n')
    result = _here(tmp_path, "once", "--root", str(repo))  # --root after the command
    assert result.returncode == 0, result.stderr
    assert git(repo, "log", "-1", "--format=%an").strip() != "user"  # it landed, on repo
    lines = result.stdout.splitlines()
    assert "\r" not in result.stdout
    phases = [line.split(":")[0] for line in lines]
    assert phases[-1] == "stopped" and "analysing" in phases[:2] and "verifying" in phases
    assert len(lines) < 20 and all(a != b for a, b in itertools.pairwise(lines))


def test_the_bootstrap_reexecution_keeps_the_current_directory(
    tmp_path: Path, target: Path
) -> None:
    import hashlib
    import venv

    bare = tmp_path / "bare"
    venv.EnvBuilder(with_pip=False).create(bare)  # a fresh machine's python3: nothing installed
    # the "bootstrapped" virtualenv: this one's interpreter and packages, its lock marked installed
    ready = tmp_path / "ready"
    (ready / "bin").mkdir(parents=True)
    (ready / "bin" / "python").symlink_to(sys.executable)
    (ready / "bin" / "ruff").symlink_to(Path(sys.prefix) / "bin" / "ruff")
    (ready / "lib").symlink_to(Path(sys.prefix) / "lib")
    (ready / "pyvenv.cfg").write_bytes((Path(sys.prefix) / "pyvenv.cfg").read_bytes())
    lock = (SEED_HOME / "requirements.lock").read_bytes()
    (ready / f".seed-requirements-{hashlib.sha256(lock).hexdigest()[:16]}").write_text("ok\n")
    env = {k: v for k, v in seed_env().items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    result = subprocess.run(
        [str(bare / "bin" / "python"), str(SEED), "status", "--json"],
        cwd=target,
        capture_output=True,
        text=True,
        timeout=300,
        env={**env, "SEED_VENV": str(ready)},
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert DaemonStatus.model_validate_json(result.stdout).root == str(target)
