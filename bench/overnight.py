"""A daemon left running overnight, in minutes: agent runs per blocker, idle CPU, nothing lost.

    .venv/bin/python bench/overnight.py [--minutes 10] [--lines 1200] [--sandbox on|off] [--seed PATH]

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
6. after resume: CPU over the rest of the run, at least a window.

Prints JSON: agent runs per blocker (runs for the blocked task while the edit stood, and in
all; aim 1), idle CPU per state as % of one core (psutil cpu_times of the daemon and its live
descendants, with the 1-minute load average at the window's end; aim under 1%), records per
outcome, and what was lost (agent runs without a record, from the agent's own trace).
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
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.generate import env_git, generate

SEED = Path(__file__).resolve().parent.parent / "seed.py"
AGENT = Path(__file__).resolve().parent / "fake_agent.py"
SHARED = "tests/test_shared.py"


class Night:
    """The daemon under watch: its repository, process and the agent's trace."""

    def __init__(self, root: Path, io: Path, sandbox: str, seed: Path) -> None:
        self.root, self.io, self.trace, self.seed = root, io, io / "trace.jsonl", seed
        argv = json.dumps([sys.executable, str(AGENT), str(self.trace)])
        (root / "seed.toml").write_text(
            f'[agent]\nbackend = "command"\ncommand = {argv}\nrepair_rounds = 0\n'
            f'[guard]\nsandbox = "{sandbox}"\n'
            "[budget]\nmax_iterations_per_day = 0\nmax_cost_usd_per_day = 0\n"
            "max_cost_usd_per_iteration = 0\n",
            encoding="utf-8",
        )
        env_git(root, "add", "seed.toml")
        env_git(root, "commit", "-q", "-m", "seed.toml")
        env = {k: v for k, v in os.environ.items() if k != "SEED_DEPTH"}
        env["SEED_SANDBOX_WRITABLE"] = str(io)  # the agent's trace, outside its checkout
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


def play(night: Night, minutes: float) -> dict[str, Any]:
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
        night = Night(root, io, args.sandbox, args.seed.resolve())
        try:
            figures = play(night, args.minutes)
        finally:
            night.stop()
        print(json.dumps(figures, indent=2))
        lost = figures["lost (agent runs without a record)"]
        return 0 if not lost and figures["daemon exit"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
