"""The agent starts from exactly HEAD, and its change is only its own (issue 14).

The target's ruff configuration asks every run to fix (UP rules over old-style annotations)
and its test suite writes a file at the repository root: the baseline is measured on an
export of HEAD, so neither reaches the agent's worktree, and the file the tests write never
counts as the agent's.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.planted import OLD_STYLE
from tests.support import agent_config, agent_io, git, make_repo, records, seed, snapshot

FILES = {
    "pyproject.toml": '[tool.ruff]\nfix = true\nselect = ["UP", "F401"]\n',
    "old.py": OLD_STYLE.replace('start=int("0")', 'start=int("1")'),
    "tests/test_old.py": (
        "from pathlib import Path\n\nfrom old import total\n\n\n"
        "def test_total():\n"
        "    Path(__file__).parent.parent.joinpath('range_check.html').write_text('<p>')\n"
        "    assert total([1, 2]) == 3\n"
        "    assert total(None) == 0\n"  # both sides of `x or []`: the changed line is vouched for
    ),
    ".gitignore": "history/*\ninbox/*\n",
}
TOOLS = '[quality]\ntools = ["ruff", "pytest"]\n'


def test_the_agent_starts_from_head_and_a_one_line_fix_is_one_file(tmp_path: Path) -> None:
    seen = agent_io(tmp_path) / "status.txt"
    steps = [
        # what the agent finds: `git status` of its worktree, ignored files included
        {"run": ["sh", "-c", f"git status --porcelain --ignored > {seen}"]},
        {"replace": "old.py", "old": 'start=int("1")', "new": 'start=int("0")'},
    ]
    root = make_repo(tmp_path / "repo", FILES)
    before = snapshot(root)
    gaps = seed(root, "gaps", "--json")
    assert gaps.returncode == 0, gaps.stderr
    assert snapshot(root) == before, "measuring changed the checkout"
    keys = {g["key"] for g in json.loads(gaps.stdout)["gaps"]}
    assert "pytest:tests/test_old.py::test_total" in keys and "ruff:old.py:UP006" in keys

    config = tmp_path / "seed.toml"
    config.write_text(agent_config(tmp_path, steps, extra=TOOLS))
    result = seed(root, "--config", str(config), "once")

    assert seen.read_text() == "", "the agent's worktree was not exactly HEAD"
    [record] = records(root)
    assert record["outcome"] == "SUCCESS", (record["reason"], result.stderr[-2000:])
    assert record["gap"]["key"] == "pytest:tests/test_old.py::test_total"
    assert record["touched_files"] == ["old.py"]
    assert (record["diff"]["files"], record["diff"]["insertions"]) == (1, 1)
    landed = git(root, "show", "--name-only", "--format=", record["commit"]).split()
    assert landed == ["old.py"]
    assert not (root / "range_check.html").exists()
