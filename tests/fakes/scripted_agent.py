"""A scripted coding agent that follows seed's command contract (stdlib only).

Usage: scripted_agent.py SCRIPT.json
It runs in the worktree (cwd) and performs the script's steps in order:
  {"write": "path", "text": "..."}        write a file (relative to the worktree, or absolute)
  {"append": "path", "text": "..."}       append to a file
  {"replace": "path", "old": "..", "new": ".."}
  {"delete": "path"}
  {"chmod": "path", "mode": "755"}
  {"symlink": "path", "target": "..."}
  {"touch": "/abs/barrier"}               create a barrier file (tests wait on it)
  {"wait_for": "/abs/barrier"}            wait until a barrier file exists
  {"spawn": ["argv", ...], "pidfile": "/abs/file", "new_session": false}
  {"hang": true}                          sleep forever
  {"print": "text", "times": 1}           write to stdout
  {"result": {...}}                       write JSON to SEED_RESULT_FILE
  {"exit": 0}                             exit with this code
  {"run": ["argv", ...], "cwd": "/abs"}   run a command to completion (e.g. git in the user's checkout)
  {"mkfiles": "dir", "count": 500}        create COUNT small files in dir
  {"flood": 104857600}                    write this many bytes to stdout, in 1 MiB chunks
  {"sparse": "path", "size": N}           a sparse file of apparent size N (truncate)
A script may hold "candidates": {"1": {...}, "2": {...}}: the candidate number at the end of
SEED_ITERATION_ID (ID-cK; "1" for a single run) picks the script the run follows.
A script may hold "rounds": [[steps of round 1], [steps of round 2], ...] instead of "steps":
the kernel's SEED_ROUND picks the list (a repair round after the kernel refused the change).
Any step with "may_fail": true goes on when it fails (an adversary trying what the sandbox
forbids); the failure is appended to SEED_AGENT_TRACE's folder as failures.txt if set.
Each run appends its argv and SEED_* environment to SEED_AGENT_TRACE if that is set.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def _path(raw: str) -> Path:
    path = Path(raw)
    return path if path.is_absolute() else Path.cwd() / path


def main(argv: list[str]) -> int:
    script = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
    trace = os.environ.get("SEED_AGENT_TRACE")
    if trace:
        with open(trace, "a", encoding="utf-8") as handle:
            seen = {k: v for k, v in os.environ.items() if k.startswith("SEED_")}
            handle.write(
                json.dumps(
                    {"argv": argv, "env": seen, "cwd": os.getcwd(), "stdin_closed": _stdin_closed()}
                )
                + "\n"
            )
    if "candidates" in script:
        number = os.environ.get("SEED_ITERATION_ID", "").rpartition("-c")[2]
        script = script["candidates"][number if number.isdigit() else "1"]
    if "rounds" in script:
        turn = int(os.environ.get("SEED_ROUND", "1"))
        rounds: list[list[dict[str, Any]]] = script["rounds"]
        steps: list[dict[str, Any]] = rounds[min(turn, len(rounds)) - 1]
    else:
        steps = script["steps"]
    for step in steps:
        try:
            code = _step(step)
        except (OSError, subprocess.CalledProcessError) as exc:
            if not step.get("may_fail"):
                raise
            print(f"step failed as it may: {step}: {exc}", file=sys.stderr)
            continue
        if code is not None:
            return code
    return 0


def _step(step: dict[str, Any]) -> int | None:
    if "write" in step:
        target = _path(step["write"])
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(step["text"], encoding="utf-8")
    elif "append" in step:
        with _path(step["append"]).open("a", encoding="utf-8") as handle:
            handle.write(step["text"])
    elif "replace" in step:
        target = _path(step["replace"])
        target.write_text(
            target.read_text(encoding="utf-8").replace(step["old"], step["new"]),
            encoding="utf-8",
        )
    elif "delete" in step:
        _path(step["delete"]).unlink()
    elif "chmod" in step:
        _path(step["chmod"]).chmod(int(step["mode"], 8))
    elif "symlink" in step:
        _path(step["symlink"]).symlink_to(step["target"])
    elif "touch" in step:
        Path(step["touch"]).write_text(str(os.getpid()), encoding="utf-8")
    elif "wait_for" in step:
        while not Path(step["wait_for"]).exists():
            time.sleep(0.05)
    elif "spawn" in step:
        child = subprocess.Popen(
            step["spawn"],
            start_new_session=bool(step.get("new_session")),
            stdin=subprocess.DEVNULL,
        )
        if step.get("pidfile"):
            with open(step["pidfile"], "a", encoding="utf-8") as handle:
                handle.write(f"{child.pid}\n")
    elif "hang" in step:
        while True:
            time.sleep(1)
    elif "print" in step:
        for _ in range(int(step.get("times", 1))):
            sys.stdout.write(step["print"])
        sys.stdout.flush()
    elif "result" in step:
        Path(os.environ["SEED_RESULT_FILE"]).write_text(
            json.dumps(step["result"]), encoding="utf-8"
        )
    elif "exit" in step:
        return int(step["exit"])
    elif "sparse" in step:
        target = _path(step["sparse"])
        with target.open("wb") as handle:
            handle.truncate(int(step["size"]))
    elif "run" in step:
        subprocess.run(
            step["run"], cwd=step.get("cwd") or None, stdin=subprocess.DEVNULL, check=True
        )
    elif "mkfiles" in step:
        folder = _path(step["mkfiles"])
        folder.mkdir(parents=True, exist_ok=True)
        for n in range(int(step["count"])):
            (folder / f"f{n:04d}.txt").write_text(f"{n}\n", encoding="utf-8")
    elif "flood" in step:
        chunk = b"x" * 1023 + b"\n"
        block = chunk * 1024
        left = int(step["flood"])
        out = sys.stdout.buffer
        while left > 0:
            piece = block[: min(left, len(block))]
            out.write(piece)
            left -= len(piece)
        out.flush()
    return None


def _stdin_closed() -> bool:
    try:
        return sys.stdin is None or sys.stdin.read(1) == ""
    except (OSError, ValueError):
        return True


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
