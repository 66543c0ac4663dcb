"""A resident type checker: `pyright --watch` kept running on one kernel-owned folder.

The folder is synced from git tree to git tree (only the files that differ are written; the
listing is checked against the tree id, each blob against its id) and checked byte for byte
against the tree before and after every use; any mismatch means a fresh export and a
restarted pyright.

Which of pyright's JSON documents belongs to the synced state is told by a sentinel: a file
outside the folder (in `sync/` beside the config, which the config includes) holding an
error that names a fresh nonce, written after the tree's files while pyright is stopped
(SIGSTOP), so it reads nothing half synced. pyright's CLI watcher hands it each file's event
after its own per-file timers (chokidar's awaitWriteFinish, ~1 s), in no guaranteed order,
so the sentinel's event cannot be trusted to come after the tree's. Instead the sentinel is
`builtins.pyi`: pyright handles a change to a file of that name by re-reading every file and
marking each whose bytes changed, and its importers, for a re-check (`markAllFilesDirty`
without `evenIfContentsAreSame`); the first report naming the nonce therefore comes from a run
that saw every change. pyright's CLI watcher ignores deletions (1.1.414 logs "unknown file
change event: 'unlink'"), so a sync that adds, deletes or re-links files (and the check after
it, while the added files' own events may still come) writes the nonce into a file of a new
name instead: a new file makes pyright re-list the folder and re-read everything. One case is
left open: such a late event from two checks back, handled just before pyright is stopped and
its run resumed after the sentinel was written; `late` counts the reports that came after the
one a check gave, so a bench shows how often events come late at all.

Anything amiss (a timeout, a crash, a tampered folder or config, a git listing that does not
make the tree) falls back to a cold `run_pyright` on a fresh export, and the reason goes to
the log callback.
"""

from __future__ import annotations

import codecs
import contextlib
import hashlib
import importlib.util
import json
import os
import re
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from domain import Measurement, Tool
from kernel.isolation import gitops, procs
from kernel.isolation.trees import ObjectStore, blob_id, read_blobs
from kernel.measuring.gate import Gate, pyright_config, pyright_config_outside
from kernel.measuring.measure import MAX_DETAIL, Target, tool_env

__all__ = ["Folder", "ResidentPyright", "Sync", "mismatch"]

SENTINEL_PREFIX = "_seed_sync_"
"""Name prefix of the sentinel files; they live in the config folder's `sync/`, never in the tree's."""
NUDGE_S = 5.0
"""Seconds without any report from pyright before the sentinel is written again (see `_wait`)."""
YOUNG_S = 60.0
"""Seconds after a start during which a check may write its sentinel again (see `_wait`)."""
MAX_WAIT_S = 60.0
"""Seconds a check waits for pyright's report at most; then a cold run (never the tool's
whole timeout: a resident checker that stopped watching must not stall the daemon)."""
_FAST_SENTINEL = "_seed_sync.py"
"""The sentinel of a check with exact=False: an ordinary file, changed in place."""
_CHANGED_SENTINEL = "builtins.pyi"
"""pyright handles a change to a file of this name by re-reading every file and marking those
whose bytes changed (and their importers) for a re-check (`markAllFilesDirty(false)`)."""
_SYNC_DIR = "sync"
_CONFIG = "pyrightconfig.json"
_FILE_MODES = {"100644": 0o644, "100755": 0o755}
_LINK = "120000"
_SUBMODULE = "160000"

Entries = dict[str, tuple[str, str]]
"""path -> (git mode, object id) of every entry of a tree."""


def _ls_tree(root: Path, tree: str, env: dict[str, str] | None) -> Entries:
    """Every entry of a tree, the listing checked against the tree's id (nothing lost on the way)."""
    if not re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", tree):
        tree = gitops.git(root, "rev-parse", "--verify", f"{tree}^{{tree}}", env=env).text().strip()
    raw = gitops.git(root, "ls-tree", "-r", "-z", "--full-tree", tree, env=env).stdout
    out: Entries = {}
    for item in raw.split(b"\0"):
        if not item:
            continue
        meta, _, path = item.partition(b"\t")
        mode, _kind, oid = meta.decode().split(" ")
        out[path.decode("utf-8", errors="surrogateescape")] = (mode, oid)
    if _tree_id(out, len(tree)) != tree:
        raise gitops.GitError(f"ls-tree: the listing of {tree} does not make that tree")
    return out


def _tree_id(entries: Entries, oid_len: int) -> str:
    """The id of the tree these (recursive) entries make, computed as git does."""
    top: dict[str, Any] = {}
    for path, leaf in entries.items():
        node = top
        *dirs, name = path.split("/")
        for part in dirs:
            node = node.setdefault(part, {})
        node[name] = leaf

    def digest(node: dict[str, Any]) -> bytes:
        items: list[tuple[bytes, bytes]] = []
        for name, value in node.items():
            raw = os.fsencode(name)
            if isinstance(value, dict):
                sub = digest(cast(dict[str, Any], value))
                items.append((raw + b"/", b"40000 " + raw + b"\0" + sub))
            else:
                mode, oid = cast(tuple[str, str], value)
                items.append((raw, mode.encode() + b" " + raw + b"\0" + bytes.fromhex(oid)))
        body = b"".join(entry for _, entry in sorted(items))
        algo = hashlib.sha256() if oid_len == 64 else hashlib.sha1()
        algo.update(b"tree %d\0" % len(body))
        algo.update(body)
        return algo.digest()

    return digest(top).hex()


def _kind(mode: str) -> str:
    return "file" if mode in _FILE_MODES else mode


def _needed_dirs(entries: Entries) -> tuple[set[str], set[str]]:
    """(every folder a tree's entries need, the submodule folders that must stay empty)."""
    dirs: set[str] = set()
    submodules: set[str] = set()
    for path, (mode, _) in entries.items():
        parts = path.split("/")
        dirs.update("/".join(parts[:i]) for i in range(1, len(parts)))
        if mode == _SUBMODULE:
            dirs.add(path)
            submodules.add(path)
    return dirs, submodules


def _read_nofollow(path: Path) -> bytes | None:
    """A regular file's bytes, never through a link; None when it is not one."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks: list[bytes] = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def mismatch(folder: Path, entries: Entries) -> str:
    """'' when the folder holds exactly these entries byte for byte, else the first difference."""
    try:
        top = os.lstat(folder)
    except OSError:
        return "the folder is missing"
    if not stat.S_ISDIR(top.st_mode):
        return "the folder is not a folder"
    dirs, submodules = _needed_dirs(entries)
    seen: set[str] = set()
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        try:
            listing = list(os.scandir(folder / rel_dir if rel_dir else folder))
        except OSError as exc:
            return f"cannot list {rel_dir or '.'}: {exc}"
        for item in listing:
            rel = f"{rel_dir}/{item.name}" if rel_dir else item.name
            info = item.stat(follow_symlinks=False)
            if stat.S_ISDIR(info.st_mode):
                if rel not in dirs:
                    return f"an extra folder {rel}"
                if rel in submodules:
                    if any(True for _ in os.scandir(folder / rel)):
                        return f"files in the submodule folder {rel}"
                else:
                    stack.append(rel)
                continue
            want = entries.get(rel)
            if want is None or want[0] == _SUBMODULE:
                return f"an extra file {rel}"
            mode, oid = want
            if stat.S_ISLNK(info.st_mode):
                if mode != _LINK:
                    return f"a link where the tree has a file: {rel}"
                data = os.fsencode(os.readlink(folder / rel))
            elif stat.S_ISREG(info.st_mode):
                if mode == _LINK:
                    return f"a file where the tree has a link: {rel}"
                if stat.S_IMODE(info.st_mode) != _FILE_MODES.get(mode):
                    return f"mode {oct(stat.S_IMODE(info.st_mode))} of {rel}, the tree says {mode}"
                if info.st_nlink != 1:
                    return f"{rel} has other hard links"
                read = _read_nofollow(folder / rel)
                if read is None:
                    return f"{rel} changed while read"
                data = read
            else:
                return f"a special file {rel}"
            if blob_id(data, len(oid)) != oid:
                return f"the bytes of {rel} differ from the tree's"
            seen.add(rel)
    missing = [p for p, (m, _) in entries.items() if m != _SUBMODULE and p not in seen]
    return f"{missing[0]} is missing" if missing else ""


@dataclass(frozen=True)
class Sync:
    """What one sync wrote."""

    tree: str
    written: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    fresh: bool = False
    """The folder was exported from scratch."""
    reason: str = ""
    """Why it was (a first use, or how the folder differed from what the kernel wrote)."""
    structural: bool = False
    """Files or links were added, removed or re-linked (pyright must re-list the folder)."""


@dataclass
class Folder:
    """A kernel-owned folder holding exactly one git tree at a time."""

    root: Path
    """The repository (its objects; a store borrows them)."""
    path: Path
    held: Entries | None = None
    """What the folder holds, by the kernel's own account; None: unknown (export afresh)."""
    tree: str = ""
    has_links: bool = field(default=False)

    def entries(self, tree: str, store: ObjectStore | None = None) -> Entries:
        """The entries of a tree (from the store when given: candidate trees live there)."""
        return _ls_tree(self.root, tree, store.env() if store is not None else None)

    def reset(self) -> None:
        """Forget what the folder holds: the next sync exports from scratch."""
        self.held = None
        self.tree = ""

    def sync(self, tree: str, store: ObjectStore | None = None) -> Sync:
        """Make the folder hold the tree, writing only what differs from what it held."""
        env = store.env() if store is not None else None
        new = _ls_tree(self.root, tree, env)
        held = self.held
        why = "first use" if held is None else mismatch(self.path, held)
        if why:
            # a first use, or tampered or half written: start again
            self._export(new, env)
            done = Sync(tree=tree, written=tuple(new), fresh=True, structural=True, reason=why)
        else:
            assert held is not None
            done = self._update(held, new, env, tree)
        self.held = new
        self.tree = tree
        self.has_links = any(m == _LINK for m, _ in new.values())
        return done

    def _export(self, entries: Entries, env: dict[str, str] | None) -> None:
        self.held = None
        if os.path.lexists(self.path):
            if self.path.is_symlink() or not self.path.is_dir():
                self.path.unlink()
            else:
                shutil.rmtree(self.path)
        self.path.mkdir(parents=True)
        self._write(entries, sorted(entries), env)

    def _update(self, held: Entries, new: Entries, env: dict[str, str] | None, tree: str) -> Sync:
        gone = sorted(p for p in held if p not in new)
        retyped = sorted(p for p in held if p in new and _kind(held[p][0]) != _kind(new[p][0]))
        for rel in [*gone, *retyped]:
            path = self.path / rel
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)
        needed, _ = _needed_dirs(new)
        for rel in gone:
            parts = rel.split("/")[:-1]
            while parts and "/".join(parts) not in needed:
                with contextlib.suppress(OSError):
                    (self.path / "/".join(parts)).rmdir()
                parts.pop()
        written = sorted(p for p in new if held.get(p) != new[p])
        self._write(new, written, env)
        links = self.has_links or any(m == _LINK for m, _ in new.values())
        structural = bool(gone or retyped) or any(p not in held for p in written)
        # a link's target may be a changed file that pyright caches under the link's path too
        return Sync(
            tree=tree,
            written=tuple(written),
            removed=tuple(gone),
            structural=structural or (bool(written) and links),
        )

    def _write(self, entries: Entries, paths: list[str], env: dict[str, str] | None) -> None:
        blobs = [p for p in paths if entries[p][0] != _SUBMODULE]
        for rel, data in zip(
            blobs, read_blobs(self.root, [entries[p][1] for p in blobs], env), strict=True
        ):
            path = self.path / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            mode = entries[rel][0]
            if path.is_symlink() or (path.exists() and not path.is_file()):
                path.unlink()
            if mode == _LINK:
                os.symlink(os.fsdecode(data), path)
                continue
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
            fd = os.open(path, flags, _FILE_MODES.get(mode, 0o644))
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fchmod(fd, _FILE_MODES.get(mode, 0o644))
            finally:
                os.close(fd)
        for rel in paths:
            if entries[rel][0] == _SUBMODULE:
                (self.path / rel).mkdir(parents=True, exist_ok=True)


def _pyright_version() -> str:
    """The version of the pyright the kernel runs (its bundled package.json)."""
    spec = importlib.util.find_spec("pyright")
    if spec is None or spec.origin is None:
        return ""
    try:
        data = json.loads(
            (Path(spec.origin).parent / "dist" / "package.json").read_text(encoding="utf-8")
        )
    except (OSError, ValueError):
        return ""
    return str(cast(dict[str, Any], data).get("version", ""))


def _interpreter(python: str) -> tuple[Any, ...]:
    """What identifies an interpreter and its installed packages, from stat alone."""
    try:
        real = Path(python).resolve()
        info = real.stat()
    except OSError:
        return (python,)
    key: list[Any] = [python, str(real), info.st_ino, info.st_size, info.st_mtime_ns]
    # a venv's pyvenv.cfg and site-packages change when it is re-created or a package installed
    for base in {Path(python).parent.parent, real.parent.parent}:
        for extra in [base / "pyvenv.cfg", *sorted(base.glob("lib/python*/site-packages"))]:
            with contextlib.suppress(OSError):
                key.append((str(extra), extra.stat().st_mtime_ns))
    return tuple(key)


def group_rss_bytes(pgid: int) -> int:
    """Resident memory of every process in a process group, from /proc."""
    total = 0
    page = os.sysconf("SC_PAGE_SIZE")
    for pid in procs.group_members(pgid):
        with contextlib.suppress(OSError, ValueError, IndexError):
            total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * page
    return total


def _quiet(_words: str) -> None:
    """No log."""


class _Stale(Exception):
    """The resident state cannot be used for this check (the reason is the message)."""


@dataclass
class _Process:
    """One running `pyright --watch`, its JSON documents read by a thread."""

    popen: subprocess.Popen[bytes]
    identity: tuple[Any, ...]
    docs: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    cond: threading.Condition = field(default_factory=threading.Condition)
    ended: bool = False
    stderr_tail: bytes = b""
    threads: list[threading.Thread] = field(default_factory=list[threading.Thread])
    matched: int = -1
    """Index in docs of the document the last check reported (-1: none)."""

    def read_stdout(self) -> None:
        """Split stdout into complete JSON documents (pyright prints one per re-check)."""
        stream = self.popen.stdout
        assert stream is not None
        decoder = json.JSONDecoder()
        text = codecs.getincrementaldecoder("utf-8")(errors="replace")
        buf = ""
        fd = stream.fileno()
        while True:
            try:
                chunk = os.read(fd, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                break
            buf += text.decode(chunk)
            # a document ends with a "}" at the start of a line: parse only then
            while "\n}" in buf or buf.rstrip().endswith("}"):
                start = buf.find("{")
                if start < 0:
                    buf = ""
                    break
                try:
                    doc, end = decoder.raw_decode(buf, start)
                except ValueError:
                    nxt = buf.find("\n{", start + 1)
                    if nxt < 0 or "\n}" not in buf[:nxt]:
                        break  # incomplete: wait for more
                    buf = buf[nxt + 1 :]  # not JSON (a stray line): skip it
                    continue
                buf = buf[end:]
                if isinstance(doc, dict):
                    with self.cond:
                        self.docs.append(cast(dict[str, Any], doc))
                        self.cond.notify_all()
        # the reader closes its own pipe: closed from another thread while this one reads,
        # the fd number could be reused (by a git pipe) and this thread would read from that
        stream.close()
        with self.cond:
            self.ended = True
            self.cond.notify_all()

    def read_stderr(self) -> None:
        """Keep the last words pyright wrote on stderr (for a crash report)."""
        stream = self.popen.stderr
        assert stream is not None
        fd = stream.fileno()
        while True:
            try:
                chunk = os.read(fd, 1 << 14)
            except OSError:
                break
            if not chunk:
                break
            self.stderr_tail = (self.stderr_tail + chunk)[-MAX_DETAIL:]
        stream.close()

    def alive(self) -> bool:
        """The wrapper has not exited."""
        return self.popen.poll() is None and not self.ended


class ResidentPyright:
    """`pyright --watch --outputjson` kept running on one kernel-owned folder.

    `check` returns what a cold `run_pyright` on a fresh export of the tree returns;
    one check at a time (a lock). `invalidate` after anything that could have tampered with
    the process or its folder; `close` ends its process group.
    """

    def __init__(
        self,
        root: Path,
        state_dir: Path,
        *,
        memory_mb: int = 2048,
        log: Callable[[str], None] | None = None,
    ) -> None:
        state_dir.mkdir(parents=True, exist_ok=True)
        self.root = root
        self.state_dir = state_dir.resolve()
        self.memory_mb = memory_mb
        self.folder = Folder(root, self.state_dir / "tree")
        self.config_dir = self.state_dir / "config"
        self._log: Callable[[str], None] = log or _quiet
        self._proc: _Process | None = None
        self._sentinel: Path | None = None
        self._sentinels: list[str] = []
        self._kind = "exact"
        self._started_at = 0.0
        self._after_structural = False
        self._config_text = ""
        self._lock = threading.Lock()
        self.last_reason = ""
        """Why the last check fell back to a cold run ('' when it did not)."""
        self.restarts = 0
        """How many times pyright was started."""
        self.late = 0
        self.relists = 0
        """Checks that had pyright re-list and re-read every file (a new-named sentinel)."""
        """Checks after which pyright printed another report before the next check."""

    # -- public -------------------------------------------------------------------------

    def check(
        self,
        tree: str,
        gate: Gate,
        target: Target,
        timeout_s: float,
        store: ObjectStore | None = None,
        *,
        exact: bool = True,
    ) -> Measurement:
        """pyright's errors on the tree, as a cold run on a fresh export would report them.

        exact=False re-checks only what pyright's watcher says changed (its incremental cost),
        but the watcher's per-file timers can hand it a changed file after the sentinel: the
        report may then be of an older state (2 in 30 under a load average of 7 in
        bench/pyright_resident.py --stress). Use it to refuse early, never to accept.
        """
        started = time.monotonic()
        deadline = started + timeout_s
        with self._lock:
            reason = ""
            for _attempt in range(2):
                try:
                    diagnostics_doc = self._resident(tree, gate, target, deadline, store, exact)
                except _Stale as exc:
                    reason = str(exc)
                    self._log(f"resident pyright: {reason}")
                    self._stop()
                    self.folder.reset()
                    if time.monotonic() >= deadline:
                        break
                    continue
                except (OSError, gitops.GitError) as exc:
                    reason = f"{type(exc).__name__}: {exc}"
                    self._log(f"resident pyright: {reason}")
                    self._stop()
                    self.folder.reset()
                    break
                self.last_reason = ""
                return self._measurement(diagnostics_doc, time.monotonic() - started)
            self.last_reason = reason or "resident pyright failed"
            self._log(f"resident pyright: a cold run instead ({self.last_reason})")
            return self._cold(tree, gate, target, timeout_s, store)

    def invalidate(self) -> None:
        """Trust nothing resident any more: the next check restarts pyright on a fresh export."""
        with self._lock:
            self._stop()
            self.folder.reset()

    def rss_bytes(self) -> int:
        """Resident memory of pyright's whole process group (0 when it is not running)."""
        proc = self._proc
        if proc is None or proc.popen.poll() is not None:
            return 0
        return group_rss_bytes(proc.popen.pid)

    @property
    def pid(self) -> int | None:
        """The process group of the running pyright, if any."""
        proc = self._proc
        return proc.popen.pid if proc is not None and proc.popen.poll() is None else None

    def close(self) -> None:
        """End pyright's process group."""
        with self._lock:
            self._stop()

    # -- internals ------------------------------------------------------------------------

    def _resident(
        self,
        tree: str,
        gate: Gate,
        target: Target,
        deadline: float,
        store: ObjectStore | None,
        exact: bool = True,
    ) -> dict[str, Any]:
        """The JSON document pyright printed for exactly this tree (sentinel's errors dropped)."""
        proc = self._proc
        if proc is not None and (not proc.alive() or self._over_memory(proc)):
            self._log("resident pyright: it died or outgrew its memory; restarting")
            self._stop()
            proc = None
        paused = proc is not None and self._signal(proc, signal.SIGSTOP)
        try:
            sync = self.folder.sync(tree, store)
            if sync.fresh and sync.reason != "first use":
                self._log(f"resident pyright: the folder was not as written ({sync.reason})")
            wrong = mismatch(self.folder.path, self.folder.held or {})
            if wrong:
                raise _Stale(f"the folder does not match tree {tree[:12]}: {wrong}")
            config = self._config(gate, target)
            identity = (config, _interpreter(target.python), _pyright_version(), self.memory_mb)
            if proc is not None and (
                proc.identity != identity or sync.fresh or self._tampered_config()
            ):
                self._log("resident pyright: its configuration, interpreter or folder changed")
                self._stop()
                proc = None
                paused = False
            started = proc is None
            proc, nonce = self._ask(proc, tree, target, (config, identity), sync, exact)
            # a fresh pyright has no events pending from before it listed the folder
            self._after_structural = sync.structural and not started
        finally:
            if paused and self._proc is not None:
                self._signal(self._proc, signal.SIGCONT)
        young = time.monotonic() - self._started_at < YOUNG_S
        doc = self._wait(proc, nonce, deadline, nudge=young and not started)
        wrong = mismatch(self.folder.path, self.folder.held or {})
        if wrong:
            raise _Stale(f"the folder changed during the check: {wrong}")
        if self._tampered_config():
            raise _Stale("the config or sentinel folder changed during the check")
        return doc

    def _ask(
        self,
        proc: _Process | None,
        tree: str,
        target: Target,
        setup: tuple[str, tuple[Any, ...]],
        sync: Sync,
        exact: bool,
    ) -> tuple[_Process, str]:
        """A new sentinel for this check, and the pyright that will report on it: started on
        the config and identity in `setup`, or the running one told to report again."""
        nonce = secrets.token_hex(12)
        if proc is None:
            config, identity = setup
            self._write_config(config)
            self._write_sentinel(nonce, kind="exact")
            return self._start(target, identity), nonce
        self._late(proc, tree)
        with proc.cond:
            proc.docs.clear()  # everything printed so far is of an earlier state
            proc.matched = -1
        # a re-listing (a new file's arrival) is needed for added or removed files, and
        # is the safe way just after one: the added files' own events may still come
        relist = sync.structural or self._after_structural
        self.relists += relist
        self._write_sentinel(nonce, kind="relist" if relist else "exact" if exact else "fast")
        return proc, nonce

    def _late(self, proc: _Process, tree: str) -> bool:
        """Whether pyright printed reports after the one the last check gave (a late event)."""
        with proc.cond:
            extra = len(proc.docs) - proc.matched - 1 if proc.matched >= 0 else 0
        if extra > 0:
            self.late += 1
            self._log(
                f"resident pyright: {extra} more report(s) came after the one given for the"
                f" last check (before tree {tree[:12]}): a late file event or a library change"
            )
        return extra > 0

    def _config(self, gate: Gate, target: Target) -> str:
        config = pyright_config_outside(
            pyright_config(gate, self.folder.path, target.strict, target.root),
            self.folder.path,
            self.config_dir,
        )
        include = [str(p) for p in cast(list[Any], config.get("include") or [])]
        config["include"] = [*include, _SYNC_DIR]
        return json.dumps(config, sort_keys=True)

    def _write_config(self, text: str) -> None:
        if self.config_dir.exists():
            shutil.rmtree(self.config_dir)
        (self.config_dir / _SYNC_DIR).mkdir(parents=True)
        (self.config_dir / _CONFIG).write_text(text, encoding="utf-8")
        self._config_text = text
        self._sentinel = None

    def _tampered_config(self) -> bool:
        """The config file or the sentinel folder is not what the kernel wrote."""
        try:
            if (self.config_dir / _CONFIG).read_text(encoding="utf-8") != self._config_text:
                return True
            names = sorted(os.listdir(self.config_dir))
            inside = sorted(os.listdir(self.config_dir / _SYNC_DIR))
        except OSError:
            return True
        wanted = sorted({_CHANGED_SENTINEL, _FAST_SENTINEL, *self._sentinels})
        return names != sorted([_CONFIG, _SYNC_DIR]) or inside != wanted

    def _write_sentinel(self, nonce: str, *, kind: str, again: bool = False) -> None:
        """An error naming the nonce: in `builtins.pyi` ("exact"), in `_seed_sync.py` ("fast"),
        or, to make pyright re-list and re-read every file, in a file of a new name ("relist";
        `again`: one more, the earlier ones kept)."""
        sync_dir = self.config_dir / _SYNC_DIR
        # the comment keeps the error whatever the project's config says of the rule
        text = f'# pyright: reportAssignmentType=error\n_seed_sync: int = "{nonce}"\n'
        lasting = (_CHANGED_SENTINEL, _FAST_SENTINEL)
        if not again:
            for old in sync_dir.iterdir():
                if old.name not in lasting:
                    old.unlink()
            self._sentinels = []
        if kind == "relist":
            self._sentinel = sync_dir / f"{SENTINEL_PREFIX}{secrets.token_hex(12)}.py"
            self._sentinels.append(self._sentinel.name)
        else:
            self._sentinel = sync_dir / (_CHANGED_SENTINEL if kind == "exact" else _FAST_SENTINEL)
        for name in lasting:
            if not (sync_dir / name).exists():
                (sync_dir / name).write_text(text, encoding="utf-8")
        self._sentinel.write_text(text, encoding="utf-8")
        self._kind = kind

    def _start(self, target: Target, identity: tuple[Any, ...]) -> _Process:
        argv = [sys.executable, "-m", "pyright", "--watch", "--outputjson"]
        argv += ["-p", str(self.config_dir / _CONFIG), "--pythonpath", target.python]
        env = tool_env({"NODE_OPTIONS": f"--max-old-space-size={self.memory_mb}"})
        popen = subprocess.Popen(
            argv,
            cwd=self.folder.path,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        procs.register_known(popen.pid)
        proc = _Process(popen=popen, identity=identity)
        proc.threads = [
            threading.Thread(target=proc.read_stdout, daemon=True, name="pyright-out"),
            threading.Thread(target=proc.read_stderr, daemon=True, name="pyright-err"),
        ]
        for thread in proc.threads:
            thread.start()
        self._proc = proc
        self._started_at = time.monotonic()
        self.restarts += 1
        return proc

    def _wait(self, proc: _Process, nonce: str, deadline: float, *, nudge: bool) -> dict[str, Any]:
        """The first report naming the nonce in a sentinel's error.

        The watcher of a pyright that has just finished its first analysis may still be
        setting itself up and miss an event: with `nudge` (a pyright started less than YOUNG_S
        ago), the sentinel is written again whenever pyright stays silent for NUDGE_S (the same
        nonce and kind: any such report will do). Waits MAX_WAIT_S at most.
        """
        sync_dir = str(self.config_dir / _SYNC_DIR) + os.sep
        quiet_since = time.monotonic()
        deadline = min(deadline, quiet_since + MAX_WAIT_S)
        with proc.cond:
            seen = len(proc.docs)
            while True:
                for index, doc in enumerate(proc.docs):
                    items = cast(list[dict[str, Any]], doc.get("generalDiagnostics") or [])
                    if any(
                        str(i.get("file", "")).startswith(sync_dir)
                        and nonce in str(i.get("message", ""))
                        for i in items
                    ):
                        proc.matched = index
                        return doc
                if not proc.alive():
                    words = proc.stderr_tail.decode(errors="replace").strip()
                    raise _Stale(f"pyright exited ({proc.popen.poll()}): {words[-300:]}")
                now = time.monotonic()
                left = deadline - now
                if left <= 0:
                    raise _Stale("pyright did not report the synced state in time")
                if len(proc.docs) != seen:
                    seen, quiet_since = len(proc.docs), now
                if nudge and now - quiet_since > NUDGE_S:
                    self._log("resident pyright: no report yet; writing the sentinel again")
                    self._write_sentinel(nonce, kind=self._kind, again=True)
                    quiet_since = now
                proc.cond.wait(min(left, 0.5))

    def _measurement(self, doc: dict[str, Any], duration: float) -> Measurement:
        from kernel.measuring import measure  # measure may import this module: resolve at call time

        sync_dir = str(self.config_dir / _SYNC_DIR) + os.sep
        items = [
            i
            for i in cast(list[dict[str, Any]], doc.get("generalDiagnostics") or [])
            if not str(i.get("file", "")).startswith(sync_dir)
        ]
        version = str(doc.get("version", ""))
        if self._proc is not None and version and version != self._proc.identity[2]:
            self._log(f"resident pyright: it reports version {version}; restarting next time")
            self._stop()
        diagnostics = measure.pyright_diagnostics({"generalDiagnostics": items}, self.folder.path)
        return Measurement(
            tool=Tool.PYRIGHT,
            ran=True,
            exit_code=1 if diagnostics else 0,
            diagnostics=tuple(diagnostics),
            duration_s=duration,
        )

    def _cold(
        self,
        tree: str,
        gate: Gate,
        target: Target,
        timeout_s: float,
        store: ObjectStore | None,
    ) -> Measurement:
        """A cold `run_pyright` on a fresh export of the tree (what the kernel did before)."""
        from kernel.isolation import trees
        from kernel.measuring import measure

        with tempfile.TemporaryDirectory(prefix="seed-pyright-cold-") as raw:
            export = Path(raw) / "tree"
            trees.export_tree(self.root, tree, export, store)
            return measure.run_pyright(export, gate, target, timeout_s)

    def _over_memory(self, proc: _Process) -> bool:
        return group_rss_bytes(proc.popen.pid) > self.memory_mb * 1024 * 1024

    @staticmethod
    def _signal(proc: _Process, sig: signal.Signals) -> bool:
        try:
            os.killpg(proc.popen.pid, sig)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    def _stop(self) -> None:
        proc = self._proc
        self._proc = None
        if proc is None:
            return
        pgid = proc.popen.pid
        # once every member is gone (and reaped) the group id may be another's: signal only
        # while a member (a zombie too) still holds it
        if proc.popen.poll() is None or procs.group_members(pgid, zombies=True):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGCONT)  # a stopped group would not see SIGTERM
            procs.end_group(pgid, grace_s=2.0)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.popen.wait(timeout=5)
        procs.forget_known(pgid)
        for thread in proc.threads:
            thread.join(timeout=5)  # they close the pipes themselves, at end of file
