"""An agent with no network but its model: the real bubblewrap sandbox in model-only mode, the
forwarder inside it, a stand-in gateway on a Unix socket outside, and a second server on the
host's loopback standing for "anywhere"."""

from __future__ import annotations

import contextlib
import http.server
import itertools
import json
import os
import shutil
import signal
import socket
import socketserver
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kernel.config import GuardConfig
from kernel.isolation import jails, procs
from kernel.isolation.paths import Paths

FORWARDER = Path(jails.__file__).with_name("forwarder.py")

_PROBE = r"""
import json, os, socket, sys, urllib.request
checks, other, marker, addresses = sys.argv[1].split(","), int(sys.argv[2]), sys.argv[3], sys.argv[4]
base = os.environ.get("SEED_MODEL_BASE_URL", "")
out = {}
def attempt(name, fn):
    try:
        out[name] = ["ok", fn()]
    except Exception as exc:
        out[name] = ["failed", type(exc).__name__ + ": " + str(exc)]
def stream():
    with urllib.request.urlopen(base + "/stream", timeout=10) as answer:
        first = answer.readline().decode()
        answer.readline()
        open(marker, "w").write("seen")  # the gateway sends the rest only once this is here
        return [first, answer.read().decode()]
def raw(host, port):
    with socket.create_connection((host, port), timeout=3) as s:
        s.sendall(b"GET / HTTP/1.0\r\n\r\n")
        return s.recv(200).decode()
def nameservers():
    found = []
    for line in open("/etc/resolv.conf"):
        words = line.split()
        if len(words) > 1 and words[0] == "nameserver":
            found.append(words[1])
    return found
def resolver():
    said = []
    for server in nameservers():
        with socket.socket(socket.AF_INET6 if ":" in server else socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.settimeout(3)
            try:
                s.sendto(b"\0" * 12, (server, 53))
                said.append(server + " reached")
            except OSError as exc:
                said.append("%s errno %s" % (server, exc.errno))
    if any(s.endswith(" reached") for s in said):
        return said
    raise OSError(said)
if "model" in checks:
    attempt("plain", lambda: urllib.request.urlopen(base + "/plain", timeout=10).read().decode())
    attempt("stream", stream)
if "other" in checks:
    url = "http://127.0.0.1:%d/" % other
    attempt("other_http", lambda: urllib.request.urlopen(url, timeout=3).read().decode())
    attempt("other_tcp", lambda: raw("127.0.0.1", other))
    attempt("abstract", lambda: socket.socket(socket.AF_UNIX).connect("\0seed-net-%d" % other))
if "outside" in checks:
    attempt("dns", lambda: socket.getaddrinfo("pypi.org", 443))
    attempt("resolver", resolver)
    for address in filter(None, addresses.split(",")):
        attempt("interface " + address, lambda: raw(address, other))
    out["links"] = sorted(l.split(":")[0].strip() for l in open("/proc/net/dev").readlines()[2:])
    out["routes"] = open("/proc/net/route").read().splitlines()[1:]
print(json.dumps(out))
"""


class _Gateway(http.server.BaseHTTPRequestHandler):
    """The stand-in model gateway: a plain answer, and a stream whose second event waits
    until the client has seen the first."""

    marker: Path

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet (a Unix socket's client has no address to log)."""

    def do_GET(self) -> None:
        if self.path == "/plain":
            body = b"from the gateway"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        self.wfile.write(b"data: one\n\n")
        self.wfile.flush()
        deadline = time.monotonic() + 10
        while not self.marker.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        self.wfile.write(b"data: two\n\n" if self.marker.exists() else b"data: held back\n\n")
        self.close_connection = True


class _UnixHTTP(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


class _Anywhere(http.server.BaseHTTPRequestHandler):
    """The second server: what "anywhere" would answer."""

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""

    def do_GET(self) -> None:
        body = b"anywhere"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A folder with a short path (a Unix socket's path is at most 107 bytes)."""
    folder = Path(tempfile.mkdtemp(prefix="seed-net-", dir="/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def gateway(short_dir: Path, tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """(socket, marker): the stand-in gateway serving on a Unix socket of the host."""
    work = tmp_path / "work"
    work.mkdir()
    handler = type("Handler", (_Gateway,), {"marker": work / "seen"})
    server = _UnixHTTP(str(short_dir / "gw.sock"), handler)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    yield short_dir / "gw.sock", work / "seen"
    server.shutdown()
    server.server_close()


@pytest.fixture
def anywhere() -> Iterator[int]:
    """The port of the second server, on the host's 127.0.0.1."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Anywhere)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    port = server.server_address[1]
    # and an abstract Unix socket named after it (those belong to the network namespace)
    abstract = socket.socket(socket.AF_UNIX)
    abstract.bind(f"\0seed-net-{port}")
    abstract.listen()
    yield port
    abstract.close()
    server.shutdown()
    server.server_close()


def _host_addresses() -> list[str]:
    """This machine's own IPv4 addresses other than the loopback's (read, never contacted)."""
    found: list[str] = []
    with contextlib.suppress(OSError):
        lines = Path("/proc/net/fib_trie").read_text().splitlines()
        for before, line in itertools.pairwise(lines):
            if "/32 host LOCAL" in line:
                address = before.split()[-1]
                if not address.startswith("127."):
                    found.append(address)
    return sorted(set(found))


def _agent(
    tmp_path: Path, network: jails.Network, gateway: Path | None, argv: list[str]
) -> jails.AgentSandbox:
    root, home, work = tmp_path / "repo", tmp_path / "home", tmp_path / "work"
    for folder in (root, home, work):
        folder.mkdir(exist_ok=True)
    return jails.agent_sandbox(
        argv,
        paths=Paths(root=root, common=root / ".git"),
        guard=GuardConfig(),
        writable=(work,),
        readonly=(),
        home=home,
        home_binds=(),
        cwd=work,
        network=network,
        gateway=gateway,
    )


def _probe(
    tmp_path: Path, network: jails.Network, gateway: Path | None, checks: str, other: int
) -> dict[str, Any]:
    marker = tmp_path / "work" / "seen"
    argv = [sys.executable, "-c", _PROBE, checks, str(other), str(marker)]
    argv.append(",".join(_host_addresses()))
    run = _agent(tmp_path, network, gateway, argv)
    done = procs.run(run.argv, cwd="/", timeout_s=60, env={**os.environ, **run.env})
    assert done.ok, done.text()
    return json.loads(done.text().strip().splitlines()[-1])


@pytest.mark.usefixtures("bwrap")
def test_model_only_reaches_the_gateway_and_nothing_else(
    tmp_path: Path, gateway: tuple[Path, Path], anywhere: int
) -> None:
    socket_path, _ = gateway
    seen = _probe(tmp_path, "model-only", socket_path, "model,other,outside", anywhere)
    assert seen["plain"] == ["ok", "from the gateway"]
    # the first event arrived while the gateway still held the second back
    assert seen["stream"] == ["ok", ["data: one\n", "data: two\n\n"]]
    for name in ("other_http", "other_tcp", "abstract", "dns", "resolver"):
        assert seen[name][0] == "failed", (name, seen[name])
    assert "Connection refused" in seen["other_tcp"][1]
    assert "errno 101" in seen["resolver"][1]  # ENETUNREACH: no route, nothing sent
    interfaces = [k for k in seen if k.startswith("interface ")]
    assert all(seen[k][0] == "failed" for k in interfaces), seen
    assert seen["links"] == ["lo"] and seen["routes"] == []


@pytest.mark.usefixtures("bwrap")
def test_the_same_agent_with_the_full_network_reaches_the_second_server(
    tmp_path: Path, anywhere: int
) -> None:
    seen = _probe(tmp_path, "full", None, "other", anywhere)
    assert seen["other_http"] == ["ok", "anywhere"]
    assert seen["other_tcp"][0] == "ok" and "200 OK" in seen["other_tcp"][1]
    assert seen["abstract"][0] == "ok"


def test_full_is_todays_agent_profile_and_model_only_changes_only_the_network(
    tmp_path: Path, short_dir: Path
) -> None:
    listening = socket.socket(socket.AF_UNIX)
    listening.bind(str(short_dir / "gw.sock"))
    argv = [sys.executable, "-c", "pass"]
    full = _agent(tmp_path, "full", None, argv)
    today = jails.agent_argv(
        argv,
        paths=Paths(root=tmp_path / "repo", common=tmp_path / "repo" / ".git"),
        guard=GuardConfig(),
        writable=(tmp_path / "work",),
        readonly=(),
        home=tmp_path / "home",
        home_binds=(),
        cwd=tmp_path / "work",
    )
    # the run's pids cgroup is numbered per call: the rest is the same, word for word
    assert [_uncounted(a) for a in full.argv] == [_uncounted(a) for a in today]
    assert full.base_url == "" and full.env == {}
    assert "--unshare-net" not in full.argv
    model = _agent(tmp_path, "model-only", short_dir / "gw.sock", argv)
    assert model.base_url == "http://127.0.0.1:8700"
    assert model.env["SEED_MODEL_BASE_URL"] == model.base_url
    assert "--unshare-net" in model.argv
    bind = model.argv.index(str(short_dir / "gw.sock"))
    assert model.argv[bind - 1 : bind + 2] == [
        "--bind",
        str(short_dir / "gw.sock"),
        "/run/seed/model.sock",
    ]
    assert model.argv[-3:] == argv
    with pytest.raises(ValueError, match="Unix socket"):
        _agent(tmp_path, "model-only", tmp_path / "work", argv)
    with pytest.raises(ValueError, match="Unix socket"):
        _agent(tmp_path, "model-only", short_dir / "gone.sock", argv)
    listening.close()


def _uncounted(word: str) -> str:
    return word.rsplit("-", 1)[0] if "seed-sandbox-" in word else word


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _forwarder(port: int, target: Path, agent: str, *args: str) -> subprocess.Popen[str]:
    argv = [sys.executable, str(FORWARDER), "--listen", f"127.0.0.1:{port}"]
    argv += ["--to", str(target), "--", sys.executable, "-c", agent, *args]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)


def _raw_gateway(path: Path, hold: threading.Event) -> socket.socket:
    """A raw Unix server: reads a request to its end (the client's half-close), answers it
    reversed, then sends one more chunk and holds the connection open until `hold` is set."""
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen()

    def serve() -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = server.accept()
                with conn:
                    data = b""
                    while chunk := conn.recv(1024):
                        data += chunk
                    conn.sendall(data[::-1])
                    if data == b"hold":
                        conn.sendall(b"|more")
                        hold.wait(10)

    threading.Thread(target=serve, daemon=True).start()
    return server


_CLIENT = r"""
import socket, sys
port, send, end = int(sys.argv[1]), sys.argv[2].encode(), int(sys.argv[3])
s = socket.create_connection(("127.0.0.1", port), timeout=10)  # no retry: bound before start
s.sendall(send)
s.shutdown(socket.SHUT_WR)
got = s.recv(1024) if send == b"hold" else b"".join(iter(lambda: s.recv(1024), b""))
print(got.decode(), flush=True)
sys.exit(end)
"""


def test_the_forwarder_relays_a_half_close_and_passes_the_exit_code(short_dir: Path) -> None:
    hold = threading.Event()
    server = _raw_gateway(short_dir / "raw.sock", hold)
    port = _free_port()
    run = _forwarder(port, short_dir / "raw.sock", _CLIENT, str(port), "ping", "7")
    out, _ = run.communicate(timeout=30)
    assert (run.returncode, out.strip()) == (7, "gnip")
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=3).close()  # stopped listening
    server.close()


def test_a_forwarder_never_outlives_its_agent(short_dir: Path) -> None:
    hold = threading.Event()
    server = _raw_gateway(short_dir / "raw.sock", hold)
    port = _free_port()
    # the agent ends while its stream is still open: the forwarder ends with it
    run = _forwarder(port, short_dir / "raw.sock", _CLIENT, str(port), "hold", "0")
    started = time.monotonic()
    out, _ = run.communicate(timeout=30)
    assert run.returncode == 0 and out.startswith("dloh")
    assert time.monotonic() - started < 5 and not hold.is_set()
    hold.set()
    server.close()


_SIGNALLED = r"""
import signal, sys, time
if sys.argv[1] == "handle":
    signal.signal(signal.SIGTERM, lambda n, f: (print("got", n, flush=True), sys.exit(3)))
print("ready", flush=True)
time.sleep(30)
"""


@pytest.mark.parametrize(("mode", "expected"), [("handle", 3), ("die", -signal.SIGTERM)])
def test_the_forwarder_hands_sigterm_to_the_agent_and_ends_as_it_did(
    short_dir: Path, mode: str, expected: int
) -> None:
    run = _forwarder(_free_port(), short_dir / "none.sock", _SIGNALLED, mode)
    assert run.stdout is not None and run.stdout.readline() == "ready\n"
    run.send_signal(signal.SIGTERM)
    out, _ = run.communicate(timeout=10)
    assert run.returncode == expected
    assert ("got 15" in out) == (mode == "handle")
