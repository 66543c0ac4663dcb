"""`python -m modules`: the module host's entry point (JSON lines on stdin and stdout)."""

from __future__ import annotations

from modules.host import serve

if __name__ == "__main__":
    raise SystemExit(serve())
