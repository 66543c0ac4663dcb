"""Every message that gives a person a command gives it whole (`--root` when it is needed)."""

from __future__ import annotations

from pathlib import Path

from kernel.records import halt
from kernel.records.store import RecordStore
from tests.support import SAMPLE, SEED_HOME, make_repo, seed


def test_a_halt_on_another_repository_says_resume_with_its_root(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", SAMPLE, '[agent]\nbackend = "none"\n')
    store = RecordStore(repo / "history")
    halt.halt(store, "4 consecutive failures across 3 different gaps (...)")
    store.close()
    whole = f"python {SEED_HOME / 'seed.py'} --root {repo} resume"

    shown = seed(repo, "status")
    once = seed(repo, "once")

    assert f"run `{whole}`" in shown.stdout, shown.stdout
    assert once.returncode == 3 and f"`{whole}`" in once.stderr + once.stdout
