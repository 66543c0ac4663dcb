"""Landing where the team works: verified work pushed to a real bare remote as seed/<id>
(the local branch untouched) and, in "pr" mode, a pull request opened on a GitHub double."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernel.config import load_config
from kernel.errors import ConfigError
from tests.forge_double import ForgeDouble
from tests.integration.test_ratchet import TOOLS
from tests.integration.test_uncovered import LINT
from tests.support import AGENT_IO, agent_config, git, make_repo, records, seed

pytestmark = pytest.mark.usefixtures("bwrap")

TOKEN = "ghp_kernelOnlySecret0123456789"
FIX = [{"replace": "calc.py", "old": "+ missing", "new": "+ 0"}]


@pytest.fixture
def double() -> Iterator[ForgeDouble]:
    forge = ForgeDouble()
    yield forge
    forge.close()


def _repo(
    tmp_path: Path, landing: str, steps: list[dict[str, object]] | None = None
) -> tuple[Path, Path, str]:
    """A project with a real bare remote `origin`; its path and head."""
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    extra = TOOLS + f'\n[landing]\nuncovered = "land"\n{landing}'
    repo = make_repo(tmp_path / "repo", LINT, agent_config(tmp_path, steps or FIX, extra=extra))
    git(repo, "remote", "add", "origin", str(remote))
    return repo, remote, git(repo, "rev-parse", "HEAD").strip()


def _history_text(repo: Path) -> str:
    return "\n".join(
        p.read_text(errors="replace") for p in (repo / "history").rglob("*") if p.is_file()
    )


def test_branch_mode_pushes_the_verified_commit_and_leaves_the_local_branch(
    tmp_path: Path,
) -> None:
    seen = AGENT_IO / f"env-{tmp_path.name}"
    read_env = {"spawn": ["sh", "-c", f"env > {seen}.part && mv {seen}.part {seen}"]}
    steps: list[dict[str, object]] = [read_env, {"wait_for": str(seen)}, *FIX]
    repo, remote, head = _repo(tmp_path, 'mode = "branch"\n', steps)

    result = seed(repo, "once", env={"GITHUB_TOKEN": TOKEN})

    [record] = records(repo)
    assert record["outcome"] == "PROPOSED", record["reason"]
    assert result.returncode == 0, result.stderr
    assert git(repo, "rev-parse", "HEAD").strip() == head  # the person's branch untouched
    branch = f"seed/{record['iteration_id']}"
    pushed = git(remote, "rev-parse", f"refs/heads/{branch}").strip()
    assert pushed == record["commit"]
    assert git(remote, "show", f"{pushed}:calc.py").endswith("+ 0\n")
    assert git(remote, "for-each-ref", "--format=%(refname)").split() == [f"refs/heads/{branch}"]
    assert TOKEN not in _history_text(repo)
    # read from inside the agent's sandbox: the token is not in its environment
    inside = seen.read_text()
    assert "PATH=" in inside and TOKEN not in inside and "GITHUB_TOKEN" not in inside
    seen.unlink()


def test_pr_mode_opens_one_pull_request_whose_head_holds_the_verified_tree(
    tmp_path: Path, double: ForgeDouble
) -> None:
    forge = f'mode = "pr"\n\n[forge]\napi_url = "{double.url}"\nrepo = "team/project"\n'
    repo, remote, head = _repo(tmp_path, forge)
    base = git(repo, "rev-parse", "--abbrev-ref", "HEAD").strip()

    result = seed(repo, "once", env={"GITHUB_TOKEN": TOKEN})

    [record] = records(repo)
    assert record["outcome"] == "PROPOSED", record["reason"]
    assert result.returncode == 0, result.stderr
    assert double.errors == []
    [(method, path, body, headers)] = double.calls
    assert (method, path) == ("POST", "/repos/team/project/pulls")
    branch = f"seed/{record['iteration_id']}"
    assert body["head"] == branch and body["base"] == base and body["draft"] is False
    assert headers["authorization"] == f"Bearer {TOKEN}"
    assert record["pull_request"] == "https://github.example/team/project/pull/1"
    assert git(remote, "rev-parse", f"refs/heads/{branch}").strip() == record["commit"]
    assert (
        git(remote, "rev-parse", f"{record['commit']}^{{tree}}").strip()
        == git(repo, "rev-parse", f"{record['commit']}^{{tree}}").strip()
    )
    assert "## Criteria" in body["body"] and "Closes #" not in body["body"]
    assert git(repo, "rev-parse", "HEAD").strip() == head
    assert TOKEN not in _history_text(repo)


def test_a_forge_answering_500_keeps_the_work_and_pushes_nothing_to_the_local_branch(
    tmp_path: Path,
) -> None:
    double = ForgeDouble(fail=5)
    try:
        forge = f'mode = "pr"\n\n[forge]\napi_url = "{double.url}"\nrepo = "team/project"\n'
        repo, _, head = _repo(tmp_path, forge)
        seed(repo, "once", env={"GITHUB_TOKEN": TOKEN})
    finally:
        double.close()
    [record] = records(repo)
    assert record["outcome"] == "MERGE_BLOCKED", record["reason"]
    assert "the forge answered 500" in record["reason"]
    assert git(repo, "rev-parse", "HEAD").strip() == head
    assert git(repo, "rev-parse", record["kept_branch"]).strip() == record["commit"]


def test_a_forge_token_handed_to_the_agent_is_refused(tmp_path: Path) -> None:
    toml = tmp_path / "seed.toml"
    toml.write_text('[agent]\nenv = ["GH_PUSH"]\n\n[forge]\ntoken = "GH_PUSH"\n')
    with pytest.raises(ConfigError) as refused:
        load_config(toml)
    assert f"{toml}: key 'forge': token names GH_PUSH" in str(refused.value)
    toml.write_text('[agent]\nenv = ["HOME"]\n\n[forge]\ntoken = "GH_PUSH"\n')
    assert load_config(toml).forge.token == "GH_PUSH"
