"""refs/seed/last-good follows only module code a person wrote or the fitness gate measured
(issue 39, item 5): a boot whose self-check passes never moves it to a change of the kernel's
that was not measured."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import cast

from domain import IterationOutcome
from domain.fitness import Generation
from kernel.host.context import Context
from kernel.host.host import LAST_GOOD_REF, BootNeeds, ModuleHost, boot
from kernel.isolation.paths import Paths
from kernel.loop import generations
from kernel.records.store import RecordStore
from tests.support import SEED_HOME, git
from tests.unit.factories import gap, record


def _seed_repo(tmp: Path) -> Path:
    """A repository holding the module server's packages, as seed's own folder (a person's commit)."""
    repo = tmp / "seed"
    for name in ("modules", "domain"):
        shutil.copytree(
            SEED_HOME / name, repo / name, ignore=shutil.ignore_patterns("__pycache__", "tests")
        )
    (repo / "kernel").mkdir(parents=True)
    for name in ("__init__.py", "contracts.py"):
        shutil.copy(SEED_HOME / "kernel" / name, repo / "kernel" / name)
    (repo / "README.md").write_text("# seed\n")
    (repo / ".gitignore").write_text("history/\n__pycache__/\n")
    git(tmp, "init", "-q", "-b", "main", str(repo))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a person's modules")
    return repo


def _commit(repo: Path, path: str, text: str, *, by_the_kernel: bool) -> str:
    (repo / path).write_text((repo / path).read_text() + text)
    git(repo, "add", "-A")
    # the kernel's commits carry its trailer (kernel/records/commitmsg.py)
    message = "a change\n\nSeed-Iteration: iter-0001-20260101-120000\n" if by_the_kernel else "mine"
    git(repo, "commit", "-qm", message)
    return git(repo, "rev-parse", "HEAD").strip()


def _boot(repo: Path) -> str:
    """Boot as the daemon does (the self-check passing), and return refs/seed/last-good."""
    paths = Paths(root=repo, common=repo / ".git", seed_home=repo)
    store = RecordStore(paths.history, fingerprint="x", state=paths.state)
    host = ModuleHost(repo, paths.state / "host.log")
    needs = BootNeeds(paths, store, lambda _: None, lambda code, log, jail: (True, "checked"))
    try:
        boot(host, needs)
    finally:
        host.stop()
    found = subprocess.run(
        ["git", "rev-parse", "--verify", "--quiet", LAST_GOOD_REF],
        cwd=repo,
        capture_output=True,
        text=True,
        check=False,
    )
    return found.stdout.strip()


def test_last_good_moves_to_a_persons_commit_or_a_generation_never_to_an_unmeasured_change(
    tmp_path: Path,
) -> None:
    repo = _seed_repo(tmp_path)
    person = git(repo, "rev-parse", "HEAD").strip()
    assert _boot(repo) == person

    # a commit of the kernel's that changed the planner without being measured (a planner
    # that tells a replay from live use landed on an older kernel): the self-check passes,
    # last-good stays with the person's modules
    unmeasured = _commit(repo, "modules/planner/__init__.py", "\n# changed\n", by_the_kernel=True)
    assert _boot(repo) == person

    # the same change once the fitness gate kept it as a generation
    git(repo, "update-ref", "refs/seed/generation/1", unmeasured)
    assert _boot(repo) == unmeasured

    # a later change of the kernel's that leaves the module server's code alone: that code is
    # still the generation's
    docs = _commit(repo, "README.md", "more\n", by_the_kernel=True)
    assert _boot(repo) == docs

    # a person's own change to the modules: theirs to vouch for
    again = _commit(repo, "modules/planner/__init__.py", "\n# mine\n", by_the_kernel=False)
    assert _boot(repo) == again
    assert not list((repo / ".git" / "seed").glob("code/*")), "the copies of module code are gone"


def test_kept_work_a_person_approves_becomes_a_generation_and_then_last_good(
    tmp_path: Path,
) -> None:
    repo = _seed_repo(tmp_path)
    person = git(repo, "rev-parse", "HEAD").strip()
    assert _boot(repo) == person
    # `seed.py approve` landed a kept change to the planner: measured before it was kept
    landed = _commit(repo, "modules/planner/__init__.py", "\n# kept\n", by_the_kernel=True)
    assert _boot(repo) == person
    ctx = cast(
        Context,
        SimpleNamespace(paths=Paths(root=repo, common=repo / ".git", seed_home=repo), log=print),
    )
    kept = record(gap(), 1, IterationOutcome.KEPT, None)
    generations.approved(
        ctx, kept.model_copy(update={"generation": Generation(fell=("x",))}), landed
    )
    assert _boot(repo) == person, "a change the gate refused is no generation"
    generations.approved(ctx, kept.model_copy(update={"generation": Generation()}), landed)
    assert git(repo, "rev-parse", "refs/seed/generation/1").strip() == landed
    assert _boot(repo) == landed
