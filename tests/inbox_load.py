"""The inbox under load, shared by tests/reliability/test_inbox_load.py and bench/inbox_load.py.

Tasks of three kinds are dropped into inbox/ of a real daemon (`seed.py run`, a fast
command agent): good ones (the agent adds a test: done/), failing ones (the agent exits 1:
failed/ once quarantined) and bad files (empty, binary, a name that is not UTF-8 or too
long, bad front matter, too big, another suffix: rejected/ at intake). `account` checks
that every dropped task ended in exactly one place with its note, by name and by record.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from subprocess import Popen
from typing import Any

from kernel.bounds import printable
from tests.support import FAKES, SAMPLE, make_repo, records, seed_argv, seed_env

AGENT = FAKES / "inbox_agent.py"
FOLDERS = ("done", "failed", "rejected")


def config(sandbox: str = "on") -> str:
    """seed.toml for the load: the inbox agent, pytest alone, no daily limits."""
    argv = json.dumps([sys.executable, str(AGENT)])
    return (
        f'[agent]\nbackend = "command"\ncommand = {argv}\nrepair_rounds = 0\n'
        '[quality]\ntools = ["pytest"]\n'
        f'[guard]\nsandbox = "{sandbox}"\n'
        "[budget]\nmax_iterations_per_day = 0\nmax_cost_usd_per_day = 0\n"
        "max_cost_usd_per_iteration = 0\n"
    )


def make_load_repo(folder: Path, sandbox: str = "on") -> Path:
    """The tiny sample project with the load's seed.toml and an empty inbox/."""
    repo = make_repo(folder, SAMPLE, config(sandbox))
    (repo / "inbox").mkdir()
    return repo


def kind_of(index: int, every: int = 2) -> str:
    """good, fail or bad: one task in `every` is a real task (one in ten of those fails), the
    others are bad files."""
    if index % every:
        return "bad"
    return "fail" if (index // every) % 10 == 3 else "good"


_BAD: list[tuple[bytes, bytes]] = [
    (b"empty-{i}.md", b""),
    (b"binary-{i}.md", b"fix\x00this"),
    (b"name-\xff\xfe-{i}.md", b"a task under a name that is not UTF-8\n"),
    (b"long-{i}-" + b"x" * 240 + b".md", b"a task under a 250-byte name\n"),
    (b"front-{i}.md", b'+++\npriority = "urgent"\n+++\nbody\n'),
    (b"big-{i}.md", b"x" * (256 * 1024 + 1)),
    (b"doc-{i}.docx", b"PK\x03\x04"),
    (b"ctl-\x1b[1m-{i}.md", b"a task under a name with an escape\n"),
]


@dataclass(frozen=True)
class Task:
    """One dropped task: its name as bytes (names need not be UTF-8) and what should become of it."""

    raw: bytes
    kind: str

    @property
    def name(self) -> str:
        """The name as the kernel sees it (undecodable bytes as surrogates)."""
        return os.fsdecode(self.raw)


def drop(inbox: Path, index: int, every: int = 2) -> Task:
    """Write task number `index` into inbox/ (the kind kind_of gives)."""
    kind = kind_of(index, every)
    if kind == "bad":
        pattern, data = _BAD[(index - index // every - 1) % len(_BAD)]  # the n-th bad file
        raw = pattern.replace(b"{i}", str(index).encode())
    else:
        raw = f"task-{index:05d}.md".encode()
        text = "FAIL: this one cannot be done" if kind == "fail" else f"Task {index}: add a test"
        data = f"{text}\n".encode()
    with open(os.fsencode(inbox) + b"/" + raw, "wb") as handle:
        handle.write(data)
    return Task(raw, kind)


def settled(inbox: Path) -> int:
    """Tasks that ended in done/, failed/ or rejected/ (notes not counted)."""
    total = 0
    for folder in FOLDERS:
        if (inbox / folder).is_dir():
            total += sum(
                1
                for p in (inbox / folder).iterdir()
                if not p.name.endswith((".result.md", ".reason.txt"))
            )
    return total


@dataclass
class Accounting:
    """Where every dropped task ended, and what is wrong with that (empty when nothing)."""

    ended: Counter[str] = field(default_factory=Counter[str])
    problems: list[str] = field(default_factory=list[str])
    records: int = 0


def account(repo: Path, tasks: list[Task]) -> Accounting:
    """Check every task ended in exactly one place with its note, by name and by record."""
    inbox = repo / "inbox"
    result = Accounting()
    found: dict[str, list[str]] = {}
    for folder in FOLDERS:
        place = inbox / folder
        if not place.is_dir():
            continue
        for entry in place.iterdir():
            name = entry.name
            if name.endswith((".result.md", ".reason.txt")):
                continue
            note = ".reason.txt" if folder == "rejected" else ".result.md"
            if not (place / (name + note)).is_file():
                result.problems.append(f"{folder}/{printable(name)} has no {note}")
            original = name
            if folder == "rejected":
                reason = (place / (name + note)).read_text(encoding="utf-8", errors="replace")
                if " was moved here as " in reason:
                    original = reason.split(" was moved here as ", 1)[0].removeprefix("inbox/")
                else:
                    original = printable(name, 400)
            found.setdefault(original, []).append(folder)
    expected = {"good": "done", "fail": "failed", "bad": "rejected"}
    for task in tasks:
        key = printable(task.name, 400)
        places = found.pop(key, [])
        if len(places) != 1:
            result.problems.append(f"{key}: ended in {places or 'nowhere'}")
            continue
        result.ended[places[0]] += 1
        if places[0] != expected[task.kind]:
            result.problems.append(f"{key} ({task.kind}) ended in {places[0]}")
    result.problems += [f"{name}: in {places} but never dropped" for name, places in found.items()]
    left = [p.name for p in inbox.iterdir() if p.name not in (*FOLDERS, ".active")]
    active = list((inbox / ".active").iterdir()) if (inbox / ".active").is_dir() else []
    if left or active:
        result.problems.append(f"still queued: {left}, still claimed: {active}")
    written = records(repo)
    result.records = len(written)
    landed = Counter(r["gap"]["key"] for r in written if r["outcome"] == "SUCCESS")
    tried = Counter(r["gap"]["key"] for r in written)
    for task in tasks:
        key = f"inbox:{task.name}"
        if task.kind == "good" and landed[key] != 1:
            result.problems.append(f"{key}: {landed[key]} SUCCESS records (1 expected)")
        if task.kind == "fail" and (landed[key] or not tried[key]):
            result.problems.append(f"{key}: {tried[key]} records, {landed[key]} SUCCESS")
        if task.kind == "bad" and tried[key]:
            result.problems.append(f"{key}: a bad file was tried {tried[key]} times")
    return result


def rss_kib(pid: int) -> int:
    """Resident memory of a process (KiB), 0 when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def children(pid: int) -> list[int]:
    """Direct children of a process."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, ValueError):
            continue
    return found


@dataclass
class Sampler:
    """Samples the daemon's RSS (and its module host's) and the load average, in a thread."""

    pid: int
    interval_s: float = 0.2
    daemon_peak_kib: int = 0
    host_peak_kib: int = 0
    loads: list[float] = field(default_factory=list[float])
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        """Begin sampling."""
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """End sampling."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.daemon_peak_kib = max(self.daemon_peak_kib, rss_kib(self.pid))
            hosts = [
                c
                for c in children(self.pid)
                if "modules" in _cmdline(c) and "python" in _cmdline(c)
            ]
            self.host_peak_kib = max([self.host_peak_kib, *(rss_kib(h) for h in hosts)])
            self.loads.append(os.getloadavg()[0])
            self._stop.wait(self.interval_s)


def _cmdline(pid: int) -> str:
    try:
        return (
            Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        )
    except OSError:
        return ""


@dataclass
class LoadRun:
    """What one load run did."""

    tasks: list[Task]
    accounting: Accounting
    seconds: float
    sampler: Sampler
    daemon_exit: int | None
    daemon_stderr: str


def _wait(condition: Callable[[], bool], timeout_s: float, daemon: Popen[bytes], err: Path) -> None:
    """Poll (twice a second: the daemon should have the cores) until condition() holds."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if daemon.poll() is not None:
            raise AssertionError(
                f"the daemon exited ({daemon.returncode}): {err.read_text()[-3000:]}"
            )
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f}s: {err.read_text()[-3000:]}")
        time.sleep(0.5)


def run_load(
    repo: Path, count: int, burst_share: float = 0.7, timeout_s: float = 600, every: int = 2
) -> LoadRun:
    """Drop `count` tasks: a burst before the daemon starts, the rest once it has landed one.
    One task in `every` is a real one (see kind_of)."""
    inbox = repo / "inbox"
    first = int(count * burst_share)
    tasks = [drop(inbox, i, every) for i in range(first)]
    started = time.monotonic()
    # the log goes to a file: a pipe nobody reads would fill up and stop the daemon
    err_path = repo.parent / "daemon.stderr"
    with err_path.open("wb") as err:
        daemon = subprocess.Popen(
            seed_argv(repo, "run"),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=seed_env(),
        )
    sampler = Sampler(daemon.pid)
    sampler.start()
    try:
        log = repo / "history" / "records.jsonl"
        _wait(lambda: log.exists() and log.stat().st_size > 0, timeout_s, daemon, err_path)
        tasks += [drop(inbox, i, every) for i in range(first, count)]  # while the daemon works
        _wait(lambda: settled(inbox) >= count, timeout_s, daemon, err_path)
        seconds = time.monotonic() - started
        daemon.send_signal(signal.SIGINT)
        daemon.wait(timeout=120)
    finally:
        sampler.stop()
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
    stderr = err_path.read_text(encoding="utf-8", errors="replace")
    return LoadRun(tasks, account(repo, tasks), seconds, sampler, daemon.returncode, stderr)


def summary(run: LoadRun) -> dict[str, Any]:
    """The figures of a run."""
    loads = run.sampler.loads or [0.0]
    return {
        "tasks": len(run.tasks),
        "kinds": dict(Counter(t.kind for t in run.tasks)),
        "ended": dict(run.accounting.ended),
        "problems": len(run.accounting.problems),
        "records": run.accounting.records,
        "seconds": round(run.seconds, 1),
        "tasks_per_s": round(len(run.tasks) / run.seconds, 3),
        "daemon_peak_rss_mib": round(run.sampler.daemon_peak_kib / 1024, 1),
        "host_peak_rss_mib": round(run.sampler.host_peak_kib / 1024, 1),
        "load_avg_mean": round(sum(loads) / len(loads), 2),
        "load_avg_max": round(max(loads), 2),
    }
