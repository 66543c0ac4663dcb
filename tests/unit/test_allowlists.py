"""What runs see is allow-listed: the environment, HOME's folders by exact path, the planner's gap."""

from __future__ import annotations

from pathlib import Path

import pytest

from domain import Gap, GapCategory, GapReport, Severity
from kernel.errors import HostError
from kernel.host.answers import kernel_gap
from kernel.isolation import jails, procs
from kernel.isolation.paths import Paths
from modules.agents.choose import choose_backend
from modules.agents.claude import AGENT as CLAUDE
from tests.unit.factories import gap, plan


def test_a_run_gets_the_allow_list_and_nothing_else(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.setenv("GITHUB_TOKEN", "token")
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    env = procs.run_env(EXTRA="1")
    assert "AWS_SECRET_ACCESS_KEY" not in env and "GITHUB_TOKEN" not in env
    assert "PYTHONPATH" not in env
    assert env["LC_ALL"] == "C.UTF-8" and env["EXTRA"] == "1" and env["PATH"]
    assert set(env) <= {*procs.RUN_ENV, "LC_ALL", "EXTRA", "SEED_DEPTH", "SEED_DAEMON_TOKEN"}


def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Paths]:
    home = tmp_path / "home"
    (home / ".local" / "bin").mkdir(parents=True)
    (home / ".local" / "share" / "keyrings").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PATH", f"{home / '.local' / 'bin'}:/usr/bin:/bin")
    root = tmp_path / "repo"
    root.mkdir()
    return home, Paths(root=root, common=root / ".git")


def test_home_folders_are_shown_by_exact_path_never_their_parents(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home, paths = _home(tmp_path, monkeypatch)
    # an npm-installed CLI linked from ~/.local/bin, run by a node under ~/.nvm
    package = home / ".local" / "lib" / "node_modules" / "@vendor" / "cli"
    package.mkdir(parents=True)
    node = home / ".nvm" / "versions" / "node" / "v20" / "bin" / "node"
    node.parent.mkdir(parents=True)
    node.write_text("")
    node.chmod(0o755)
    (package / "cli.js").write_text(f"#!{node}\n")
    (home / ".local" / "bin" / "cli").symlink_to(package / "cli.js")
    monkeypatch.setenv("PATH", f"{home / '.local' / 'bin'}:{node.parent}:/usr/bin:/bin")
    test_run = jails._shown(paths)  # pyright: ignore[reportPrivateUsage]
    agent = jails._shown(paths, command=home / ".local" / "bin" / "cli")  # pyright: ignore[reportPrivateUsage]
    for shown in (test_run, agent):
        resolved = {p.resolve() for p in shown}
        assert home.resolve() not in resolved
        assert (home / ".local").resolve() not in resolved
        assert not any(home.resolve() in p.parents and p.parent == home.resolve() for p in resolved)
    assert not any(home.resolve() in p.resolve().parents for p in test_run)
    assert package in agent and node.parent.parent in agent
    assert home / ".local" / "bin" in agent


def test_the_plan_carries_the_kernels_gap_and_an_unknown_key_is_invalid() -> None:
    planned = plan(gap(evidence=()))
    kernel = Gap(
        key=planned.gap.key,
        category=GapCategory.QUALITY,
        source="pytest",
        severity=Severity.HIGH,
        title="the kernel's",
        files=("calc.py",),
    )
    assert kernel_gap(planned, GapReport(gaps=(kernel,))).gap == kernel
    other = kernel.model_copy(update={"key": "another"})
    with pytest.raises(HostError, match="not in the report"):
        kernel_gap(planned, GapReport(gaps=(other,)))


def test_auto_chooses_from_the_programs_the_kernel_found() -> None:
    agents = {"claude": CLAUDE}
    found = choose_backend("auto", "seed.toml", {"claude": "/opt/bin/claude"}, agents, ["claude"])
    assert found["name"] == "claude" and "/opt/bin/claude" in found["reason"]
    nothing = choose_backend("auto", "seed.toml", {}, agents, ["claude"])
    assert nothing["name"] == "none"
