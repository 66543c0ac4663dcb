"""The real mini-swe-agent package, driven by `seed.py once` against a loopback model server.

The package comes from requirements-mini.lock (pinned, hashed), installed by the fixture into
a virtualenv cached per lock file under ~/.cache/seed/ ($XDG_CACHE_HOME; SEED_MINI_VENV
overrides), so clones and the daemon's own test runs share one install. The model is a
scripted OpenAI-compatible server on 127.0.0.1 started by the test: real HTTP, real tool calls.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.support import BROKEN_ADD, SEED_HOME, git, make_repo, records, seed

LOCK = SEED_HOME / "requirements-mini.lock"

SCRIPT = [
    (
        "I will fix add().",
        "sed -i 's/return a - b/return a + b/' calc.py && grep -n 'return a' calc.py",
    ),
    ("Fixed; submitting.", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"),
]
"""The model's replies: one bash tool call each."""


@pytest.fixture(scope="session")
def mini_bin() -> Path:
    """The bin folder of a virtualenv with the pinned mini-swe-agent (installed on first use)."""
    stamp = hashlib.sha256(LOCK.read_bytes()).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "seed"
    venv = Path(os.environ.get("SEED_MINI_VENV") or cache / f"venv-mini-{stamp}")
    marker = venv / f".seed-requirements-mini-{stamp}"
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{venv}.lock", "w") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)  # two test sessions must not install at once
        if not marker.exists():
            subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
            install = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet"]
            install += ["--disable-pip-version-check", "--require-hashes", "-r", str(LOCK)]
            done = subprocess.run(install, capture_output=True, text=True, check=False)
            assert done.returncode == 0, f"installing {LOCK.name} failed:\n{done.stderr[-3000:]}"
            marker.write_text("ok\n")
    assert (venv / "bin" / "mini").exists()
    return venv / "bin"


class Model:
    """A scripted OpenAI-compatible chat-completions server on 127.0.0.1."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                model.requests.append(
                    {"path": self.path, "auth": self.headers.get("Authorization"), "body": body}
                )
                text, command = SCRIPT[min(len(model.requests), len(SCRIPT)) - 1]
                call = {
                    "id": f"call_{len(model.requests)}",
                    "type": "function",
                    "function": {"name": "bash", "arguments": json.dumps({"command": command})},
                }
                reply = {
                    "id": f"chatcmpl-{len(model.requests)}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model"),
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": text, "tool_calls": [call]},
                            "finish_reason": "tool_calls",
                        }
                    ],
                    "usage": {"prompt_tokens": 1000, "completion_tokens": 50, "total_tokens": 1050},
                }
                data = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"


@contextlib.contextmanager
def serving() -> Iterator[Model]:
    model = Model()
    thread = threading.Thread(target=model.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield model
    finally:
        model.server.shutdown()
        model.server.server_close()
        thread.join(timeout=10)


@pytest.mark.slow
def test_real_mini_fixes_a_failing_test_through_seed_once(tmp_path: Path, mini_bin: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "mini").symlink_to(mini_bin / "mini")
    with serving() as model:
        config = (
            '[agent]\nbackend = "mini"\nmodel = "openai/fake-model"\nrepair_rounds = 0\n'
            f'api_base = "{model.url}"\n'
            'env = ["OPENAI_API_KEY", "MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT"]\n'
            '[agent.prices."fake-model"]\ninput = 1.0\noutput = 2.0\n'
        )
        repo = make_repo(tmp_path / "repo", BROKEN_ADD, config)
        env = {
            "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
            "HOME": str(tmp_path / "home"),
            "OPENAI_API_KEY": "sk-loopback",
            "MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT": "1",
        }

        result = seed(repo, "once", env=env, timeout=600)

    assert result.returncode == 0, result.stderr
    assert "return a + b" in (repo / "calc.py").read_text()
    [record] = records(repo)
    assert record["outcome"] == "SUCCESS" and record["backend"] == "mini"
    assert record["commit"] == git(repo, "rev-parse", "HEAD").strip()
    assert record["agent_version"].startswith("mini-swe-agent 2.")
    assert (record["input_tokens"], record["output_tokens"]) == (2000, 100)
    assert record["tokens_used"] == 2100 and record["agent_turns"] == 2
    assert record["cost_basis"] == "prices"
    assert record["cost_usd"] == pytest.approx((2000 * 1.0 + 100 * 2.0) / 1e6)
    assert len(model.requests) == 2
    first = model.requests[0]
    assert first["path"] == "/v1/chat/completions"
    assert first["auth"] == "Bearer sk-loopback"
    assert first["body"]["model"] == "fake-model"
    assert [t["function"]["name"] for t in first["body"]["tools"]] == ["bash"]
    assert "test_add" in json.dumps(first["body"]["messages"])
    saved = repo / "history" / record["iteration_id"] / "trajectory.json"
    assert json.loads(saved.read_text())["info"]["exit_status"] == "Submitted"
