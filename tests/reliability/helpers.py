"""A tiny project for the reliability suite, the person's work in it, and checks of what changed."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support import (
    SAMPLE,
    agent_checkouts,
    agent_config,
    git,
    make_repo,
    records,
    seed,
    seed_argv,
    seed_env,
    snapshot,
    wait_for,
)

TASK = "Add a sub(a, b) function to calc.py that returns a - b, with a test."
FILES: dict[str, str] = {
    **SAMPLE,
    "README.md": "# demo\n",
    "VISION.md": "A calculator that never lies.\n",
    "kernel/__init__.py": "",
    "kernel/core.py": "def invariant():\n    return True\n",
}
"""SAMPLE plus protected files (VISION.md, kernel/**) an adversary may go after."""

SUB = "\n\ndef sub(a, b):\n    return a - b\n"
SUB_TEST = "\n\ndef test_sub():\n    from calc import sub\n\n    assert sub(5, 3) == 2\n"
DO_THE_TASK: list[dict[str, Any]] = [
    {"append": "calc.py", "text": SUB},
    {"append": "tests/test_calc.py", "text": SUB_TEST},
]
"""What an honest agent does for TASK."""

FAST = '[quality]\ntools = ["ruff", "pytest"]\n'
LANDS_UNTESTED = '\n[landing]\nuncovered = "land"\n'
"""For changes whose code runs on import, where no passing test vouches for it (KEPT by default)."""
"""For runs the guard or the agent ends before verification: no pyright."""


@dataclass
class Project:
    """A git repository with the person's uncommitted, untracked and ignored work in it."""

    root: Path
    tmp: Path
    configs: list[Path] = field(default_factory=list[Path])

    def config(
        self, steps: Sequence[dict[str, Any]], *, timeout_s: float = 120, extra: str = ""
    ) -> Path:
        """A seed.toml outside the checkout for a scripted agent with these steps."""
        path = self.tmp / f"seed-{len(self.configs)}.toml"
        path.write_text(agent_config(self.tmp, steps, timeout_s=timeout_s, extra=extra))
        self.configs.append(path)
        return path

    def plan_only(self) -> Path:
        """A seed.toml with no agent (backend none): the daemon analyses and plans, runs nothing."""
        path = self.tmp / f"seed-{len(self.configs)}.toml"
        path.write_text('[agent]\nbackend = "none"\n' + FAST)
        self.configs.append(path)
        return path

    def seed(
        self, config: Path, *args: str, env: Mapping[str, str] | None = None, timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        """Run seed.py with this config to completion."""
        return seed(self.root, "--config", str(config), *args, env=env, timeout=timeout)

    def task(
        self, text: str = TASK, name: str = "sub.md", front: str = "", age_s: float = 60
    ) -> Path:
        """Drop a task into inbox/, old enough (age_s) to be taken at once."""
        path = self.root / "inbox" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text((f"+++\n{front}+++\n" if front else "") + text + "\n")
        past = time.time() - age_s
        os.utime(path, (past, past))
        return path

    def snapshot(self) -> dict[str, bytes]:
        """The checkout byte for byte (inbox/ aside: its fate is checked on its own)."""
        return {k: v for k, v in snapshot(self.root).items() if not k.startswith("inbox/")}

    def head(self) -> str:
        """The commit the user's branch points at."""
        return git(self.root, "rev-parse", "HEAD").strip()

    def records(self) -> list[dict[str, Any]]:
        """Every record (a torn or malformed line fails the test)."""
        return records(self.root)

    def status(self) -> dict[str, Any]:
        """`status --json`."""
        result = seed(self.root, "status", "--json")
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    def halt(self) -> dict[str, Any]:
        """history/halt.json as the daemon left it (not halted when there is none)."""
        path = self.root / "history" / "halt.json"
        return json.loads(path.read_text()) if path.exists() else {"halted": False}

    def events(self, kind: str = "") -> list[dict[str, Any]]:
        """Events of one kind (all when kind is empty)."""
        path = self.root / "history" / "events.jsonl"
        if not path.exists():
            return []
        found = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        return [e for e in found if not kind or e["kind"] == kind]


def make_project(tmp: Path, files: Mapping[str, str] | None = None) -> Project:
    """The project, committed, with the person's work on top of it."""
    root = make_repo(tmp / "repo", files or FILES)
    (root / "README.md").write_text("# demo\n\nthe person's uncommitted edit\n")
    (root / "notes.txt").write_text("untracked notes\n")
    (root / "debug.log").write_text("an ignored file\n")
    return Project(root, tmp)


def assert_checkout_kept(project: Project, before: dict[str, bytes], landed: str = "") -> None:
    """The checkout is byte for byte as before, apart from what a landed commit brought."""
    after = project.snapshot()
    if not landed:
        assert after == before
        return
    base = git(project.root, "rev-parse", f"{landed}^").strip()
    assert before["<HEAD>"].decode().strip() == base, "the landed commit is not on the old HEAD"
    assert after["<HEAD>"].decode().strip() == landed
    changed = set(git(project.root, "diff", "--name-only", base, landed).split())
    assert changed, "the landed commit changes nothing"
    for key in sorted(set(before) | set(after)):
        if key in ("<HEAD>", "<refs>"):
            continue
        if key in changed:
            shown = subprocess.run(
                ["git", "show", f"{landed}:{key}"], cwd=project.root, capture_output=True
            )
            assert after.get(key) == (shown.stdout if shown.returncode == 0 else None), key
        else:
            assert after.get(key) == before.get(key), f"{key} changed"
    refs_before = [r for r in before["<refs>"].decode().splitlines() if "refs/heads/main" not in r]
    refs_after = [r for r in after["<refs>"].decode().splitlines() if "refs/heads/main" not in r]
    assert refs_after == refs_before


def assert_no_leftovers(project: Project) -> None:
    """No iteration worktree, no seed/iter-* branch, no journal, nothing claimed in the inbox."""
    wt = git(project.root, "worktree", "list", "--porcelain")
    assert [line for line in wt.splitlines() if line.startswith("worktree ")] == [
        f"worktree {project.root}"
    ]
    assert git(project.root, "for-each-ref", "--format=%(refname)", "refs/heads/seed/iter-*") == ""
    common = Path(git(project.root, "rev-parse", "--git-common-dir").strip())
    state = (common if common.is_absolute() else project.root / common) / "seed"
    assert not (state / "running.json").exists()
    assert not list((state / "wt").glob("*")) if (state / "wt").exists() else True
    checkouts = agent_checkouts(project.root)
    assert not list(checkouts.glob("*")) if checkouts.exists() else True
    active = project.root / "inbox" / ".active"
    assert not active.exists() or not list(active.iterdir())


def assert_clean_log(project: Project) -> None:
    """records.jsonl ends with a newline and every line is a JSON object."""
    path = project.root / "history" / "records.jsonl"
    data = path.read_bytes()
    assert data.endswith(b"\n"), "records.jsonl ends in a torn line"
    for line in data.splitlines():
        assert isinstance(json.loads(line), dict)


def while_the_agent_waits(
    project: Project, person: Callable[[], None], extra: str = FAST
) -> dict[str, Any]:
    """Run once; when the agent has started, let the person act, then let the agent go on."""
    root = project.root
    steps = [
        {"touch": "started.flag"},
        {"wait_for": "release.flag"},
        {"delete": "started.flag"},
        {"delete": "release.flag"},
        *DO_THE_TASK,
    ]
    config = project.config(steps, extra=extra)
    daemon = subprocess.Popen(
        seed_argv(root, "--config", str(config), "once"),
        env=seed_env(),
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )

    def started() -> list[Path]:
        return list(agent_checkouts(root).glob("*/started.flag"))

    try:
        wait_for(lambda: bool(started()), 120, "the agent to start", alive=daemon)
        person()
        started()[0].with_name("release.flag").write_text("go")
        daemon.communicate(timeout=300)
    finally:
        if daemon.poll() is None:
            daemon.kill()
        daemon.communicate()
    [record] = project.records()
    return record
