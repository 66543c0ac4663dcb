"""`[quality] test_network = "full"` gives seed's test runs the network (never the agent's
runs): a test reaching a server outside the sandbox then runs for real, is not named as
needing the network, and `status` says the test runs have it (issue 41)."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar, cast

import pytest

from kernel.isolation import sandbox
from tests.support import make_repo, seed

needs_bwrap = pytest.mark.skipif(not sandbox.available().ok, reason="needs bubblewrap")


class _Counted(http.server.BaseHTTPRequestHandler):
    hits: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        _Counted.hits.append(self.path)
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"hello")

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[int]:
    """A server on 127.0.0.1 outside every sandbox: reached only with the host's network."""
    _Counted.hits.clear()
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Counted)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield httpd.server_address[1]
    httpd.shutdown()
    httpd.server_close()


def _project(tmp_path: Path, port: int, network: str) -> Path:
    files = {
        ".gitignore": "__pycache__/\nhistory/\n",
        "tests/test_local.py": (
            "import urllib.request\n\n\n"
            "def test_the_local_server_answers() -> None:\n"
            f"    url = 'http://127.0.0.1:{port}/from-the-test'\n"
            "    assert urllib.request.urlopen(url, timeout=5).read() == b'hello'\n"
        ),
    }
    config = f'[quality]\ntools = ["pytest"]\ntest_network = "{network}"\n'
    return make_repo(tmp_path / network, files, config=config)


@needs_bwrap
def test_full_network_lets_a_test_reach_a_server_outside(tmp_path: Path, server: int) -> None:
    cut = _project(tmp_path, server, "none")
    report = json.loads(seed(cut, "gaps", "--json").stdout)
    assert _Counted.hits == []
    assert "1 tests need the network" in " ".join(cast(list[str], report["differences"]))
    assert json.loads(seed(cut, "status", "--json").stdout)["test_network"] == "none"

    full = _project(tmp_path, server, "full")
    report = json.loads(seed(full, "gaps", "--json").stdout)
    assert "/from-the-test" in _Counted.hits
    assert report["gaps"] == [], report
    assert not any("need the network" in d for d in report["differences"]), report
    status = json.loads(seed(full, "status", "--json").stdout)
    assert status["test_network"] == "full"
    assert "tests:       the test runs have the network" in seed(full, "status").stdout


def test_a_bad_test_network_value_names_the_key(tmp_path: Path) -> None:
    root = make_repo(
        tmp_path / "repo",
        {"tests/test_a.py": "def test_a() -> None:\n    pass\n"},
        config='[quality]\ntest_network = "some"\n',
    )
    shown = seed(root, "gaps", "--json")
    assert shown.returncode != 0
    assert "test_network" in shown.stderr
