"""The escape probe through each real CLI's own shell tool (Claude Code's is in test_claude.py,
with its full-network control): in model-only, a command the scripted model has the CLI run
finds the real key nowhere (environment, HOME, the checkout, /tmp, /proc/*/environ and cmdline)
and reaches no other host (a second loopback server over HTTP and raw TCP, and a DNS lookup).

Aider has no shell tool the model can drive without a person: it runs a command the model
suggests only on an explicit yes, which --yes-always answers no (aider/io.py confirm_ask,
`explicit_yes_required`). The command aider does run unattended is the person's own test
command (--test-cmd with --auto-test, through [agent] extra_args), after an edit, with its
output handed to the model when it fails: that is the probe's way in for aider here.
"""

from __future__ import annotations

import base64
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.agents_real import test_aider, test_codex, test_gemini, test_mini, test_opencode
from tests.agents_real.harness import (
    EVERY_CLI,
    Cli,
    anywhere,
    every_cli,
    probe_command,
    program,
    text_of,
)
from tests.agents_real.model import Request, Turn, call, say, serving
from tests.support import records

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("bwrap")]

PROBED = re.compile(
    r"key found in: (?:nowhere|\[[^\]\n]*\]); other host: http [^;\n]*; tcp [^;\n]*; dns \w+"
)
"""The probe's line (model_agent.py --probe), and not its source, which the command carries."""


@dataclass(frozen=True)
class _Shell:
    """How the scripted model has one CLI run a command, and end."""

    cli: Cli
    run: Callable[[str], Turn]
    """The tool call that runs a shell command, in the CLI's own tool's name and arguments."""
    done: Turn
    """The answer after the command's result, which ends the run."""


_SHELLS = {
    # codex exec: `exec_command` (unified exec), argument `cmd`
    "codex": _Shell(test_codex.CLI, lambda c: call("exec_command", cmd=c), say("Looked around.")),
    # gemini -p --approval-mode=yolo: run_shell_command, argument `command`
    "gemini": _Shell(
        test_gemini.CLI,
        lambda c: call("run_shell_command", command=_encoded(c)),
        say("Looked around."),
    ),
    # opencode run --auto: the bash tool, arguments `command` and `description`
    "opencode": _Shell(
        test_opencode.CLI,
        lambda c: call("bash", command=c, description="look around"),
        say("Looked around."),
    ),
    # mini: every action is a bash command; the run ends on its submit line
    "mini": _Shell(test_mini.CLI, lambda c: call("bash", command=c), test_mini.SUBMIT),
}


def _encoded(command: str) -> str:
    """The probe's source in base64: gemini refuses a command holding a backtick (or `$(`) even
    inside a quoted heredoc ("Command injection detected"), and the probe's source has backticks."""
    head, source = command.split(" <<'SEED_PROBE'\n", 1)
    blob = base64.b64encode(source.removesuffix("SEED_PROBE").encode()).decode()
    return f"echo {blob} | base64 -d | {head}"


def _probed(requests: list[Request]) -> set[str]:
    """The probe's lines in what the model was sent after its first answer."""
    return {line for r in requests[1:] for line in PROBED.findall(text_of(r.body))}


@pytest.mark.parametrize(
    ("backend", "network"),
    [
        ("codex", "model-only"),
        every_cli("codex", "full"),  # a second positive control (claude's runs always)
        every_cli("gemini", "model-only"),
        every_cli("opencode", "model-only"),
        every_cli("mini", "model-only"),
    ],
)
def test_a_cli_running_a_shell_command_reaches_no_other_host_and_finds_no_key(
    tmp_path: Path, backend: str, network: str
) -> None:
    # the command is a child of the CLI's shell tool, with its environment, files and process
    # table: what it sees, any command the agent runs sees. With network = "full" the same probe
    # finds the key and reaches the other host, so a probe that saw nothing could not pass
    shell = _SHELLS[backend]
    program(backend)
    key = f"sk-real-{uuid.uuid4().hex}"  # in no file: only in the daemon's environment
    with anywhere() as url:
        turns = [shell.run(probe_command(url, key)), shell.done]
        with serving(turns, log=tmp_path / "model.jsonl") as model:
            config = shell.cli.config(model, network=network)
            repo, result = shell.cli.run(tmp_path, config, key=key)
    assert result.returncode in (0, 1), result.stderr[-3000:]
    [record] = records(repo)
    # the tool's result went back to the model: what the agent could tell anyone
    found = _probed(model.requests)
    assert len(found) == 1, (found, record["reason"], result.stderr[-2000:])
    [probed] = found
    _says_nothing_was_reached(record, probed, network, shell.cli)


SUGGESTED = "echo suggested-ran-$((6*7))"
"""A command aider's model suggests: it prints suggested-ran-42 only if run."""


@pytest.mark.skipif(not EVERY_CLI, reason="the other CLIs run with SEED_EVERY_CLI=1")
def test_aider_running_its_test_command_reaches_no_other_host_and_finds_no_key(
    tmp_path: Path,
) -> None:
    # aider runs the person's test command after its edit (--auto-test) and, as it fails
    # here, sends its output to the model, which answers once more
    program("aider")
    cli = test_aider.CLI
    key = f"sk-real-{uuid.uuid4().hex}"
    with anywhere() as url:
        probe = probe_command(url, key) + "\nexit 1\n"
        # an edit that leaves test_add failing: aider tests after it, and the run is not
        # verified and landed (16 s less); with it, a shell command the model suggests, which
        # aider declines unattended
        edit = say(cli.wrong_then_right[0].text + f"\n```bash\n{SUGGESTED}\n```\n")
        with serving([edit, say("Looked around.")], text_only=True) as model:
            config = cli.config(model, extra_args=["--test-cmd", probe, "--auto-test"])
            repo, result = cli.run(tmp_path, config, key=key)
    assert result.returncode in (0, 1), result.stderr[-3000:]
    [record] = records(repo)
    found = _probed(model.requests)
    assert len(found) == 1, (found, record["reason"], result.stderr[-2000:])
    [probed] = found
    _says_nothing_was_reached(record, probed, "model-only", cli)
    log = (repo / "history" / record["iteration_id"] / "agent.log").read_text()
    assert SUGGESTED in log  # aider read it as a command to offer, and declined it
    assert "ran-42" not in log and not any("ran-42" in text_of(r.body) for r in model.requests)


def _says_nothing_was_reached(
    record: dict[str, object], probed: str, network: str, cli: Cli
) -> None:
    """model-only: the record says so and the probe found nothing; full: it found both."""
    if network == "model-only":
        assert record["network"] == "model-only"
        assert probed.startswith("key found in: nowhere;"), probed
        assert "http unreachable" in probed and "tcp unreachable" in probed, probed
        assert "dns unresolved" in probed, probed
    else:
        assert record["network"] == "full (opt-out)"
        held = cli.keys()  # the tool's key variables: the agent's own with full
        assert any(f"env {name}" in probed for name in held), probed
        assert "http anywhere; tcp connected" in probed, probed
