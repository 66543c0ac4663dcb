"""The two ends notifications reach in tests: a command that writes down how it was run, and a
webhook receiver on 127.0.0.1.

As a script (`python notify_fakes.py OUT ARGS...`): append one JSON line to OUT with the
argv after OUT, the SEED_ variables, the names of every variable it was given and its cwd;
then exit 1 if a file OUT.fail exists (a failed send), else 0.
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
    """A webhook receiver on 127.0.0.1: answers each POST with `status` (and `location`)."""

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


def _main() -> int:
    out = Path(sys.argv[1])
    seen = {k: v for k, v in os.environ.items() if k.startswith("SEED_")}
    line = {"argv": sys.argv[2:], "seed": seen, "names": sorted(os.environ), "cwd": os.getcwd()}
    with out.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(line) + "\n")
    return 1 if Path(f"{out}.fail").exists() else 0


if __name__ == "__main__":
    sys.exit(_main())
