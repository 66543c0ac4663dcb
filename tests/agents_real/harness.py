"""What the tests of the real agent CLIs share: finding the installed program, docs/agents.md's tested
seed.toml for a self-hosted model, running `seed.py once`, and the five scenarios every CLI
goes through (a landed fix, an API error, a timeout, usage and cost, a resumed repair round).

Each runs the real program from the cache `python -m tests.agents_real.install` fills, inside
seed's real sandbox (bubblewrap), against a scripted model server on 127.0.0.1. Without the
cache the tests skip, unless SEED_REQUIRE_AGENT_CLIS=1 (CI), where they fail.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import re
import threading
import uuid
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from kernel.loop import modelrun
from kernel.records import exchanges
from tests.agents_real import install
from tests.agents_real.model import (
    CACHED_TOKENS,
    INPUT_TOKENS,
    OUTPUT_TOKENS,
    ScriptedModel,
    Turn,
    serving,
)
from tests.support import BROKEN_ADD, agent_examples, git, make_repo, records, seed

LOOPBACK_KEY = "sk-loopback-test"
"""The real key, in the daemon's environment only: the gateway adds it upstream."""
FIXED = "    return a + b\n"
WRONG = "    return b - a\n"
"""calc.py's add() after the right fix, and after a wrong one (test_add still fails)."""


def program(backend: str) -> Path:
    """The installed program of a backend; skips (fails under CI) when it is not installed."""
    if os.environ.get("SEED_DEPTH"):
        # a daemon measuring its own suite runs it with an empty HOME: the cache is not there
        pytest.skip("the real agent CLIs are not driven from inside a daemon's own test run")
    found = install.programs().get(backend)
    if found is not None and found.exists():
        return found
    why = f"{backend} is not installed: run python -m tests.agents_real.install"
    if os.environ.get("SEED_REQUIRE_AGENT_CLIS") == "1":
        pytest.fail(f"SEED_REQUIRE_AGENT_CLIS=1 but {why}")
    pytest.skip(why)


def endpoint_example(backend: str) -> dict[str, Any]:
    """The seed.toml example with api_base in docs/agents.md's section for the backend."""
    for document in agent_examples(backend):
        if document.get("agent", {}).get("api_base"):
            return document
    raise AssertionError(f"docs/agents.md's {backend} section has no example with api_base")


@dataclass
class Cli:
    """One real CLI: how it is configured and what its model script looks like."""

    backend: str
    fix: list[Turn]
    """Turns that fix add() (the last a final text)."""
    wrong_then_right: list[Turn]
    """A first round that breaks add() another way and ends, then a second that fixes it."""
    text_only: bool = False
    cached_reported: bool = True
    """Whether the tool reports the server's cached tokens."""
    home_files: Mapping[str, str] = field(default_factory=dict[str, str])
    """Files of the person's HOME the tool needs (its settings)."""
    api_error: str = ""
    """A piece of the tool's own words on an HTTP 401, expected in the record."""
    carries_task: bool = True
    """A resumed session sends round 1's task again verbatim (aider sends a summary of it)."""
    session_evidence: Callable[[str, str, ScriptedModel], None] | None = None
    """Checks that round 2 continued the session round 1 reported (given both rounds' logs)."""

    def config(self, model: ScriptedModel, **agent: Any) -> str:
        """docs/agents.md's example, pointed at the scripted server, with these [agent] keys changed."""
        document = endpoint_example(self.backend)
        settings = document["agent"]
        base = re.sub(r"^https?://[^/]+", model.origin, settings["api_base"])
        settings.update({"api_base": base, "repair_rounds": 0, **agent})
        return tomli_w.dumps(document)

    def keys(self, key: str = LOOPBACK_KEY) -> dict[str, str]:
        """The key variables docs/agents.md's example lists, with a loopback value."""
        names = endpoint_example(self.backend)["agent"].get("keys", [])
        return {name: key for name in names}

    def run(
        self,
        tmp: Path,
        config: str,
        files: Mapping[str, str] = BROKEN_ADD,
        timeout: float = 600,
        key: str = LOOPBACK_KEY,
        extra_env: Mapping[str, str] | None = None,
    ) -> tuple[Path, Any]:
        """`seed.py once` on a fresh repository with the real program first on PATH (and
        `extra_env` in the daemon's environment)."""
        bin_dir = tmp / "bin"
        bin_dir.mkdir(exist_ok=True)
        (bin_dir / self.backend).symlink_to(program(self.backend))
        home = tmp / "home"
        home.mkdir(exist_ok=True)
        for name, text in self.home_files.items():
            (home / name).parent.mkdir(parents=True, exist_ok=True)
            (home / name).write_text(text, encoding="utf-8")
        env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "HOME": str(home)}
        env.update(self.keys(key))
        env.update(extra_env or {})
        repo = make_repo(tmp / "repo", files, config)
        return repo, seed(repo, "once", env=env, timeout=timeout)


def expected_cost(cli: Cli, answered: int) -> float:
    """What docs/agents.md's [agent.prices] table makes of `answered` scripted answers."""
    [price] = endpoint_example(cli.backend)["agent"]["prices"].values()
    inputs = INPUT_TOKENS * answered
    cached = CACHED_TOKENS * answered if cli.cached_reported else 0
    outputs = OUTPUT_TOKENS * answered
    usd = (inputs - cached) * price["input"] + cached * price.get("cached_input", price["input"])
    return (usd + outputs * price["output"]) / 1e6


@contextlib.contextmanager
def agents_keys(names: Collection[str], under: Path) -> Iterator[set[str]]:
    """The values the agent's processes (those whose run folder is under `under`: not another
    test's) held in these variables while it ran, read from /proc as the run goes."""
    seen: set[str] = set()
    done = threading.Event()
    mine = str(under.resolve()).encode()

    def look() -> None:
        while not done.wait(0.05):
            for environ in Path("/proc").glob("[0-9]*/environ"):
                with contextlib.suppress(OSError):
                    pairs = dict(
                        item.split(b"=", 1)
                        for item in environ.read_bytes().split(b"\0")
                        if b"=" in item
                    )
                    if pairs.get(b"SEED_RUN_DIR", b"").startswith(mine):
                        seen.update(
                            pairs[n.encode()].decode() for n in names if n.encode() in pairs
                        )

    watcher = threading.Thread(target=look, daemon=True)
    watcher.start()
    try:
        yield seen
    finally:
        done.set()
        watcher.join()


def lands_a_fix(cli: Cli, tmp: Path, **agent: Any) -> tuple[Path, dict[str, Any], ScriptedModel]:
    """The real program fixes add() through `seed.py once`: landed, recorded, priced, its model
    reached through the kernel's gateway only (network model-only): the upstream got the real
    key, the agent held the placeholder, and the record has the wire's usage."""
    program(cli.backend)
    with (
        serving(cli.fix, text_only=cli.text_only, log=tmp / "model.jsonl") as model,
        agents_keys(cli.keys(), tmp) as held,
    ):
        repo, result = cli.run(tmp, cli.config(model, **agent))
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    [record] = records(repo)
    folder = repo / "history" / record["iteration_id"]
    log = (folder / "agent.log").read_text(errors="replace")
    assert record["outcome"] == "SUCCESS", (record["reason"], log[-3000:])
    assert record["backend"] == cli.backend and record["sandboxed"] is True
    assert record["commit"] == git(repo, "rev-parse", "HEAD").strip()
    assert git(repo, "rev-list", "--count", "HEAD") == "2\n"
    assert FIXED in git(repo, "show", "HEAD:calc.py")
    assert git(repo, "show", "--name-only", "--format=", "HEAD").split() == ["calc.py"]
    # usage as the tool reported it, priced from [agent.prices]
    answered = len(model.answered())
    assert answered == len(cli.fix)
    assert record["input_tokens"] == INPUT_TOKENS * answered
    assert record["output_tokens"] == OUTPUT_TOKENS * answered
    if endpoint_example(cli.backend)["agent"].get("prices"):
        assert record["cost_basis"] == "prices"
        assert record["cost_usd"] == pytest.approx(expected_cost(cli, answered))
    # every request came to the loopback server through the gateway, which added the real key
    assert model.requests and all(r.path.startswith(("/v1", "/v1beta")) for r in model.requests)
    assert not any(r.path.startswith(("/v1/v1", "/v1beta/v1beta")) for r in model.requests)
    assert all(LOOPBACK_KEY in json.dumps(r.headers) for r in model.requests)
    assert "test_add" in json.dumps(model.answered()[0].body)
    # model-only: the agent held the placeholder; the wire's usage is recorded beside the tool's
    assert record["network"] == "model-only"
    assert held == {modelrun.PLACEHOLDER}, held
    lines = exchanges.read(folder, repo / ".git" / "seed")  # sealed: read checks the seal
    assert len(lines) == record["wire_requests"] == len(model.requests)
    per_answer = INPUT_TOKENS + OUTPUT_TOKENS
    assert record["wire_tokens"] == sum(x.usage.tokens for x in lines) == per_answer * len(lines)
    assert LOOPBACK_KEY not in (folder / "model.jsonl").read_text()
    return repo, record, model


class _Anywhere(http.server.BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "8")
        self.end_headers()
        self.wfile.write(b"anywhere")


@contextlib.contextmanager
def anywhere() -> Iterator[str]:
    """A second loopback server, standing for any host but the model: its URL."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Anywhere)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def probe_command(url: str, key: str) -> str:
    """A shell command that looks for the real key everywhere the agent can read (its
    environment, HOME, the checkout, /tmp, /proc/*/environ and cmdline) and tries `url` over
    HTTP and raw TCP, and a DNS lookup; it prints what it found (model_agent.py --probe)."""
    source = (Path(__file__).parent / "model_agent.py").read_text(encoding="utf-8")
    return f"python3 - --probe {key[::-1]} {url} <<'SEED_PROBE'\n{source}SEED_PROBE"


def reports_an_api_error(cli: Cli, tmp: Path) -> dict[str, Any]:
    """An HTTP 401 from the model is AGENT_ERROR, with the tool's own message in the record."""
    program(cli.backend)
    words = f"loopback refuses this key ({uuid.uuid4().hex[:8]})"
    with serving(cli.fix, text_only=cli.text_only, error=(401, words)) as model:
        repo, result = cli.run(tmp, cli.config(model))
    assert result.returncode == 1, result.stderr[-3000:]
    [record] = records(repo)
    assert (record["outcome"], record["failure_category"]) == ("FAILURE", "AGENT_ERROR")
    assert model.requests, "the tool never called the model"
    assert words in record["reason"], record["reason"]
    if cli.api_error:
        assert cli.api_error in record["reason"], record["reason"]
    assert git(repo, "rev-list", "--count", "HEAD") == "1\n"
    return record


def text_of(value: object) -> str:
    """Every string in a JSON value, one per line (what the model was shown)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return "\n".join(text_of(v) for v in value.values())  # type: ignore[misc]
    if isinstance(value, list):
        return "\n".join(text_of(v) for v in value)  # type: ignore[misc]
    return ""


def _processes_in(folder: Path) -> list[int]:
    """Processes whose working directory is inside a folder."""
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = Path(os.readlink(entry / "cwd"))
        except OSError:
            continue
        if cwd == folder or folder in cwd.parents:
            found.append(int(entry.name))
    return found


EVERY_CLI = os.environ.get("SEED_EVERY_CLI") == "1"
"""Whether the escape probe and the replay run for every CLI. The README's test command runs
them for a few (each API's shape once) to stay inside its 30 minutes; bench/README.md has the
command for all six (SEED_EVERY_CLI=1)."""


def every_cli(*values: object) -> object:
    """A parameter that runs only with SEED_EVERY_CLI=1 (skipped, saying so, otherwise)."""
    return pytest.param(
        *values,
        marks=pytest.mark.skipif(not EVERY_CLI, reason="the other CLIs run with SEED_EVERY_CLI=1"),
    )


def is_ended_at_the_timeout(cli: Cli, tmp: Path) -> dict[str, Any]:
    """A model that never answers: the run is ended at timeout_s, with all its processes."""
    program(cli.backend)
    with serving(cli.fix, text_only=cli.text_only, hold=True) as model:
        repo, result = cli.run(tmp, cli.config(model, timeout_s=20))
        waiting = len(model.requests)
    assert result.returncode == 1, result.stderr[-3000:]
    [record] = records(repo)
    assert (record["outcome"], record["failure_category"]) == ("FAILURE", "AGENT_TIMEOUT")
    assert "process group was ended" in record["reason"]
    assert waiting >= 1, "the tool never reached the model before the timeout"
    assert _processes_in(repo.resolve()) == []
    assert git(repo, "rev-list", "--count", "HEAD") == "1\n"
    return record


def resumes_its_session(cli: Cli, tmp: Path) -> tuple[dict[str, Any], ScriptedModel, str]:
    """Round 1 leaves test_add failing; round 2 continues the tool's own session and fixes it."""
    program(cli.backend)
    with serving(cli.wrong_then_right, text_only=cli.text_only, log=tmp / "model.jsonl") as model:
        repo, result = cli.run(tmp, cli.config(model, repair_rounds=1))
    assert result.returncode == 0, result.stderr[-3000:]
    [record] = records(repo)
    folder = repo / "history" / record["iteration_id"]
    first_log = (folder / "agent.log").read_text(errors="replace")
    assert record["outcome"] == "SUCCESS", (record["reason"], first_log[-3000:])
    first, second = record["rounds"]
    assert (first["number"], first["outcome"]) == (1, "ROLLBACK")
    assert (second["number"], second["outcome"], second["resumed"]) == (2, "SUCCESS", True)
    assert FIXED in git(repo, "show", "HEAD:calc.py")
    follow_up = (folder / "prompt-round-2.md").read_text()
    assert "tests/test_calc.py::test_add" in follow_up
    # round 2's requests carry round 1's task, which its own prompt does not repeat: the
    # tool continued its session rather than starting afresh
    task = [line for line in (folder / "prompt.md").read_text().splitlines() if len(line) > 20]
    task = [line for line in task if line not in follow_up]
    assert task
    round_two = [r for r in model.answered() if "## Round 2" in text_of(r.body)]
    assert round_two, "no request carried the refusal"
    if cli.carries_task:
        assert all(line in text_of(round_two[0].body) for line in task[:5])
    if cli.session_evidence is not None:
        second_log = (folder / "agent-round-2.log").read_text(errors="replace")
        cli.session_evidence(first_log, second_log, model)
    return record, model, first_log
