"""The ruff-fix program (stdlib only): safe fixes, then formatting where the project adopted
it, on the given files; it prints what it changed, one line each, never ruff's own output."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any, cast

PYTHON_SUFFIXES = (".py", ".pyi", ".pyw", ".ipynb")
"""The files ruff format may touch (newer ruff formats Markdown code blocks too)."""
MAX_LINES = 30
_IRREGULAR = {"rewrite": "rewrote", "split": "split", "set": "set", "put": "put"}


def _past(text: str) -> str:
    """ruff's imperative fix title as what was done: "Remove unused import: `os`" is
    "removed unused import `os`"."""
    verb, _, rest = text.strip().partition(" ")
    word = verb.lower()
    if word in _IRREGULAR:
        done = _IRREGULAR[word]
    elif word.endswith("e"):
        done = word + "d"
    elif word.endswith("y") and word[-2:-1] not in ("a", "e", "i", "o", "u"):
        done = word[:-1] + "ied"
    else:
        done = word + "ed"
    return f"{done} {rest.replace(': ', ' ', 1)}".strip()


def _findings(ruff: str, files: list[str]) -> list[dict[str, Any]] | None:
    """ruff's findings on the files as JSON (None when it cannot say); an old ruff spells the
    flag `--format`."""
    for flag in ("--output-format", "--format"):
        argv = [ruff, "check", "--no-cache", "--exit-zero", flag, "json", *files]
        done = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if done.returncode == 0:
            try:
                found = json.loads(done.stdout or "[]")
            except json.JSONDecodeError:
                return None
            return cast(list[dict[str, Any]], found) if isinstance(found, list) else None
    return None


def _key(item: dict[str, Any]) -> tuple[str, str, str]:
    return (str(item.get("code")), str(item.get("filename")), str(item.get("message")))


def _fixed(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[str]:
    """One line per finding the fix took away, said as what was changed."""
    left = Counter(_key(item) for item in after)
    lines: list[str] = []
    for item in before:
        key = _key(item)
        if left[key]:
            left[key] -= 1
            continue
        fix = cast(dict[str, Any], item.get("fix") or {})
        where = os.path.relpath(key[1]) if os.path.isabs(key[1]) else key[1]
        title = str(fix.get("message") or "")
        said = _past(title) if title else f"fixed: {key[2]}"
        lines.append(f"{said} ({key[0]}) in {where}")
    return lines


def _digest(path: str) -> str:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return ""


def _run(step: list[str]) -> int:
    """A ruff step, its output kept back (shown only when ruff itself failed)."""
    done = subprocess.run(step, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if done.returncode not in (0, 1):
        tail = (done.stderr or done.stdout).strip().splitlines()[-10:]
        print(f"ruff failed (exit {done.returncode}): {' '.join(step[:2])}", file=sys.stderr)
        print("\n".join(tail), file=sys.stderr)
    return done.returncode


def main(argv: list[str] | None = None) -> int:
    """Run ruff on the files; exit 0 when ruff itself worked."""
    parser = argparse.ArgumentParser(description="ruff check --fix and ruff format on files")
    parser.add_argument("--ruff", required=True, help="the ruff executable")
    parser.add_argument("--mode", choices=("check", "format"), default="check")
    parser.add_argument("--format", action="store_true", help="format after fixing (adopted)")
    parser.add_argument("files", nargs="+")
    args = parser.parse_args(argv)
    files = cast(list[str], args.files)
    changed: list[str] = []
    if args.mode == "check":
        before = _findings(args.ruff, files)
        code = _run([args.ruff, "check", "--fix", "--no-cache", "--exit-zero", *files])
        if code not in (0, 1):
            return code
        after = _findings(args.ruff, files) if before is not None else None
        if before is not None and after is not None:
            changed += _fixed(before, after)
    if args.mode == "format" or args.format:
        # fixing can leave a file unformatted (a removed import leaves blank lines)
        python = [f for f in files if f.endswith(PYTHON_SUFFIXES)]
        digests = {f: _digest(f) for f in python}
        code = _run([args.ruff, "format", "--no-cache", *python]) if python else 0
        if code not in (0, 1):
            return code
        changed += [f"formatted {f}" for f in python if _digest(f) != digests[f]]
    shown = changed[:MAX_LINES]
    if len(changed) > MAX_LINES:
        shown.append(f"and {len(changed) - MAX_LINES} more")
    print("\n".join(shown) or "ruff changed nothing", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
