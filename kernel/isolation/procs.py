"""Every child process starts here: own process group, stdin closed, timeout, output cap.

The daemon makes itself a child subreaper, so descendants that start new sessions are
reparented to it when their parents die and can still be found and ended.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from kernel.errors import Interrupted

STOP = threading.Event()
"""Set by the signal handler: interruptible runs end their process group and raise."""

_LOCK = threading.Lock()
_LIVE: set[int] = set()
_KNOWN: set[int] = set()
_PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    """Make orphaned descendants reparent to this process (Linux); False elsewhere."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def register_known(pid: int) -> None:
    """Mark a long-lived child (the module host) so orphan sweeps leave it alone."""
    with _LOCK:
        _KNOWN.add(pid)


def forget_known(pid: int) -> None:
    """Undo register_known."""
    with _LOCK:
        _KNOWN.discard(pid)


def child_env(base: Mapping[str, str] | None = None, **extra: str) -> dict[str, str]:
    """An environment for a child: SEED_DEPTH raised by one so nested daemons know, and the
    daemon's token, so a restarted daemon can find what a dead one left running."""
    env = dict(os.environ if base is None else base)
    depth = os.environ.get("SEED_DEPTH", "0")
    env["SEED_DEPTH"] = str(int(depth) + 1 if depth.isdigit() else 1)
    token = os.environ.get("SEED_DAEMON_TOKEN")
    if token:
        env["SEED_DAEMON_TOKEN"] = token
    env.update(extra)
    return env


RUN_ENV: dict[str, str] = {
    "PATH": "how tests and tools find programs (git, the interpreter's scripts)",
    "HOME": "where tools look for their settings; in the sandbox an empty folder of the run's own",
    "LANG": "the locale: the encoding tools read and print text in",
    "LANGUAGE": "the locale's language for messages",
    "TZ": "the time zone that tests printing local times expect",
    "XDG_CACHE_HOME": "where pyright's Python package keeps the node it runs on",
}
"""Everything a run of repository code (pytest, ruff, pyright, localisation, repairs) and the
module server get from the daemon's environment, with the reason for each; LC_* (the
locale's categories) too. Built from this list, never the daemon's environment minus some
names: a credential the person has set (AWS_SECRET_ACCESS_KEY, a token) never reaches code
the agent wrote, nor its output, records or the next prompt."""


def run_env(**extra: str) -> dict[str, str]:
    """The environment of a run of repository code: RUN_ENV's variables, then extra."""
    kept = {k: v for k, v in os.environ.items() if k in RUN_ENV or k.startswith("LC_")}
    return child_env(kept, **extra)


def process_start_time(pid: int) -> int | None:
    """The kernel's start time of a process in clock ticks (to tell a reused pid apart)."""
    fields = _stat_fields(pid)
    return int(fields[19]) if fields is not None and len(fields) > 19 else None


def alive(pid: int) -> bool:
    """Whether a process runs (a zombie has ended: only its exit is left to collect)."""
    fields = _stat_fields(pid)
    return fields is not None and bool(fields) and fields[0] != "Z"


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name; None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name may contain spaces and parentheses: split after the last ')'
    return stat[stat.rfind(")") + 2 :].split()


def _proc_stats() -> Iterator[tuple[int, list[str]]]:
    """Each live process as (pid, its stat fields)."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return
    for entry in entries:
        if entry.isdigit() and (fields := _stat_fields(int(entry))) is not None:
            yield int(entry), fields


def _children_of(pid: int) -> list[int]:
    return [child for child, fields in _proc_stats() if len(fields) > 1 and fields[1] == str(pid)]


def _signal_group(pgid: int, sig: signal.Signals) -> bool:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def end_group(pgid: int, grace_s: float = 2.0) -> None:
    """SIGTERM a process group, then SIGKILL whatever is left after the grace period."""
    if not _signal_group(pgid, signal.SIGTERM):
        return
    deadline = time.monotonic() + grace_s
    pause = 0.001  # most groups are gone in a millisecond (a leader already on its way out)
    while time.monotonic() < deadline:
        if not _group_alive(pgid):
            return
        time.sleep(pause)
        pause = min(pause * 2, 0.05)
    _signal_group(pgid, signal.SIGKILL)


def group_members(pgid: int, *, zombies: bool = False) -> list[int]:
    """The pids in a process group, from /proc (zombies only when asked)."""
    return [
        pid
        for pid, fields in _proc_stats()
        if len(fields) > 2 and fields[2] == str(pgid) and (zombies or fields[0] != "Z")
    ]


def _group_alive(pgid: int) -> bool:
    """True while a non-zombie process is left in the group (zombies cannot be killed)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if not Path("/proc").is_dir():
        return True
    return bool(group_members(pgid))


def sweep_orphans(rounds: int = 20) -> list[int]:
    """End descendants that were reparented to us (escaped their group); return their pids.

    Reparenting takes a moment after a parent dies, so a thorough sweep waits for three
    quiet scans in a row; rounds=1 is a single quick look.
    """
    ended: list[int] = []
    me = os.getpid()
    quiet = 0
    for _ in range(max(rounds, 1)):
        with _LOCK:
            strangers = [p for p in _children_of(me) if p not in _LIVE and p not in _KNOWN]
        if not strangers:
            quiet += 1
            if quiet >= min(3, rounds):
                break
            time.sleep(0.05)
            continue
        quiet = 0
        for pid in strangers:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(os.getpgid(pid), signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, 0)
            ended.append(pid)
    return ended


@dataclass
class _Sink:
    """Keeps up to `limit` bytes (in memory or a file), counts the rest, keeps a tail."""

    limit: int
    file: BinaryIO | None = None
    tail_limit: int = 16 * 1024
    kept: bytearray = field(default_factory=bytearray)
    tail: bytearray = field(default_factory=bytearray)
    total: int = 0

    def write(self, data: bytes) -> None:
        room = self.limit - self.total
        if room > 0:
            chunk = data[:room]
            if self.file is not None:
                self.file.write(chunk)
            else:
                self.kept.extend(chunk)
        self.total += len(data)
        self.tail.extend(data)
        if len(self.tail) > self.tail_limit:
            del self.tail[: len(self.tail) - self.tail_limit]

    @property
    def truncated(self) -> bool:
        return self.total > self.limit


@dataclass(frozen=True)
class Completed:
    """How a child process ended."""

    argv: tuple[str, ...]
    exit_code: int | None
    """None when it was killed at the timeout or on interruption."""
    stdout: bytes
    stderr: bytes
    duration_s: float
    timed_out: bool = False
    output_bytes: int = 0
    truncated: bool = False
    tail: bytes = b""
    escaped: tuple[int, ...] = ()
    """Descendants that left the process group and were ended by the sweep."""
    channel: bytes = b""
    """What came through the run's channel (run's `channel`), up to its bound."""
    ended_early: bool = False
    """The kernel ended it before its time, when run's `end` was set (a stuck or limited run)."""

    @property
    def ok(self) -> bool:
        """Exited with code 0."""
        return self.exit_code == 0

    def text(self) -> str:
        """stdout decoded leniently."""
        return self.stdout.decode("utf-8", errors="replace")

    def err_text(self) -> str:
        """stderr decoded leniently."""
        return self.stderr.decode("utf-8", errors="replace")


def _feed(data: bytes) -> BinaryIO:
    feed = tempfile.TemporaryFile()  # noqa: SIM115 (closed by run's finally)
    feed.write(data)
    feed.seek(0)
    return feed


def run(
    argv: Sequence[str],
    *,
    cwd: Path | str,
    timeout_s: float,
    env: Mapping[str, str] | None = None,
    merge_stderr: bool = False,
    log_path: Path | None = None,
    max_bytes: int = 256 * 1024 * 1024,
    interruptible: bool = True,
    on_start: Callable[[int], None] | None = None,
    sweep_rounds: int = 1,
    stdin: bytes | None = None,
    channel: tuple[int, int] | None = None,
    channel_bytes: int = 64 * 1024 * 1024,
    end: threading.Event | None = None,
) -> Completed:
    """Run one child in its own process group and end the whole group when it is done.

    stdin is closed unless bytes are given (fed from a temporary file: no pipe to block on).
    `channel` is a pipe (read end, write end): the child inherits the write end at its
    number, the kernel closes its own copy once the child has started and reads the read end
    alongside the output (at most channel_bytes), so nothing the child does can block it.
    The caller keeps the read end (and closes it); the write end is closed here either way.
    `end`, once set, ends the group as the timeout would (Completed.ended_early).
    """
    started = time.monotonic()
    feed = _feed(stdin) if stdin is not None else None
    # unbuffered: `status` shows the last lines of a running agent's log as they come
    log = log_path.open("wb", buffering=0) if log_path is not None else None
    out = _Sink(limit=max_bytes, file=log)
    err = out if merge_stderr else _Sink(limit=max_bytes)
    side = _Sink(limit=channel_bytes, tail_limit=0)
    try:
        proc = _start(argv, cwd, env, feed, merge_stderr, (channel[1],) if channel else ())
    finally:
        if channel is not None:
            os.close(channel[1])  # the child's now: EOF comes when the child's copies close
    selector, streams = _watch(proc, out, err)
    if channel is not None:
        os.set_blocking(channel[0], False)
        selector.register(channel[0], selectors.EVENT_READ)
        streams[channel[0]] = side
    ended = _Ended(end=end)
    escaped: list[int] = []
    try:
        if on_start is not None:
            on_start(proc.pid)
        _pump(proc, selector, streams, started + timeout_s, interruptible, ended)
    finally:
        selector.close()
        _reap(proc, ended)
        escaped = sweep_orphans(sweep_rounds) if sweep_rounds > 0 else []
        if log is not None:
            log.close()
        if feed is not None:
            feed.close()
    if ended.interrupted:
        raise Interrupted(f"interrupted while running {argv[0]}")
    return Completed(
        argv=tuple(argv),
        exit_code=None if ended.timed_out else proc.returncode,
        stdout=bytes(out.kept),
        stderr=bytes(err.kept) if not merge_stderr else b"",
        duration_s=time.monotonic() - started,
        timed_out=ended.timed_out,
        output_bytes=out.total,
        truncated=out.truncated,
        ended_early=ended.early,
        tail=bytes(out.tail),
        escaped=tuple(escaped),
        channel=bytes(side.kept),
    )


@dataclass
class _Ended:
    """Why the kernel ended a run's group before it finished by itself (if it did)."""

    timed_out: bool = False
    interrupted: bool = False
    early: bool = False
    end: threading.Event | None = None
    """Set by the kernel: the group is ended now (`early`)."""


def _start(
    argv: Sequence[str],
    cwd: Path | str,
    env: Mapping[str, str] | None,
    feed: BinaryIO | None,
    merge_stderr: bool,
    pass_fds: tuple[int, ...] = (),
) -> subprocess.Popen[bytes]:
    """The child, leading a process group of its own, known as live until it is reaped."""
    with _LOCK:
        proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=dict(env) if env is not None else None,
            stdin=feed if feed is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
            start_new_session=True,
            pass_fds=pass_fds,
        )
        _LIVE.add(proc.pid)
    return proc


def _watch(
    proc: subprocess.Popen[bytes], out: _Sink, err: _Sink
) -> tuple[selectors.BaseSelector, dict[int, _Sink]]:
    """A selector on the child's output pipes, and the sink of each."""
    selector = selectors.DefaultSelector()
    streams: dict[int, _Sink] = {}
    assert proc.stdout is not None
    streams[proc.stdout.fileno()] = out
    if proc.stderr is not None:
        streams[proc.stderr.fileno()] = err
    for fd in streams:
        os.set_blocking(fd, False)
        selector.register(fd, selectors.EVENT_READ)
    return selector, streams


_CANCEL = threading.local()
"""The event that ends this thread's runs, besides STOP (a candidate cancelled by the kernel)."""


@contextlib.contextmanager
def cancelled_by(event: threading.Event) -> Generator[None]:
    """Within this, every run of this thread ends its group when event is set, as on a stop
    (the run raises Interrupted): the kernel cancels one candidate and no other."""
    _CANCEL.event = event
    try:
        yield
    finally:
        _CANCEL.event = None


def stopped() -> bool:
    """Whether this thread's runs are to end: the daemon stops, or its candidate was cancelled."""
    own: threading.Event | None = getattr(_CANCEL, "event", None)
    return STOP.is_set() or (own is not None and own.is_set())


def _pump(
    proc: subprocess.Popen[bytes],
    selector: selectors.BaseSelector,
    streams: dict[int, _Sink],
    deadline: float,
    interruptible: bool,
    ended: _Ended,
) -> None:
    """Read the output until the pipes close (or a second after the leader exits), ending
    the group at the deadline or on a stop."""
    pgid = proc.pid
    drain_until: float | None = None
    while True:
        if drain_until is None:
            if interruptible and stopped():
                ended.interrupted = True
                end_group(pgid)
            elif time.monotonic() > deadline:
                ended.timed_out = True
                end_group(pgid)
            elif ended.end is not None and ended.end.is_set() and not ended.early:
                ended.early = True
                end_group(pgid)
        for key, _ in selector.select(timeout=0.05):
            fd = int(key.fd)
            try:
                data = os.read(fd, 65536)
            except BlockingIOError:
                continue
            if data:
                streams[fd].write(data)
            else:
                selector.unregister(fd)
        if drain_until is None and proc.poll() is not None:
            # the leader is gone: whatever is left of its group must not outlive it
            end_group(pgid, grace_s=0.5)
            drain_until = time.monotonic() + 1.0
        if not selector.get_map() or (drain_until is not None and time.monotonic() > drain_until):
            return


def _reap(proc: subprocess.Popen[bytes], ended: _Ended) -> None:
    """Wait for the child, end what is left of its group, close its pipes, forget it."""
    if proc.poll() is None and not (ended.timed_out or ended.interrupted or ended.early):
        # it closed its output: most likely on its way out, let it go by itself
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=0.2)
    # whatever is left of its group must not outlive it (a no-op when none is)
    end_group(proc.pid, grace_s=0.5)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()
    with _LOCK:
        _LIVE.discard(proc.pid)
