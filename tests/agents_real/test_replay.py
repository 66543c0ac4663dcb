"""Each real CLI's session, recorded through the model gateway against the scripted server,
replays offline to the same tree: the server is gone, the gateway has no upstream, and what
differs on every run (dates, ids, temp paths: replay.VOLATILE) is masked narrowly."""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import pytest

from tests.agents_real.harness import Cli, every_cli
from tests.agents_real.model import serving
from tests.support import records, seed

REPLAYED = (
    "claude",  # Anthropic Messages
    "codex",  # OpenAI Responses
    "aider",  # chat completions, and the replay in the recorded checkout's path
    every_cli("gemini"),
    every_cli("opencode"),
    every_cli("mini"),
)
"""The CLIs whose sessions replay whole: all six. Aider sends its chat's files in the order of a
set of their absolute paths: the same order only in the recorded checkout's path (the replay
runs there) with a fixed hash seed (its adapter sets PYTHONHASHSEED)."""


@pytest.mark.parametrize("backend", REPLAYED)
def test_a_real_cli_session_replays_offline_to_the_recorded_tree(
    backend: str, tmp_path: Path, bwrap: None
) -> None:
    cli: Cli = importlib.import_module(f"tests.agents_real.test_{backend}").CLI
    with serving(cli.fix, text_only=cli.text_only) as model:
        repo, result = cli.run(tmp_path, cli.config(model, keys=list(cli.keys())))
    assert result.returncode == 0, result.stderr[-2000:]
    [record] = records(repo)
    assert (record["outcome"], record["network"]) == ("SUCCESS", "model-only"), record["reason"]
    env = {
        "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "HOME": str(tmp_path / "home"),
        **cli.keys(),
    }
    done = seed(repo, "replay", record["iteration_id"], env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    tree = record["agent_tree"][:12]
    assert f"recorded tree {tree}, replayed tree {tree}: same tree" in done.stdout
    assert f"the agent asked {record['wire_requests']} of {record['wire_requests']}" in done.stdout
