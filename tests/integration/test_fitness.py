"""`seed.py fitness` replays the planning modules over the project's own history in the
module server's sandbox and scores each plan against what landed; a generation whose planner
leaves the fixed file out of the allowlist scores lower, and says so."""

from __future__ import annotations

import inspect
import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from kernel.host.context import open_context
from kernel.loop.corpus import history_cases
from kernel.loop.fitness import Replay
from kernel.loop.loop import Loop
from tests.integration.test_ratchet import BUGGY, FIX, TOOLS
from tests.support import SEED_HOME, agent_config, git, make_repo, records, seed


@pytest.fixture(scope="module")
def landed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A repository whose history holds one landed fix of calc.py (a failing test)."""
    tmp = tmp_path_factory.mktemp("fitness")
    repo = make_repo(tmp / "repo", BUGGY, agent_config(tmp, [FIX], extra=TOOLS))
    ran = seed(repo, "once")
    assert ran.returncode == 0, ran.stderr[-2000:]
    [record] = records(repo)
    assert record["outcome"] == "SUCCESS" and "calc.py" in record["touched_files"]
    # what the planning modules got is kept in the kernel's state, for the replay
    inputs = repo / ".git" / "seed" / "fitness" / "inputs"
    assert [p.name for p in inputs.iterdir()] == [f"{record['iteration_id']}.json.xz"]
    return repo


def _fitness(repo: Path, *args: str) -> dict[str, object]:
    ran = seed(repo, "fitness", "--json", "--part", "history", *args)
    assert ran.returncode == 0, ran.stderr[-2000:]
    return json.loads(ran.stdout)


def test_the_modules_seed_runs_plan_the_landed_fix_of_the_project_history(landed: Path) -> None:
    found = _fitness(landed)
    figures = found["figures"]
    assert isinstance(figures, dict)
    assert (figures["cases"], figures["landed"], figures["valid"]) == (1, 1, 1.0)
    assert (figures["recall"], figures["top1"], figures["chosen"]) == (1.0, 1.0, 1.0)
    assert figures["prompt_chars"] > 500
    shown = seed(landed, "fitness", "--part", "history")
    assert shown.returncode == 0 and "history" in shown.stdout and "recall" in shown.stdout
    assert "fixed files allowed" in shown.stderr  # each case as it is replayed


def test_a_generation_that_leaves_the_fixed_file_out_scores_a_lower_recall(
    landed: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "seed"
    shutil.copytree(
        SEED_HOME,
        copy,
        ignore=shutil.ignore_patterns(".git", "history", "__pycache__", "tests", "bench", "docs"),
    )
    planner = copy / "modules" / "planner" / "planner.py"
    text = planner.read_text()
    assert "        allowed_paths=allowed,\n" in text
    planner.write_text(
        text.replace(
            "        allowed_paths=allowed,\n",
            '        allowed_paths=tuple(p for p in allowed if "test" in p),\n',
        )
    )
    found = _fitness(landed, "--modules", str(copy))
    figures = found["figures"]
    assert isinstance(figures, dict)
    assert (figures["valid"], figures["recall"]) == (1.0, 0.0)
    assert found["modules"] == str(copy.resolve())


def test_modules_that_are_neither_a_folder_nor_a_commit_are_a_usage_error(landed: Path) -> None:
    ran = seed(landed, "fitness", "--modules", "no-such-generation")
    assert ran.returncode == 2
    assert "neither a folder nor a commit" in ran.stderr


def test_a_replay_gives_the_planner_what_a_running_plan_gets(landed: Path) -> None:
    """Nothing in the planner's input tells a replay from a plan that runs: the time is now,
    the checkout is named as an iteration's, the branch, head and memory are the project's
    (a generation must not plan well only when it is measured)."""
    ctx = open_context(landed, quiet=True)
    [case] = history_cases(list(ctx.store.iter_all()))
    checkout = ctx.paths.checkouts / "wt-1-20261127000000000000"
    state = Replay(ctx, SEED_HOME).state(case, checkout)
    assert abs((datetime.now(UTC) - state.now).total_seconds()) < 60
    assert state.branch == git(landed, "branch", "--show-current").strip()
    assert state.head == case.base and state.tallies and state.fingerprint
    live = inspect.getsource(Loop.prepare)
    replay = inspect.getsource(Replay)
    naming = 'f"wt-{os.getpid()}-{datetime.now(UTC):%Y%m%d%H%M%S%f}"'
    assert naming in live and naming in replay and "fitness" not in naming
