"""A daemon left running overnight, in minutes: agent runs per blocker, idle CPU, nothing lost.

    .venv/bin/python bench/overnight.py [--minutes 10] [--lines 1200] [--sandbox on|off] [--seed PATH]
                                        [--hour-s 45]

Needs psutil (`pip install psutil`). Generates a clean repository (bench/generate.py, no
planted gaps) with a tests/test_shared.py, starts `seed.py run` on it with bench/fake_agent.py
as a command agent, and plays a night at set moments, each step waiting for the daemon:

1. idle: the first analysis is over; the daemon's CPU is measured over a window;
2. success: a task the agent does lands;
3. blocker: the person edits tests/test_shared.py (uncommitted), then drops a task whose fix
   appends to that file; a fifth of the run later the edit is reverted, and the task lands;
4. failures: three tasks the agent fails, until the daemon halts (if it does not, the bench
   halts it, and says so); the person then withdraws the failing tasks;
5. halted: CPU over a window; then `seed.py resume`;
6. a usage limit at 02:00 of the simulated night (one hour is `--hour-s` real seconds): the
   model's upstream (a loopback server here) answers 429 with a retry-after to 04:00 when a
   task asks it; the run ends LIMITED, the daemon asks nothing until 04:00, then lands the task;
7. after resume: CPU over the rest of the run, at least a window.

Prints JSON: agent runs per blocker (runs for the blocked task while the edit stood, and in
all; aim 1), idle CPU per state as % of one core (psutil cpu_times of the daemon and its live
descendants, with the 1-minute load average at the window's end; aim under 1%), records per
outcome, what was lost (agent runs without a record, from the agent's own trace), and the
limit: requests and spend between 02:00 and 04:00 (aim 0), how long after 04:00 the task
landed, and the notifications sent (from the [notify] command's own log).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.generate import env_git, generate

SEED = Path(__file__).resolve().parent.parent / "seed.py"
AGENT = Path(__file__).resolve().parent / "fake_agent.py"
SHARED = "tests/test_shared.py"


class Upstream:
    """The model's upstream on 127.0.0.1: a chat completion with its usage, or, until
    `limited_until` (epoch seconds), a 429 whose retry-after names that moment."""

    def __init__(self) -> None:
        self.asked: list[tuple[float, int]] = []
        """Each request: when, and the status answered."""
        self.limited_until = 0.0
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                left = upstream.limited_until - time.time()
                status = 429 if left > 0 else 200
                upstream.asked.append((time.time(), status))
                doc: dict[str, Any] = (
                    {"error": {"type": "rate_limit_exceeded", "code": "rate_limit_exceeded"}}
                    if status == 429
                    else {
                        "id": "c",
                        "object": "chat.completion",
                        "choices": [
                            {"index": 0, "message": {"role": "assistant", "content": "ok"}}
                        ],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
                    }
                )
                data = json.dumps(doc).encode()
                self.send_response(status)
                if status == 429:
                    self.send_header("retry-after", str(int(left) + 1))
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.origin = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


_TOLD = "import json, sys; open(sys.argv[1], 'a').write(json.dumps(sys.argv[2:]) + '\\n')"
"""The [notify] command: one line per notification, its event and message."""


class Night:
    """The daemon under watch: its repository, process and the agent's trace."""

    def __init__(self, root: Path, io: Path, sandbox: str, seed: Path, model: Upstream) -> None:
        self.root, self.io, self.trace, self.seed = root, io, io / "trace.jsonl", seed
        self.model, self.told = model, io / "told.jsonl"
        argv = json.dumps([sys.executable, str(AGENT), str(self.trace)])
        notify = json.dumps([sys.executable, "-c", _TOLD, str(self.told), "{event}", "{message}"])
        (root / "seed.toml").write_text(
            f'[agent]\nbackend = "command"\ncommand = {argv}\nrepair_rounds = 0\n'
            f'api_base = "{model.origin}"\nkeys = ["SEED_BENCH_KEY"]\n'
            f'[guard]\nsandbox = "{sandbox}"\n'
            "[budget]\nmax_iterations_per_day = 0\nmax_cost_usd_per_day = 0\n"
            f"max_cost_usd_per_iteration = 0\n[notify]\ncommand = {notify}\n",
            encoding="utf-8",
        )
        env_git(root, "add", "seed.toml")
        env_git(root, "commit", "-q", "-m", "seed.toml")
        env = {k: v for k, v in os.environ.items() if k != "SEED_DEPTH"}
        env["SEED_SANDBOX_WRITABLE"] = str(io)  # the agent's trace, outside its checkout
        env["SEED_BENCH_KEY"] = "sk-bench-not-a-real-key"  # the gateway holds it
        self.err = (io / "daemon.err").open("w", encoding="utf-8")
        self.proc = subprocess.Popen(
            [sys.executable, str(seed), "--no-bootstrap", "--root", str(root), "run"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self.err,
            env=env,
        )

    def status(self) -> dict[str, Any]:
        with contextlib.suppress(OSError, ValueError):
            return json.loads((self.root / "history" / "status.json").read_text())
        return {}

    def halted(self) -> bool:
        with contextlib.suppress(OSError, ValueError):
            return bool(json.loads((self.root / "history" / "halt.json").read_text())["halted"])
        return False

    def records(self) -> list[dict[str, Any]]:
        path = self.root / "history" / "records.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def runs(self) -> list[dict[str, Any]]:
        """Every agent run, from the agent's own trace."""
        if not self.trace.exists():
            return []
        return [json.loads(line) for line in self.trace.read_text().splitlines() if line.strip()]

    def task(self, name: str, text: str) -> None:
        """Drop a task into inbox/ as a person would (written beside it, then moved in)."""
        inbox = self.root / "inbox"
        inbox.mkdir(exist_ok=True)
        draft = self.io / name
        draft.write_text(text, encoding="utf-8")
        shutil.move(draft, inbox / name)

    def wait(self, condition: Callable[[], bool], limit_s: float) -> bool:
        """Wait until condition() or limit_s; False on the limit (or the daemon gone)."""
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline and self.proc.poll() is None:
            if condition():
                return True
            time.sleep(0.5)
        return condition()

    def idle(self) -> bool:
        return self.status().get("phase") in ("idle", "halted")

    def cpu_s(self) -> float:
        """CPU seconds of the daemon, its live descendants and the children it reaped."""
        import psutil

        total = 0.0
        with contextlib.suppress(psutil.Error):
            daemon = psutil.Process(self.proc.pid)
            for proc in (daemon, *daemon.children(recursive=True)):
                with contextlib.suppress(psutil.Error):
                    t = proc.cpu_times()
                    total += t.user + t.system + t.children_user + t.children_system
        return total

    def window(self, seconds: float) -> dict[str, float]:
        """The daemon's CPU over `seconds` of quiet, as % of one core, and the load then."""
        cpu, wall = self.cpu_s(), time.monotonic()
        time.sleep(max(seconds, 1.0))
        used, wall = self.cpu_s() - cpu, time.monotonic() - wall
        return {
            "seconds": round(wall, 1),
            "cpu_s": round(used, 2),
            "percent_of_a_core": round(100 * used / wall, 2),
            "load_1m": round(os.getloadavg()[0], 2),
        }

    def stop(self) -> tuple[int, str]:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.err.close()
        return self.proc.returncode, (self.io / "daemon.err").read_text(errors="replace")


def _done(night: Night, name: str) -> Callable[[], bool]:
    return lambda: (night.root / "inbox" / "done" / name).exists()


def limit(night: Night, hour_s: float) -> dict[str, Any]:
    """02:00: the upstream limits until 04:00 (two simulated hours) and a task asks it."""
    hit = time.time()
    night.model.limited_until = hit + 2 * hour_s
    night.task("limit-1.md", "LIMIT: a task that asks the model first.\n")
    limited = night.wait(lambda: any(r["outcome"] == "LIMITED" for r in night.records()), 600)
    landed = night.wait(_done(night, "limit-1.md"), 2 * hour_s + 600)
    reset = night.model.limited_until
    ends = [
        datetime.fromisoformat(r["ended_at"]).timestamp()
        for r in night.records()
        if r["gap"]["key"] == "inbox:limit-1.md" and r["outcome"] == "SUCCESS"
    ]
    first = next((t for t, status in night.model.asked if status == 429), hit)
    between = [t for t, _ in night.model.asked if first < t < reset]
    ledger = night.root / "history" / "ledger.jsonl"
    written = ledger.read_text().splitlines() if ledger.exists() else []
    spent = [
        line
        for line in map(json.loads, written)
        if line.get("tokens_used")
        and first < datetime.fromisoformat(line["at"]).timestamp() < reset
    ]
    told = (
        [json.loads(line)[0] for line in night.told.read_text().splitlines()]
        if night.told.exists()
        else []
    )
    return {
        "hit at": "02:00",
        "reset at": "04:00",
        "simulated hour (s)": hour_s,
        "run ended LIMITED": limited,
        "requests to the model between the limit and the reset": len(between),
        "ledger lines with tokens between the limit and the reset": len(spent),
        "task landed after the reset": landed,
        "landed, seconds after the reset": round(ends[0] - reset, 1) if ends else None,
        "notifications sent": dict(Counter(told)),
    }


def play(night: Night, minutes: float, hour_s: float = 45.0) -> dict[str, Any]:
    """The night's steps; returns the figures."""
    total = minutes * 60
    began = time.monotonic()
    window = max(20.0, total / 10)
    steps: dict[str, Any] = {}
    cpu: dict[str, Any] = {}
    steps["first analysis (s)"] = night.wait(night.idle, 600) and round(time.monotonic() - began)
    cpu["idle before a halt"] = night.window(window)

    night.task("ok-1.md", "Add a test that 1 + 1 is 2.\n")
    steps["success landed"] = night.wait(_done(night, "ok-1.md"), 600)
    night.wait(night.idle, 300)

    shared = night.root / SHARED
    shared.write_text(shared.read_text() + "# the person's edit, not committed\n")
    edited = time.monotonic()
    night.task("shared-1.md", f"SHARED: add a test to {SHARED}.\n")
    time.sleep(max(total / 5, 30.0))
    while_blocked = [r for r in night.runs() if r["gap"] == "inbox:shared-1.md"]
    env_git(night.root, "checkout", "--", SHARED)
    steps["blocker held (s)"] = round(time.monotonic() - edited)
    steps["blocked task landed after the revert"] = night.wait(_done(night, "shared-1.md"), 600)
    night.wait(night.idle, 300)

    for k in (1, 2, 3):
        night.task(f"fail-{k}.md", f"FAIL: task {k} the agent cannot do.\n")
    steps["halted by the failures"] = night.wait(night.halted, 900)
    if not steps["halted by the failures"]:
        from kernel.records import halt
        from kernel.records.store import RecordStore

        halt.halt(RecordStore(night.root / "history"), "halted by the benchmark")
    for k in (1, 2, 3):  # the person withdraws the failing tasks
        with contextlib.suppress(OSError):
            (night.root / "inbox" / f"fail-{k}.md").unlink()
    night.wait(lambda: night.status().get("phase") == "halted", 120)
    cpu["halted"] = night.window(window)

    resumed = subprocess.run(
        [sys.executable, str(night.seed), "--no-bootstrap", "--root", str(night.root), "resume"],
        capture_output=True,
        text=True,
        check=False,
    )
    steps["resume"] = resumed.stdout.strip() or resumed.stderr.strip()
    night.wait(lambda: night.status().get("phase") == "idle", 600)
    steps["usage limit"] = limit(night, hour_s)
    night.wait(night.idle, 300)
    time.sleep(2)
    cpu["after resume"] = night.window(max(window, total - (time.monotonic() - began)))

    runs = night.runs()
    shared_runs = [r for r in runs if r["gap"] == "inbox:shared-1.md"]
    records = night.records()
    recorded = {r["iteration_id"] for r in records}
    exit_code, stderr = night.stop()
    return {
        "minutes": round((time.monotonic() - began) / 60, 1),
        "agent runs": len(runs),
        "agent runs per blocker": {
            "while the edit stood": len(while_blocked),
            "in all, for the blocked task": len(shared_runs),
        },
        "idle cpu": cpu,
        "records per outcome": dict(Counter(r["outcome"] for r in records)),
        "lost (agent runs without a record)": sorted({r["iteration"] for r in runs} - recorded),
        "steps": steps,
        "daemon exit": exit_code,
        "stderr warnings": [
            line for line in stderr.splitlines() if "InotifyEmitter" in line or "Traceback" in line
        ],
        "cores": os.cpu_count(),
    }


def main() -> int:
    """Play one night and print its figures as JSON."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--lines", type=int, default=1200)
    parser.add_argument("--sandbox", choices=("on", "off"), default="on")
    parser.add_argument("--hour-s", type=float, default=45.0, help="real seconds a simulated hour")
    parser.add_argument(
        "--seed",
        type=Path,
        default=SEED,
        help="the seed.py to run (another checkout's, to compare)",
    )
    args = parser.parse_args()
    try:
        import psutil  # noqa: F401
    except ImportError:
        print("bench/overnight.py needs psutil: pip install psutil", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="seed-overnight-") as tmp:
        root, io = Path(tmp) / "repo", Path(tmp) / "io"
        io.mkdir()
        generate(root, args.lines, planted=False)
        (root / SHARED).write_text('"""Tests a person and the agent both edit."""\n')
        env_git(root, "add", SHARED)
        env_git(root, "commit", "-q", "-m", "shared tests")
        model = Upstream()
        night = Night(root, io, args.sandbox, args.seed.resolve(), model)
        try:
            figures = play(night, args.minutes, args.hour_s)
        finally:
            night.stop()
            model.stop()
        print(json.dumps(figures, indent=2))
        lost = figures["lost (agent runs without a record)"]
        return 0 if not lost and figures["daemon exit"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
