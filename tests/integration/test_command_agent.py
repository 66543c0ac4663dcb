"""The command contract as a person uses it: an agent of their own in ~/tools, with its data
beside it (docs/command-agents.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.support import SAMPLE, make_repo, records, seed

_AGENT = """
import json, pathlib
rate = json.loads((pathlib.Path(__file__).parent / "data.json").read_text())["rate"]
with open("calc.py", "a", encoding="utf-8") as handle:
    handle.write(f"\\n\\ndef tax(a):\\n    return a * {rate} / 100\\n")
pathlib.Path("tests/test_tax.py").write_text(
    "from calc import tax\\n\\n\\ndef test_tax():\\n    assert tax(100) == %d\\n" % rate
)
"""


def test_a_command_agent_in_home_reads_the_data_file_beside_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "tools").mkdir(parents=True)
    (home / "tools" / "agent.py").write_text(_AGENT)
    (home / "tools" / "data.json").write_text(json.dumps({"rate": 7}))
    argv = json.dumps([sys.executable, "~/tools/agent.py"])
    config = f'[agent]\nbackend = "command"\ncommand = {argv}\nrepair_rounds = 0\n'
    config += '\n[quality]\ntools = ["ruff", "pytest"]\n'
    repo = make_repo(tmp_path / "repo", SAMPLE, config)
    (repo / "inbox").mkdir()
    (repo / "inbox" / "tax.md").write_text("Add tax(a) to calc.py, with a test.\n")
    ran = seed(repo, "once", env={"HOME": str(home)})
    assert ran.returncode == 0, ran.stdout + ran.stderr
    [record] = records(repo)
    assert record["outcome"] == "SUCCESS", record
    assert "return a * 7 / 100" in (repo / "calc.py").read_text()
