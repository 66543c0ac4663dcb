"""Issue 23, items 2 and 8: module code and test runs see only what they need.

Module code runs sandboxed (the module server and the boot self-check), the plan's gap is the
kernel's own, test runs get an environment built from an allow-list, HOME's folders are shown
by exact path, sockets under /run and XDG_RUNTIME_DIR are out of reach, and a fork bomb in a
test run is bounded per sandbox, never per user. Each test runs the real daemon or module
server in the real bubblewrap sandbox and asserts what a person would check.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from domain import Diagnostic, Gap, GapCategory, GapReport, ProjectState, Severity, Tool
from kernel.errors import HostError
from kernel.host.host import ModuleHost
from tests.reliability.helpers import FAST, make_project
from tests.support import SAMPLE, SEED_HOME, git, records, seed_env

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("bwrap")]

SECRET = f"AKIA-{uuid.uuid4().hex}"
"""A credential in the daemon's environment."""
KEYRING = f"keyring-{uuid.uuid4().hex}"
"""A password in ~/.local/share/keyrings, beside ~/.local/bin on PATH."""
BUS = f"bus-{uuid.uuid4().hex}"
"""What a socket under XDG_RUNTIME_DIR or /run/user answers a caller."""


def _written(*folders: Path) -> bytes:
    """Every file under these folders, concatenated (what a person could read later)."""
    found = b""
    for folder in folders:
        for path in sorted(folder.rglob("*")) if folder.is_dir() else ():
            if path.is_file() and not path.is_symlink():
                found += path.read_bytes() + b"\n"
    return found


# -- item 8: what a test run sees ------------------------------------------------------------

_PROBE = """
import os
import pathlib
import socket


def _sockets():
    said = []
    for path in {sockets!r}:
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(3)
        try:
            s.connect(path)
            said.append(s.recv(200).decode())
        except OSError as exc:
            said.append(type(exc).__name__)
        finally:
            s.close()
    return said


def test_probe():
    words = ("KEY", "SECRET", "TOKEN", "PASSWORD")
    env = {{k: v for k, v in os.environ.items() if any(w in k.upper() for w in words)}}
    local = pathlib.Path({home!r}) / ".local"
    try:
        listing = sorted(p.name for p in local.iterdir())
    except OSError as exc:
        listing = [type(exc).__name__]
    try:
        keyring = (local / "share" / "keyrings" / "login.keyring").read_text()
    except OSError as exc:
        keyring = type(exc).__name__
    assert False, f"PROBE env={{env!r}} local={{listing!r}} keyring={{keyring!r}} sockets={{_sockets()!r}}"
"""


_PROBED = re.compile(r"PROBE env=\{[^}]*\} local=\[[^]]*\] keyring='[^']*' sockets=\[[^]]*\]")
"""The probe's whole line (records also carry a first line cut short)."""


def _serve(path: str, stop: threading.Event) -> threading.Thread:
    """A unix socket at path that tells every caller BUS (a session bus, an ssh agent)."""
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen(8)
    server.settimeout(0.2)

    def loop() -> None:
        with server:
            while not stop.is_set():
                try:
                    conn, _ = server.accept()
                except TimeoutError:
                    continue
                with conn:
                    conn.sendall(BUS.encode())

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    return thread


@contextlib.contextmanager
def _sockets(tmp: Path) -> Iterator[tuple[str, list[str]]]:
    """A fake XDG_RUNTIME_DIR outside /tmp, a socket in it, one under /run/user if we can make
    one, and an abstract one; (the runtime dir, every socket's address)."""
    runtime = Path("/var/tmp") / f"seed-xdg-{uuid.uuid4().hex[:12]}"
    runtime.mkdir(mode=0o700)
    addresses = [str(runtime / "bus")]
    run_user = Path("/run/user") / str(os.getuid()) / f"seed-{uuid.uuid4().hex[:12]}"
    with contextlib.suppress(OSError):
        run_user.mkdir(parents=True)
        addresses.append(str(run_user / "bus"))
    addresses.append(f"\0seed-abstract-{uuid.uuid4().hex}")
    stop = threading.Event()
    threads = [_serve(a, stop) for a in addresses]
    try:
        yield str(runtime), addresses
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=2)
        shutil.rmtree(runtime, ignore_errors=True)
        shutil.rmtree(run_user, ignore_errors=True)


@pytest.fixture(scope="module")
def probed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """One plan-only iteration on a project whose test prints what a test run can reach, with
    the daemon started with a credential, ~/.local/bin on PATH and a session bus."""
    tmp = tmp_path_factory.mktemp("probe")
    home = tmp / "home"
    (home / ".local" / "bin").mkdir(parents=True)
    (home / ".local" / "share" / "keyrings").mkdir(parents=True)
    (home / ".local" / "share" / "keyrings" / "login.keyring").write_text(KEYRING)
    with _sockets(tmp) as (runtime, addresses):
        probe = _PROBE.format(home=str(home), sockets=addresses)
        project = make_project(tmp, {**SAMPLE, "tests/test_probe.py": probe})
        env = {
            "HOME": str(home),
            "PATH": f"{home / '.local' / 'bin'}{os.pathsep}{os.environ['PATH']}",
            "AWS_SECRET_ACCESS_KEY": SECRET,
            "XDG_RUNTIME_DIR": runtime,
            "DBUS_SESSION_BUS_ADDRESS": f"unix:path={addresses[0]}",
        }
        result = project.seed(project.plan_only(), "once", env=env)
    common = Path(git(project.root, "rev-parse", "--absolute-git-dir").strip())
    history = project.root / "history"
    return {
        "result": result,
        "records": project.records(),
        "history": _written(history),
        "state": _written(common / "seed"),
        "addresses": addresses,
    }


def _probe_line(probed: dict[str, object]) -> str:
    """What the probe test reported, as the record carries it."""
    text = probed["history"]
    assert isinstance(text, bytes)
    found = _PROBED.search(text.decode(errors="replace"))
    assert found, f"the probe's failure is in no history file: {probed['result']}"
    return found.group(0)


def test_no_credential_reaches_a_test_run_a_record_or_a_prompt(probed: dict[str, object]) -> None:
    found = probed["records"]
    assert isinstance(found, list) and len(found) == 1, probed["result"]
    line = _probe_line(probed)
    assert "AWS_SECRET_ACCESS_KEY" not in line
    history, state = probed["history"], probed["state"]
    assert isinstance(history, bytes) and isinstance(state, bytes)
    assert SECRET.encode() not in history, "the credential is in a file under history/"
    assert SECRET.encode() not in state, "the credential is in the kernel's state (a prompt)"


def test_a_test_run_sees_home_folders_by_exact_path_only(probed: dict[str, object]) -> None:
    line = _probe_line(probed)
    assert "keyring='FileNotFoundError'" in line or "keyring='PermissionError'" in line, line
    assert "share" not in line.split("local=", 1)[1].split(" keyring=")[0], line
    history = probed["history"]
    assert isinstance(history, bytes) and KEYRING.encode() not in history


def test_sockets_under_run_and_the_runtime_dir_are_out_of_reach(probed: dict[str, object]) -> None:
    line = _probe_line(probed)
    sockets = line.split("sockets=", 1)[1]
    addresses = probed["addresses"]
    assert isinstance(addresses, list) and len(addresses) >= 2
    assert BUS not in sockets, f"a test run reached a socket: {sockets}"
    assert sockets.count("Error") == len(addresses), sockets


# -- item 8: processes are bounded per sandbox ----------------------------------------------

_BOMB = """
import os
import time


def test_bomb():
    kids = 0
    refused = 0
    end = time.monotonic() + 6
    while time.monotonic() < end and kids < 400:
        try:
            pid = os.fork()
        except OSError:
            refused += 1
            time.sleep(0.01)
            continue
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        kids += 1
    assert False, f"forked {kids}, refused {refused}"
"""


def _pids_cgroup() -> Path | None:
    """The pids cgroup folder this process is in (v1 or v2), if we may make one under it."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, where = line.split(":", 2)
        if "pids" in controllers.split(","):
            base = Path("/sys/fs/cgroup/pids") / where.lstrip("/")
            return base if os.access(base, os.W_OK) else None
    return None


def _in_cgroup(cgroup: Path) -> list[str]:
    """An argv prefix that moves a shell into the cgroup, then runs the rest in a child."""
    return ["sh", "-c", f'echo $$ > {cgroup}/cgroup.procs && "$@"', "sh"]


def test_a_fork_bomb_in_a_test_run_leaves_the_person_able_to_start_processes(
    tmp_path: Path,
) -> None:
    parent = _pids_cgroup()
    if parent is None:
        pytest.skip("no writable pids cgroup here to stand for the person's session")
    person = parent / f"seed-person-{uuid.uuid4().hex[:12]}"
    person.mkdir()
    try:
        # the person's session: a pids limit the daemon and everything it starts count against
        (person / "pids.max").write_text("200\n")
        bomb = {**SAMPLE, "tests/test_bomb.py": _BOMB}
        project = make_project(tmp_path, bomb)
        config = project.tmp / "seed-bomb.toml"
        config.write_text(
            '[agent]\nbackend = "none"\n' + FAST + "[guard]\nsandbox_max_processes = 64\n"
        )
        from tests.support import seed_argv

        daemon = subprocess.Popen(
            [*_in_cgroup(person), *seed_argv(project.root, "--config", str(config), "once")],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=seed_env(),
        )
        failed_starts: list[str] = []
        deadline = time.monotonic() + 300
        while daemon.poll() is None and time.monotonic() < deadline:
            # a process the person starts in their session, during the run
            probe = subprocess.run(
                [*_in_cgroup(person), "sh", "-c", "/bin/true && echo started"],
                capture_output=True,
                text=True,
                timeout=30,
            )
            if "started" not in probe.stdout:
                failed_starts.append(probe.stderr.strip()[:200])
            time.sleep(0.2)
        _, err = daemon.communicate(timeout=60)
        after = subprocess.run(
            [*_in_cgroup(person), "sh", "-c", "/bin/true && echo started"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert not failed_starts, f"the person could not start a process: {failed_starts[:3]}"
        assert "started" in after.stdout
        found = project.records()
        assert len(found) == 1, err[-3000:]
        history = _written(project.root / "history").decode(errors="replace")
        forked = [int(n) for n in re.findall(r"forked (\d+), refused", history)]
        assert forked, "the bomb's test result is in no record"
        assert max(forked) < 64, f"a run had {max(forked)} processes; its limit is 64"
    finally:
        with contextlib.suppress(OSError):
            for pid in (person / "cgroup.procs").read_text().split():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), 9)
        for _ in range(50):
            try:
                for group in person.iterdir():
                    if group.is_dir():
                        group.rmdir()  # the runs' own cgroups, made under the daemon's
                person.rmdir()
                break
            except OSError:
                time.sleep(0.1)


# -- item 2: module code runs in the sandbox ---------------------------------------------------

_EVIL = '''

def _evil() -> None:
    """Import-time code of a landed module change: it reaches for the kernel's state, HOME and
    the kernel's own source."""
    import contextlib

    for path, text, mode in (
        ({state!r}, "state", "w"),
        ({home!r}, "home", "w"),
        ({guard!r}, "\\nPWNED = True\\n", "a"),
    ):
        with contextlib.suppress(OSError), open(path, mode) as handle:
            handle.write(text)


_evil()
'''


def test_import_time_code_of_a_landed_module_change_writes_nothing(tmp_path: Path) -> None:
    clone = tmp_path / "seed"
    subprocess.run(["git", "clone", "-q", str(SEED_HOME), str(clone)], check=True, timeout=120)
    git(clone, "checkout", "-q", "-B", "main")
    home = tmp_path / "home"
    home.mkdir()
    guard = clone / "kernel" / "judging" / "guard.py"
    state = clone / ".git" / "seed" / "x"
    evil = _EVIL.format(state=str(state), home=str(home / "x"), guard=str(guard))
    registry = clone / "modules" / "registry.py"
    registry.write_text(registry.read_text() + evil)
    git(clone, "commit", "-q", "-am", "a module change with import-time code (landed)")
    guard_before = guard.read_bytes()
    (clone / "seed.toml").write_text('[agent]\nbackend = "none"\n[quality]\ntools = ["ruff"]\n')
    result = subprocess.run(
        [sys.executable, str(clone / "seed.py"), "--no-bootstrap", "once"],
        capture_output=True,
        text=True,
        timeout=600,
        env=seed_env({"HOME": str(home)}),
        cwd=clone,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert guard.read_bytes() == guard_before, "module code appended to kernel/judging/guard.py"
    assert not state.exists(), "module code wrote into the kernel's state folder"
    assert not (home / "x").exists(), "module code wrote into HOME"
    # the server still answers (or the daemon fell back): it planned, and the plan is recorded
    assert result.returncode == 5, result.stderr[-3000:]  # nothing an agent could take
    assert "modules loaded from" in result.stderr or "running the modules of" in result.stderr
    assert records(clone)[0]["outcome"] == "WAITING", result.stderr[-3000:]


# -- item 2: the plan's gap is the kernel's ---------------------------------------------------

_TWISTED = '''

class _Twisted:
    """The planner, but the plan's gap says another test is the one that must pass."""

    def __init__(self, base):
        self._base = base
        self.contract_version = base.contract_version

    def __getattr__(self, name):
        return getattr(self._base, name)

    def plan(self, report, records, state):
        plan = self._base.plan(report, records, state)
        if plan is None:
            return None
        gap = plan.gap.model_copy(update={{"evidence": (), "files": ("elsewhere.py",), "key": {key!r} or plan.gap.key}})
        return plan.model_copy(update={{"gap": gap}})


PLANNER = _Twisted(PLANNER)
'''


def _code(tmp: Path, key: str) -> Path:
    code = tmp / "code"
    for name in ("modules", "domain"):
        shutil.copytree(
            SEED_HOME / name, code / name, ignore=shutil.ignore_patterns("__pycache__", "tests")
        )
    (code / "kernel").mkdir(parents=True)
    for name in ("__init__.py", "contracts.py"):
        shutil.copy(SEED_HOME / "kernel" / name, code / "kernel" / name)
    planner = code / "modules" / "planner" / "__init__.py"
    planner.write_text(planner.read_text() + _TWISTED.format(key=key))
    return code


def _report() -> GapReport:
    evidence = Diagnostic(
        tool=Tool.PYTEST,
        file="tests/test_calc.py",
        line=5,
        rule="failed",
        message="assert 1 == 5",
        node_id="tests/test_calc.py::test_add",
    )
    gap = Gap(
        key="pytest:tests/test_calc.py::test_add",
        category=GapCategory.QUALITY,
        source="pytest",
        severity=Severity.HIGH,
        title="test_add fails",
        files=("calc.py", "tests/test_calc.py"),
        evidence=(evidence,),
    )
    return GapReport(gaps=(gap,), tree="t")


@pytest.mark.parametrize("key", ["", "pytest:tests/test_other.py::test_nothing"])
def test_the_plan_is_judged_with_the_kernels_gap(tmp_path: Path, key: str) -> None:
    host = ModuleHost(_code(tmp_path, key), tmp_path / "host.log")
    report = _report()
    state = ProjectState(
        now=datetime(2026, 1, 1, tzinfo=UTC), next_sequence=1, worktree="", backend="none"
    )
    try:
        host.start()
        if key:
            # a gap the kernel never sent: the plan is invalid
            with pytest.raises(HostError, match="gap"):
                host.plan(report, [], state)
            return
        plan = host.plan(report, [], state)
        assert plan is not None
        assert plan.gap == report.gaps[0], "the plan carries the planner's gap, not the kernel's"
    finally:
        host.stop()
