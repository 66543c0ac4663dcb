"""The real bubblewrap sandbox, run through the kernel's process helper, as agents and test
runs get it: what it lets through and what it keeps out."""

from __future__ import annotations

import json
import os
import socket
import sys
import uuid
from pathlib import Path

import pytest

from kernel.config import GuardConfig
from kernel.isolation import jails, procs, sandbox
from kernel.isolation.paths import discover
from tests.support import SAMPLE, make_repo

pytestmark = pytest.mark.usefixtures("bwrap")


def _run(code: str, profile: sandbox.Profile, env: dict[str, str] | None = None) -> procs.Completed:
    argv = sandbox.wrap([sys.executable, "-c", code], profile)
    return procs.run(argv, cwd="/", timeout_s=60, env=env, merge_stderr=True)


def test_only_the_writable_folder_can_be_written(tmp_path: Path) -> None:
    work, other = tmp_path / "work", tmp_path / "other"
    work.mkdir()
    other.mkdir()
    (other / "kept.txt").write_text("the person's")
    code = (
        "import pathlib\n"
        f"pathlib.Path({str(work / 'made.txt')!r}).write_text('ok')\n"
        "try:\n"
        f"    pathlib.Path({str(other / 'kept.txt')!r}).write_text('agent')\n"
        "except OSError as exc:\n"
        "    print('refused', exc.errno)\n"
    )
    result = _run(code, sandbox.Profile(writable=(work,)))
    assert result.ok, result.text()
    assert "refused" in result.text()
    assert (work / "made.txt").read_text() == "ok"
    assert (other / "kept.txt").read_text() == "the person's"


def test_hidden_folders_and_the_real_home_are_out_of_sight(tmp_path: Path) -> None:
    home, private, state = tmp_path / "home", tmp_path / "private", tmp_path / "state"
    for folder in (home / ".ssh", home / ".claude", private, state):
        folder.mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("secret key")
    (home / ".claude" / "creds").write_text("token-1")
    (state / "seal.key").write_text("kernel key")
    code = (
        "import os, pathlib\n"
        "home = pathlib.Path(os.environ['HOME'])\n"
        "print('ssh', (home / '.ssh' / 'id_rsa').exists())\n"
        "print('claude', (home / '.claude' / 'creds').read_text())\n"
        "(home / '.claude' / 'creds').write_text('token-2')\n"
        f"print('state', sorted(os.listdir({str(state)!r})))\n"
    )
    profile = sandbox.Profile(
        hidden=(state,),
        home=private,
        real_home=home,
        home_binds=(".claude",),
        writable=(),
    )
    result = _run(code, profile, env={**os.environ, "HOME": str(home)})
    assert result.ok, result.text()
    out = result.text()
    assert "ssh False" in out and "claude token-1" in out and "state []" in out
    assert (home / ".claude" / "creds").read_text() == "token-2"  # a rotated token stays valid
    assert (home / ".ssh" / "id_rsa").read_text() == "secret key"


def test_root_inside_cannot_remount_the_filesystem_writable() -> None:
    code = (
        "import subprocess\n"
        "r = subprocess.run(['mount', '-o', 'remount,rw', '/'], capture_output=True)\n"
        "print('exit', r.returncode)\n"
        "print('caps', open('/proc/self/status').read().split('CapEff:')[1].split()[0])\n"
    )
    result = _run(code, sandbox.Profile())
    assert result.ok, result.text()
    assert "exit 0" not in result.text()
    assert "caps 0000000000000000" in result.text()


def test_nothing_the_run_started_outlives_it() -> None:
    marker = f"seed-orphan-{uuid.uuid4().hex[:8]}"
    code = (
        "import subprocess\n"
        f"subprocess.Popen(['sh', '-c', 'exec -a {marker} sleep 600'], start_new_session=True)\n"
    )
    result = _run(code, sandbox.Profile())
    assert result.ok, result.text()
    alive = []
    for pid in os.listdir("/proc"):
        try:
            if pid.isdigit() and marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                alive.append(pid)
        except OSError:
            continue
    assert alive == []


def test_the_network_is_cut_unless_the_profile_keeps_it() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        code = (
            "import socket\n"
            "try:\n"
            f"    socket.create_connection(('127.0.0.1', {port}), timeout=5).close()\n"
            "    print('connected')\n"
            "except OSError as exc:\n"
            "    print('no network', exc)\n"
        )
        assert "no network" in _run(code, sandbox.Profile(network=False)).text()
        assert "connected" in _run(code, sandbox.Profile(network=True)).text()


def test_tmp_is_private_and_bounded(tmp_path: Path) -> None:
    name = f"seed-private-{uuid.uuid4().hex[:8]}"
    code = (
        f"open('/tmp/{name}', 'w').write('x')\n"
        "try:\n"
        "    open('/tmp/big', 'wb').write(b'x' * 8 * 1024 * 1024)\n"
        "    print('wrote it all')\n"
        "except OSError as exc:\n"
        "    print('full', exc.errno)\n"
    )
    result = _run(code, sandbox.Profile(tmp_bytes=2 * 1024 * 1024))
    assert result.ok, result.text()
    assert "full" in result.text()
    assert not Path("/tmp", name).exists()


def test_memory_over_the_limit_fails_the_run() -> None:
    code = "x = bytearray(512 * 1024 * 1024)\nprint('allocated')\n"
    result = _run(code, sandbox.Profile(memory_bytes=256 * 1024 * 1024))
    assert not result.ok and "MemoryError" in result.text()
    assert _run(code, sandbox.Profile(memory_bytes=1024 * 1024 * 1024)).ok


def test_without_bubblewrap_the_reason_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    sandbox.available.cache_clear()
    try:
        found = sandbox.available()
    finally:
        monkeypatch.undo()
        sandbox.available.cache_clear()
    assert not found.ok
    assert "bubblewrap" in found.reason and "apt-get install bubblewrap" in found.reason


def test_the_probe_finds_the_sandbox_when_seeds_interpreter_lives_under_tmp(
    tmp_path: Path,
) -> None:
    # the sandbox covers /tmp with its own; a seed cloned under /tmp must not read as "no sandbox"
    assert str(tmp_path).startswith("/tmp/")
    venv = tmp_path / "venv"
    made = procs.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=tmp_path, timeout_s=120
    )
    assert made.ok, made.text()
    root = Path(__file__).resolve().parents[2]
    probe = procs.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "from kernel.isolation import sandbox; print(sandbox.available())",
        ],
        cwd=root,
        timeout_s=120,
        env={**os.environ, "PYTHONPATH": str(root)},
        merge_stderr=True,
    )
    assert probe.ok and "ok=True" in probe.text(), probe.text()


def test_a_file_shown_inside_a_writable_folder_stays_writable(tmp_path: Path) -> None:
    # an agent's argv names a file of its run folder (aider's chat history, from round 2 on):
    # showing it must not bind it read-only over the writable folder
    work = tmp_path / "work"
    work.mkdir()
    kept = work / "history.md"
    kept.write_text("round 1\n")
    code = f"import pathlib\npathlib.Path({str(kept)!r}).write_text('round 2\\n')\n"
    result = _run(code, sandbox.Profile(writable=(work,), shown=(kept,)))
    assert result.ok, result.text()
    assert kept.read_text() == "round 2\n"


_PROBE = """
import json, os, pathlib, sys
here = pathlib.Path(__file__).resolve().parent
home = pathlib.Path(os.environ["HOME"])
seen = {}
for name in sys.argv[1].removeprefix("probe:").split(","):
    try:
        seen[name] = pathlib.Path(name).read_text()
    except OSError as exc:
        seen[name] = f"unseen {exc.errno}"
print(json.dumps(seen))
"""


def _own_case(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    program: str,
    listed: list[str],
    probe: list[str],
    named: tuple[str, ...] = (),
) -> dict[str, str]:
    """Run `python3 PROGRAM` as an agent under a HOME of the test's, [agent] files = listed,
    its argv naming `named` too, and read back which of `probe` (under HOME) it could read."""
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    # the paths to probe as one word that names no file (a file its argv names is shown)
    probed = "probe:" + ",".join(str(home / p) for p in probe)
    argv = [sys.executable, str(home / program), probed, *(str(home / n) for n in named)]
    paths = discover(home / "projects" / "repo")
    run = jails.agent_sandbox(
        argv,
        paths=paths,
        guard=GuardConfig(),
        writable=(tmp_path / "agent-home",),
        readonly=(),
        home=tmp_path / "agent-home",
        home_binds=(),
        cwd=tmp_path / "agent-home",
        listed=listed,
    )
    result = procs.run(run.argv, cwd="/", timeout_s=60)
    assert result.ok, (result.exit_code, result.text(), result.err_text())
    return json.loads(result.text().splitlines()[-1])


@pytest.fixture
def person(tmp_path: Path) -> Path:
    """A HOME with an agent in ~/tools beside its data, logins, notes, a checkout, a link."""
    home = tmp_path / "home"
    for name, text in {
        "tools/agent.py": _PROBE,
        "tools/data.json": '{"rate": 3}',
        "agent2.py": _PROBE,
        "notes.txt": "the person's notes",
        ".ssh/id_rsa": "secret key",
        ".config/tool/token": "a token",
        ".config/gh/hosts.yml": "oauth_token: x",
        "shared/table.csv": "a,b",
        "projects/other.txt": "another project's",
    }.items():
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text(text)
    make_repo(home / "projects" / "repo", SAMPLE)
    (home / "link").symlink_to(home)
    (tmp_path / "agent-home").mkdir()
    return home


def test_a_command_agent_reads_the_files_beside_it_and_nothing_else_of_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, person: Path
) -> None:
    probe = ["tools/data.json", "notes.txt", ".ssh/id_rsa", "shared/table.csv", "agent2.py"]
    seen = _own_case(tmp_path, monkeypatch, "tools/agent.py", [], probe)
    assert seen["/".join((str(person), "tools/data.json"))] == '{"rate": 3}'
    assert all(seen[str(person / p)].startswith("unseen") for p in probe[1:]), seen
    # [agent] files: a folder of its own, by its exact path
    seen = _own_case(tmp_path, monkeypatch, "tools/agent.py", ["~/shared"], probe)
    assert seen[str(person / "shared/table.csv")] == "a,b"
    assert seen[str(person / "notes.txt")].startswith("unseen"), seen


def test_a_login_file_the_argv_names_is_never_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, person: Path
) -> None:
    # an adapter (module code) could name any file in its argv: never a login's or the kernel's
    secrets = (".ssh/id_rsa", ".config/gh/hosts.yml")
    seen = _own_case(tmp_path, monkeypatch, "tools/agent.py", [], list(secrets), secrets)
    assert all(seen[str(person / p)].startswith("unseen") for p in secrets), seen


def test_a_program_directly_in_home_sees_only_its_own_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, person: Path
) -> None:
    seen = _own_case(tmp_path, monkeypatch, "agent2.py", [], ["agent2.py", "notes.txt"])
    assert seen[str(person / "agent2.py")] == _PROBE
    assert seen[str(person / "notes.txt")].startswith("unseen"), seen


@pytest.mark.parametrize(
    ("listed", "unseen", "why"),
    [
        ("~", "notes.txt", "it is HOME or holds it"),
        ("~/link", "notes.txt", "it is HOME or holds it"),
        ("~/projects", "projects/other.txt", "holds the checkout"),
        ("~/.config", ".config/tool/token", "it holds ~/.config/gcloud"),
        ("~/.config/gh", ".config/gh/hosts.yml", "it holds ~/.config/gh"),
        ("~/.ssh", ".ssh/id_rsa", "it holds ~/.ssh"),
        ("/tmp", "notes.txt", "temporary files"),
    ],
)
def test_no_folder_of_logins_home_the_checkout_or_tmp_is_ever_an_agents_own(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    person: Path,
    listed: str,
    unseen: str,
    why: str,
) -> None:
    seen = _own_case(tmp_path, monkeypatch, "tools/agent.py", [listed], [unseen])
    assert seen[str(person / unseen)].startswith("unseen"), seen
    _, refused = jails.own_folders([], [listed], discover(person / "projects" / "repo"))
    assert len(refused) == 1 and why in refused[0], refused
