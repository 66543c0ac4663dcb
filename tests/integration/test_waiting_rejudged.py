"""Gaps marked waiting are waiting on something (the backend, the sandbox, the api_base): a
change to seed.toml re-judges them at once, and `once` with nothing to do says who waits for
what."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.support import SAMPLE, agent_config, make_repo, records, seed

_FIX = [{"replace": "calc.py", "old": "import os\n\n\n", "new": ""}]


def _no_bwrap(tmp: Path) -> str:
    """A PATH with git and python but no bubblewrap: the sandbox is unavailable."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    for name in ("git", "python3"):
        found = shutil.which(name)
        assert found
        (bin_dir / name).symlink_to(found)
    return str(bin_dir)


def test_waiting_gaps_are_released_when_the_person_turns_the_sandbox_off(
    tmp_path: Path,
) -> None:
    files = {**SAMPLE, "calc.py": "import os\n\n\n" + SAMPLE["calc.py"]}
    root = make_repo(tmp_path / "repo", files)
    config = agent_config(tmp_path, _FIX)
    (root / "seed.toml").write_text(config, encoding="utf-8")
    env = {"PATH": _no_bwrap(tmp_path)}

    first = seed(root, "once", env=env)
    assert first.returncode == 5, first.stderr
    waits = [r for r in records(root) if r["outcome"] == "WAITING"]
    assert waits and "bubblewrap (bwrap) is not installed" in waits[-1]["reason"]

    # nothing changed: nothing to do, and `once` says which gap waits for what
    again = seed(root, "once", env=env)
    assert again.returncode == 5
    said = again.stdout + again.stderr
    assert "nothing to do" in said and waits[-1]["gap"]["key"] in said, said
    assert "bubblewrap (bwrap) is not installed" in said, said

    # the person opts out of the sandbox: the waiting gap is judged again and the agent runs
    (root / "seed.toml").write_text(config + '[guard]\nsandbox = "off"\n', encoding="utf-8")
    released = seed(root, "once", env=env)
    assert released.returncode == 0, released.stdout + released.stderr
    assert records(root)[-1]["outcome"] == "SUCCESS"
    assert "import os" not in (root / "calc.py").read_text()
