"""The agent's git is its own, and nothing blocks on what a run left behind (issue 23, items 1, 9).

Each test runs a real daemon with a scripted agent in the real bubblewrap sandbox and checks
what a person would: the person's `.git` byte for byte (hooks, config, info, refs, the
kernel's state), the seal key unread, nothing copied from outside the run folder, no hang,
and the record's outcome and category.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_ratchet import BUGGY, TOOLS
from tests.reliability.helpers import DO_THE_TASK, FAST, assert_checkout_kept, make_project
from tests.support import agent_config, agent_io, git, make_repo, records, seed

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("bwrap")]

WRONG = {"replace": "calc.py", "old": "return a - b", "new": "return a * b"}
"""Round 1's change: the gap's test still fails, so the kernel gives a repair round."""
RIGHT = {"replace": "calc.py", "old": "return a * b", "new": "return a + b"}


def _git_files(root: Path) -> dict[str, bytes]:
    """The person's `.git` that no agent may touch, byte for byte: config, HEAD, hooks, info,
    and every ref but the branch a landing moves and the kernel's own (seed/...)."""
    gdir = root / ".git"
    found: dict[str, bytes] = {}
    for name in ("config", "HEAD"):
        found[name] = (gdir / name).read_bytes()
    for sub in ("hooks", "info"):
        for item in sorted((gdir / sub).rglob("*")):
            if item.is_file():
                found[item.relative_to(gdir).as_posix()] = item.read_bytes()
    refs = git(root, "for-each-ref", "--format=%(refname) %(objectname)").splitlines()
    found["<refs>"] = "\n".join(
        r for r in refs if not r.startswith(("refs/heads/main ", "refs/heads/seed/"))
    ).encode()
    return found


def _planted(root: Path) -> list[str]:
    """Files named `planted*` anywhere in the person's `.git`."""
    return sorted(p.relative_to(root).as_posix() for p in (root / ".git").rglob("planted*"))


def _attack(root: Path, io: Path) -> list[dict[str, Any]]:
    """What round 2 tries through the person's `.git`, each step allowed to fail."""
    gdir = root / ".git"
    hook = "#!/bin/sh\necho owned > /dev/null\n"
    return [
        {"write": str(gdir / "hooks" / "post-commit"), "text": hook, "may_fail": True},
        {"chmod": str(gdir / "hooks" / "post-commit"), "mode": "755", "may_fail": True},
        {"write": str(gdir / "seed" / "planted.txt"), "text": "x", "may_fail": True},
        {"append": str(gdir / "config"), "text": "\n[core]\n\tplanted = 1\n", "may_fail": True},
        {
            "run": ["cp", str(gdir / "seed" / "seal.key"), str(io / "key-copy")],
            "may_fail": True,
        },
        {
            "run": ["cp", str(gdir / "seed" / "keys" / "seal.key"), str(io / "key-copy2")],
            "may_fail": True,
        },
    ]


def test_round_one_pointing_its_git_at_the_persons_widens_nothing_in_round_two(
    tmp_path: Path,
) -> None:
    io = agent_io(tmp_path)
    root = tmp_path / "repo"
    # round 1 points its checkout's git at the person's, and leaves the test failing
    redirect = f"rm -rf .git && printf 'gitdir: {root}/.git\\n' > .git"
    round_one = [
        {"run": ["sh", "-c", f"git rev-parse --absolute-git-dir > {io}/gitdir-1"]},
        {"run": ["sh", "-c", redirect]},
        WRONG,
    ]
    round_two = [
        {"run": ["sh", "-c", f"git rev-parse --absolute-git-dir > {io}/gitdir-2"]},
        *_attack(root, io),
        RIGHT,
    ]
    config = agent_config(tmp_path, [], extra=TOOLS, rounds=[round_one, round_two])
    make_repo(root, BUGGY, config)
    before = _git_files(root)

    result = seed(root, "once", timeout=600)

    [record] = records(root)
    assert [r["outcome"] for r in record["rounds"]] == ["ROLLBACK", "SUCCESS"], result.stderr[
        -3000:
    ]
    assert record["outcome"] == "SUCCESS", record["reason"]
    assert _planted(root) == []
    assert not (io / "key-copy").exists() and not (io / "key-copy2").exists()
    after = _git_files(root)
    assert after == before, sorted(
        k for k in set(after) | set(before) if after.get(k) != before.get(k)
    )
    # the agent's git was never the person's, in either round
    for name in ("gitdir-1", "gitdir-2"):
        told = (io / name).read_text().strip()
        assert not Path(told).is_relative_to(root), (name, told)
    assert not any("by a person" in c for c in record["checkout_changes"])
    assert git(root, "worktree", "list", "--porcelain").count("worktree ") == 1


def test_a_change_under_a_writable_bind_is_the_agents_and_is_put_back(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    project.task()
    root = project.root
    io = agent_io(tmp_path)
    before_git = _git_files(root)
    before = project.snapshot()
    # the person lets agents write the repository's .git (a misconfiguration): what the agent
    # changes there is its own doing, never credited to the person; the seal key stays hidden
    steps = [*_attack(root, io), *DO_THE_TASK]
    config = project.config(steps, extra=FAST)
    result = project.seed(
        config,
        "once",
        env={"SEED_SANDBOX_WRITABLE": os.pathsep.join([str(io), str(root / ".git")])},
    )

    [record] = project.records()
    assert (record["outcome"], record["failure_category"]) == ("ROLLBACK", "SANDBOX_VIOLATION"), (
        record["reason"],
        result.stderr[-2000:],
    )
    assert any("post-commit" in e for e in record["evidence"]), record["evidence"]
    assert not any("by a person" in c for c in record["checkout_changes"])
    assert not (io / "key-copy").exists() and not (io / "key-copy2").exists()
    assert not (root / ".git" / "hooks" / "post-commit").exists()
    after_git = _git_files(root)
    assert after_git == before_git, sorted(
        k for k in set(after_git) | set(before_git) if after_git.get(k) != before_git.get(k)
    )
    assert_checkout_kept(project, before)


def test_a_result_file_replaced_by_a_fifo_does_not_hang_the_daemon(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    project.task()
    before = project.snapshot()
    fifo = 'rm -f "$SEED_RESULT_FILE" && mkfifo "$SEED_RESULT_FILE"'
    steps = [*DO_THE_TASK, {"run": ["sh", "-c", fifo]}]
    config = project.config(steps, extra=FAST)

    result = project.seed(config, "once", timeout=150)

    [record] = project.records()
    assert (record["outcome"], record["failure_category"]) == ("FAILURE", "AGENT_ERROR"), (
        record["reason"],
        result.stderr[-2000:],
    )
    assert "result" in record["reason"] and "FIFO" in record["reason"], record["reason"]
    assert_checkout_kept(project, before)


def test_an_artifact_linking_outside_the_run_folder_is_never_read(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    project.task()
    secret = tmp_path / "outside" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("TOPSECRET-0451 a password the agent must not read\n")
    # a stand-in `mini` on PATH: its trajectory (an artifact) is a link to a file outside
    script = agent_io(tmp_path) / "mini-script.json"
    link = f'ln -s {secret} "$SEED_RUN_DIR/trajectory.json"'
    script.write_text(json.dumps({"steps": [*DO_THE_TASK, {"run": ["sh", "-c", link]}]}))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    mini = bin_dir / "mini"
    agent = Path(__file__).resolve().parents[1] / "fakes" / "scripted_agent.py"
    mini.write_text(f"#!/bin/sh\nexec {sys.executable} {agent} {script}\n")
    mini.chmod(mini.stat().st_mode | stat.S_IXUSR)
    config = tmp_path / "seed-mini.toml"
    config.write_text('[agent]\nbackend = "mini"\nrepair_rounds = 0\n' + FAST)
    path = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"

    result = project.seed(config, "once", env={"PATH": path}, timeout=240)

    [record] = project.records()
    assert record["outcome"] != "SUCCESS" or record["commit"], result.stderr[-2000:]
    history = project.root / "history"
    leaked = [
        p.relative_to(history).as_posix()
        for p in history.rglob("*")
        if p.is_file() and b"TOPSECRET-0451" in p.read_bytes()
    ]
    assert leaked == [], record["reason"]
    assert not (history / record["iteration_id"] / "trajectory.json").exists()


def test_no_writable_place_ever_covers_the_hidden_state_and_its_seal_key(tmp_path: Path) -> None:
    import subprocess

    from kernel.isolation import sandbox

    gdir = tmp_path / "repo" / ".git"
    state = gdir / "seed"
    run_dir = state / "runs" / "iter-1"
    run_dir.mkdir(parents=True)
    (state / "seal.key").write_bytes(b"K" * 32)
    # a writable place around the state folder (a person's extra), and one inside it (the run's)
    profile = sandbox.Profile(
        writable=(gdir, run_dir), hidden=(state,), shown=(tmp_path,), tmp_bytes=1 << 20
    )
    probe = (
        "import pathlib, sys\n"
        f"state = pathlib.Path({str(state)!r})\n"
        "key = state / 'seal.key'\n"
        "print('KEY' if key.exists() and key.read_bytes() == b'K' * 32 else 'no key')\n"
        "(state / 'runs' / 'iter-1' / 'ok.txt').write_text('ok')\n"
        "(state / 'planted.txt').write_text('x')\n"
    )
    done = subprocess.run(
        sandbox.wrap([sys.executable, "-I", "-S", "-c", probe], profile),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "no key"
    assert (run_dir / "ok.txt").read_text() == "ok"
    assert not (state / "planted.txt").exists()
