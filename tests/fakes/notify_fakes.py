"""The two ends notifications reach in tests: a command that writes down how it was run, and a
webhook receiver on 127.0.0.1; and an agent's search for a secret.

As a script (`python notify_fakes.py OUT ARGS...`): append one JSON line to OUT with the
argv after OUT, the SEED_ variables, the names of every variable it was given and its cwd;
then exit 1 if a file OUT.fail exists (a failed send), else 0.
`python notify_fakes.py search OUT PLACE... -- DROW...`: look for each word (given reversed,
so that its own argv and script never hold it) everywhere a process can read (its
environment, every /proc/*/environ and cmdline, the files under each place) and write to
OUT where each was found and how much was searched.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


@dataclass
class Received:
    """One request the receiver answered."""

    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> dict[str, Any]:
        """The body as JSON."""
        return json.loads(self.body)


@dataclass
class Receiver:
    """A webhook receiver on 127.0.0.1: answers each request (a POST; a GET is what a
    followed redirect sends) with `status` (and `location`)."""

    status: int = 200
    location: str = ""
    got: list[Received] = field(default_factory=list[Received])
    server: ThreadingHTTPServer | None = None

    def start(self) -> Receiver:
        """Serve on a free port, in a thread."""
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                size = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(size)
                receiver.got.append(Received(self.path, dict(self.headers.items()), body))
                self.send_response(receiver.status)
                if receiver.location:
                    self.send_header("Location", receiver.location)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def do_GET(self) -> None:  # what a followed redirect would send
                self.do_POST()

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    @property
    def url(self) -> str:
        """The receiver's base URL."""
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        """Stop serving."""
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


def calls(out: Path) -> list[dict[str, Any]]:
    """Every run of the command script written to `out`."""
    if not out.exists():
        return []
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines() if line]


def _read(path: Path, limit: int = 1 << 20) -> bytes:
    try:
        with path.open("rb") as handle:
            return handle.read(limit)
    except OSError:
        return b""


def _files(places: list[str], limit: int = 20_000) -> list[Path]:
    found: list[Path] = []
    for place in places:
        for folder, _, names in os.walk(place):
            found += [Path(folder) / name for name in names]
            if len(found) > limit:
                return found
    return found


def search(out: Path, places: list[str], words: list[str]) -> None:
    """Where each word is, for an agent that wants it."""
    hits: dict[str, list[str]] = {word: [] for word in words}
    sources: list[tuple[str, bytes]] = [("environ", repr(dict(os.environ)).encode())]
    for proc in Path("/proc").glob("[0-9]*"):
        sources += [(f"{proc}/{name}", _read(proc / name)) for name in ("environ", "cmdline")]
    files = _files(places)
    sources += [(str(path), _read(path)) for path in files if path.is_file()]
    for where, data in sources:
        for word in words:
            if word.encode() in data:
                hits[word].append(where)
    summary = {
        "hits": {word[::-1]: where for word, where in hits.items()},
        "files": len(files),
        "procs": len(sources) - len(files) - 1,
    }
    out.write_text(json.dumps(summary), encoding="utf-8")


def _main() -> int:
    if sys.argv[1] == "search":
        split = sys.argv.index("--")
        search(Path(sys.argv[2]), sys.argv[3:split], [w[::-1] for w in sys.argv[split + 1 :]])
        return 0
    out = Path(sys.argv[1])
    seen = {k: v for k, v in os.environ.items() if k.startswith("SEED_")}
    line = {"argv": sys.argv[2:], "seed": seen, "names": sorted(os.environ), "cwd": os.getcwd()}
    with out.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(line) + "\n")
    return 1 if Path(f"{out}.fail").exists() else 0


if __name__ == "__main__":
    sys.exit(_main())
