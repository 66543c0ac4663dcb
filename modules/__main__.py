"""`python -m modules`: the module server's entry point (JSON lines on stdin and stdout)."""

from __future__ import annotations

from modules.server import serve

if __name__ == "__main__":
    raise SystemExit(serve())
