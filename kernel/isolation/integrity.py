"""Integrity of the user's checkout while an agent runs.

Before the agent starts, the kernel takes a snapshot of the checkout: HEAD, every ref,
.git/config and the hooks, the bytes of every protected file, and the status of tracked
and untracked files. After the run (or, after a crash, at the next start) it compares, by
one rule for both: with the sandbox on, a change no writable place of the run reached is a
person's (listed, left as it is, never a violation); the rest is the run's (with the sandbox
off, everything is reachable):

- the run's change to a protected file, .git/config or a hook is SANDBOX_VIOLATION: the
  changed bytes are saved under history/<iteration>/integrity/, and the file is put back to
  the exact bytes (and mode) it had, or removed if it did not exist;
- the run's change to HEAD or a ref is SANDBOX_VIOLATION too; it is saved and reported but
  not undone (moving a ref back could hide a commit a person made);
- any other change in the checkout is listed (the person may be working there), never undone;
- after a crash nothing is put back: since the daemon died a person may have edited the same
  file, and no byte tells the two apart. The change is kept, its bytes and the earlier ones
  saved; with the sandbox off it is `undecided` (the caller halts and says why).

The snapshot and the bytes of what it protects are kept under <git-common-dir>/seed/integrity/
so that a daemon killed during the run can still restore them. Files are identified by
repository-relative path (git's own files by a label such as .git/config); a FileState holds
what is needed to tell a change and to restore it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from kernel.contracts import PERSONS_FILES, matches_any
from kernel.fsutil import atomic_write_bytes, atomic_write_text, unique_path
from kernel.isolation import gitops, seal

KERNEL_OWNED = ("history", ".git", ".venv")
"""Protected, but written by the kernel itself (history/, the bootstrap's .venv, read-only to
every run) or checked on their own (.git)."""
UNWATCHED = ("history", "inbox", ".git")
"""Top-level folders whose changes are not the checkout's (records, tasks, git's own files)."""
MAX_KEPT_BYTES = 64 * 1024 * 1024
"""A protected file larger than this is hashed but not kept (it could not be restored)."""

_SIDE_DIRS = ("__pycache__",)
_SIDE_SUFFIXES = (".pyc", ".pyo")


@dataclass(frozen=True)
class FileState:
    """A file as the snapshot saw it."""

    kind: str
    """file, symlink or missing."""
    sha: str = ""
    """sha256 of the bytes (of the link target for a symlink)."""
    mode: int = 0


MISSING = FileState("missing")


@dataclass
class Snapshot:
    """The checkout before the agent ran."""

    iteration_id: str
    head: str
    """The bytes of the checkout's HEAD file (a symbolic ref or a commit id)."""
    head_commit: str
    refs: dict[str, str]
    git_files: dict[str, FileState]
    """config, config.worktree and hooks, by label (.git/config, .git/hooks/pre-commit)."""
    protected: dict[str, FileState]
    """Protected files of the checkout, by repository-relative path."""
    files: dict[str, tuple[int, int, int]]
    """Other tracked and untracked files: (size, mtime_ns, mode)."""
    taken_ns: int = 0
    """When the snapshot was taken (time.time_ns())."""
    writable: tuple[str, ...] = ()
    """Absolute paths the run's sandbox profile had writable (the kernel's record of its binds,
    made before the run): a change under one of them is the run's, never a person's."""
    sandboxed: bool = False
    """Whether the run was sandboxed (the kernel's record): then a change no writable place
    reached is a person's, in the live check and in recovery alike."""

    def to_json(self) -> str:
        """Serialised for the crash-recovery copy."""
        return json.dumps(
            {
                "iteration_id": self.iteration_id,
                "head": self.head,
                "head_commit": self.head_commit,
                "refs": self.refs,
                "git_files": {k: vars(v) for k, v in self.git_files.items()},
                "protected": {k: vars(v) for k, v in self.protected.items()},
                "files": self.files,
                "taken_ns": self.taken_ns,
                "writable": list(self.writable),
                "sandboxed": self.sandboxed,
            }
        )

    @staticmethod
    def from_json(text: str) -> Snapshot:
        """Read a serialised snapshot."""
        data = cast(dict[str, Any], json.loads(text))

        def states(raw: Any) -> dict[str, FileState]:
            return {
                str(k): FileState(str(v["kind"]), str(v.get("sha", "")), int(v.get("mode", 0)))
                for k, v in cast(dict[str, dict[str, Any]], raw).items()
            }

        return Snapshot(
            iteration_id=str(data["iteration_id"]),
            head=str(data["head"]),
            head_commit=str(data["head_commit"]),
            refs={str(k): str(v) for k, v in cast(dict[str, Any], data["refs"]).items()},
            git_files=states(data["git_files"]),
            protected=states(data["protected"]),
            files={
                str(k): (int(v[0]), int(v[1]), int(v[2]))
                for k, v in cast(dict[str, list[Any]], data["files"]).items()
            },
            taken_ns=int(data.get("taken_ns", 0)),
            writable=tuple(str(p) for p in cast(list[Any], data.get("writable", []))),
            sandboxed=data.get("sandboxed") is True,
        )


def _side_file(rel: str) -> bool:
    """Compiled code and caches (Python rebuilds them)."""
    parts = rel.split("/")
    return any(p in _SIDE_DIRS for p in parts[:-1]) or rel.endswith(_SIDE_SUFFIXES)


def _under(rel: str, tops: Iterable[str]) -> bool:
    """Whether a repository-relative path is one of the folders or inside one."""
    return any(rel == top or rel.startswith(top + "/") for top in tops)


def _read_state(path: Path, root: Path | None = None) -> tuple[FileState, bytes | None]:
    """A file's state and bytes; below root, a path through a symlinked folder is missing."""
    if root is not None and _through_symlink(root, path):
        return MISSING, None
    try:
        info = path.lstat()
    except OSError:
        return MISSING, None
    if stat.S_ISLNK(info.st_mode):
        target = os.readlink(path).encode("utf-8", errors="surrogateescape")
        return FileState("symlink", hashlib.sha256(target).hexdigest(), 0), target
    if not stat.S_ISREG(info.st_mode):
        return FileState("missing"), None
    try:
        data = path.read_bytes()
    except OSError:
        return FileState("file", "unreadable", stat.S_IMODE(info.st_mode)), None
    return FileState("file", hashlib.sha256(data).hexdigest(), stat.S_IMODE(info.st_mode)), data


def _through_symlink(root: Path, path: Path) -> bool:
    try:
        parts = path.parent.relative_to(root).parts
    except ValueError:
        return False
    folder = root
    for part in parts:
        folder = folder / part
        if folder.is_symlink():
            return True
    return False


def _listed_files(root: Path) -> list[str]:
    """Tracked and untracked (not ignored) files of the checkout."""
    raw = gitops.git(
        root, "ls-files", "-z", "--cached", "--others", "--exclude-standard", check=False
    ).stdout
    return sorted({p for p in raw.decode("utf-8", errors="surrogateescape").split("\0") if p})


def _literal_prefix(pattern: str) -> str:
    parts: list[str] = []
    for part in pattern.strip().removeprefix("./").strip("/").split("/"):
        if any(c in part for c in "*?["):
            break
        parts.append(part)
    return "/".join(parts)


def _protected_paths(root: Path, patterns: Sequence[str], listed: Sequence[str]) -> list[str]:
    """Protected files, ignored ones included, under every pattern's literal folder."""
    wanted = [p for p in patterns if not _under(_literal_prefix(p), KERNEL_OWNED)]
    found = {p for p in listed if matches_any(p, wanted) and not _under(p, KERNEL_OWNED)}
    for pattern in wanted:
        prefix = _literal_prefix(pattern)
        if not prefix:
            continue
        base = root / prefix
        if base.is_symlink() or base.is_file():
            found.add(prefix)
        elif base.is_dir():
            for folder, dirs, names in os.walk(base):
                rel_dir = Path(folder).relative_to(root).as_posix()
                for name in (*names, *[d for d in dirs if (Path(folder) / d).is_symlink()]):
                    rel = f"{rel_dir}/{name}"
                    if matches_any(rel, wanted):
                        found.add(rel)
    return sorted(found)


def _hook_dirs(root: Path, common: Path) -> list[Path]:
    dirs = [common / "hooks"]
    configured = gitops.git(
        root, "config", "--file", str(common / "config"), "--get", "core.hooksPath", check=False
    )
    value = configured.text().strip()
    if configured.ok and value and value != "/dev/null":
        path = Path(os.path.expanduser(value))
        dirs.append(path if path.is_absolute() else root / path)
    return dirs


def _git_paths(root: Path, common: Path, git_dir: Path) -> dict[str, Path]:
    """config, config.worktree and every hook, by a label a person recognises."""
    out = {".git/config": common / "config", ".git/config.worktree": git_dir / "config.worktree"}
    for folder in _hook_dirs(root, common):
        if not folder.is_dir():
            continue
        for path in sorted(folder.rglob("*")):
            if path.is_dir() and not path.is_symlink():
                continue
            try:
                label = ".git/" + path.relative_to(common).as_posix()
            except ValueError:
                label = str(path)
            out[label] = path
    return out


def _describe_head(head: str, commit: str) -> str:
    return f"{head.strip()[:60]} at {commit[:12] or 'no commit'}"


def _verb(old: FileState, new: FileState) -> str:
    if old.kind == "missing":
        return "created"
    if new.kind == "missing":
        return "deleted"
    if old.kind != new.kind:
        return f"replaced by a {new.kind}"
    if old.sha == new.sha:
        return f"changed in mode ({oct(old.mode)} -> {oct(new.mode)})"
    return "changed"


def _clear(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()


def _make_parents(root: Path, path: Path) -> None:
    """Real directories from root down to path's parent: a symlink or file in the way is removed."""
    try:
        rel = path.parent.relative_to(root)
    except ValueError:
        path.parent.mkdir(parents=True, exist_ok=True)
        return
    folder = root
    for part in rel.parts:
        folder = folder / part
        if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
            folder.unlink()
        if not folder.exists():
            folder.mkdir()


def _replace_file(path: Path, data: bytes, mode: int) -> None:
    """Write bytes atomically in place of whatever is there (a symlink is replaced, not followed)."""
    atomic_write_bytes(path, data, mode or 0o644)


@dataclass
class Report:
    """What the comparison found."""

    violations: list[str] = field(default_factory=list[str])
    """SANDBOX_VIOLATION evidence: protected files, HEAD, refs, config, hooks."""
    changes: list[str] = field(default_factory=list[str])
    """Other changes in the checkout (listed, never undone)."""
    undecided: list[str] = field(default_factory=list[str])
    """After a crash of an unsandboxed run: changes to what is protected that may be the run's
    or a person's since (kept as they are, their bytes saved; the caller halts)."""
    problems: list[str] = field(default_factory=list[str])
    """Things the kernel could not put back (said, never hidden)."""


class Checkout:
    """Takes snapshots of one checkout and checks it against them."""

    def __init__(self, root: Path, state_dir: Path, protected: Sequence[str]) -> None:
        self.root = root
        self.state = state_dir
        self.folder = state_dir / "integrity"
        self.blobs = self.folder / "blobs"
        self.snapshot_path = self.folder / "snapshot.json"
        # the person edits these while an agent runs; the guard keeps agents out of them
        self.protected = tuple(p for p in protected if p not in PERSONS_FILES)
        self.common = gitops.common_dir(root)
        self.git_dir = gitops.git_dir(root)

    # -- before -------------------------------------------------------------------

    def _keep(self, state: FileState, data: bytes | None) -> None:
        if data is None or len(data) > MAX_KEPT_BYTES:
            return
        blob = self.blobs / (state.sha or "none")
        if not blob.exists():
            atomic_write_bytes(blob, data)

    def take(self, iteration_id: str, *, keep: bool = True) -> Snapshot:
        """Snapshot the checkout; with keep, its protected bytes are stored for restoring."""
        root = self.root
        taken_ns = time.time_ns()
        head_file = self.git_dir / "HEAD"
        head = head_file.read_text(encoding="utf-8", errors="replace") if head_file.exists() else ""
        refs_raw = gitops.git(
            root, "for-each-ref", "--format=%(refname) %(objectname)", check=False
        ).text()
        # remote-tracking refs move whenever something fetches (an editor's auto-fetch):
        # they are not the user's work, and watching them would halt the daemon for nothing
        refs = {
            name: oid
            for name, oid in (line.split(" ", 1) for line in refs_raw.splitlines() if " " in line)
            if not name.startswith("refs/remotes/")
        }
        git_files: dict[str, FileState] = {}
        for label, path in _git_paths(root, self.common, self.git_dir).items():
            state, data = _read_state(path)
            if state.kind != "missing":
                git_files[label] = state
                if keep:
                    self._keep(state, data)
        listed = _listed_files(root)
        protected: dict[str, FileState] = {}
        for rel in _protected_paths(root, self.protected, listed):
            if _side_file(rel):
                continue
            state, data = _read_state(root / rel, root)
            protected[rel] = state
            if keep:
                self._keep(state, data)
        files: dict[str, tuple[int, int, int]] = {}
        for rel in listed:
            if rel in protected or _under(rel, UNWATCHED) or matches_any(rel, self.protected):
                continue
            try:
                info = (root / rel).lstat()
            except OSError:
                files[rel] = (-1, 0, 0)
                continue
            files[rel] = (info.st_size, info.st_mtime_ns, info.st_mode)
        return Snapshot(
            iteration_id=iteration_id,
            head=head,
            head_commit=gitops.head(root) or "",
            refs=refs,
            git_files=git_files,
            protected=protected,
            files=files,
            taken_ns=taken_ns,
        )

    def begin(
        self, iteration_id: str, writable: Sequence[Path] = (), *, sandboxed: bool = False
    ) -> Snapshot:
        """Take the snapshot before an agent run and persist it (with the bytes it protects),
        with whether the run is sandboxed and the places its sandbox will have writable."""
        snapshot = self.take(iteration_id)
        snapshot.writable = tuple(os.path.realpath(p) for p in writable)
        snapshot.sandboxed = sandboxed
        body = snapshot.to_json()
        sealed = json.dumps({"body": body, "seal": seal.seal(self.state, body.encode())})
        atomic_write_text(self.snapshot_path, sealed)
        self._prune(snapshot)
        return snapshot

    def saved(self) -> Snapshot | None:
        """The persisted snapshot of a run that did not finish (None when there is none)."""
        if not self.snapshot_path.exists():
            return None
        try:
            sealed = json.loads(self.snapshot_path.read_text(encoding="utf-8"))
            body = str(sealed["body"])
            if not seal.valid(self.state, body.encode(), str(sealed["seal"])):
                return None  # not the kernel's: never restored from
            return Snapshot.from_json(body)
        except (OSError, ValueError, KeyError, TypeError, IndexError):
            return None

    def done(self) -> None:
        """The run is checked: forget the snapshot (the blobs stay for the next one)."""
        self.snapshot_path.unlink(missing_ok=True)

    def _prune(self, snapshot: Snapshot) -> None:
        if not self.blobs.is_dir():
            return
        wanted = {s.sha for s in (*snapshot.protected.values(), *snapshot.git_files.values())}
        for blob in self.blobs.iterdir():
            if blob.name not in wanted:
                blob.unlink(missing_ok=True)

    # -- after ------------------------------------------------------------------

    def check(self, before: Snapshot, evidence_dir: Path, *, after_crash: bool = False) -> Report:
        """Compare the checkout with the snapshot; restore what is protected; list the rest.

        A sandboxed run's (the snapshot says), a change under a place its profile had writable
        (the snapshot's record of its binds) is the run's: a violation, put back; any other
        change is a person's: listed, never restored, never a violation. After a crash
        (`after_crash`) nothing is put back (see the module's docstring).
        """
        report = Report()
        person = before.sandboxed
        after = self.take(before.iteration_id, keep=False)
        evidence = _Evidence(evidence_dir, report, self.blobs)
        reached = _Reach(before.writable if person else ("/",), after_crash)
        self._head_and_refs(before, after, evidence_dir, reached, report)
        paths = _git_paths(self.root, self.common, self.git_dir)
        for label, old, new in _changed(before.git_files, after.git_files):
            path = paths.get(label) or self._label_path(label)
            ours = reached(path)
            tail = self._put_back(evidence, label, path, (old, new), ours, reached.after_crash)
            reached.say(report, path, f"{label} was {_verb(old, new)}; {tail}")
        for rel, old, new in _changed(before.protected, after.protected):
            ours = reached(self.root / rel)
            tail = self._put_back(
                evidence, rel, self.root / rel, (old, new), ours, reached.after_crash
            )
            reached.say(
                report,
                self.root / rel,
                f"protected {rel} was {_verb(old, new)} in your checkout; {tail}",
            )
        if not person:
            report.changes += self._remove_side_files(before.taken_ns)
        for line, rel in _listed_changes(before.files, after.files):
            if person and reached(self.root / rel):
                report.violations.append(
                    f"{line}, under a place the sandbox had writable (not restored: only protected files' bytes are kept)"
                )
            else:
                report.changes.append(line)
        evidence.write()
        return report

    def _head_and_refs(
        self, before: Snapshot, after: Snapshot, evidence_dir: Path, reached: _Reach, report: Report
    ) -> None:
        """HEAD and refs that moved: the run's (put back) where a writable bind reached them,
        else a person's (sandboxed) or a violation never undone (unsandboxed)."""
        for line, name, old in _head_and_refs(before, after, evidence_dir):
            path = self.git_dir / "HEAD" if name == "HEAD" else self.common / name
            if not (reached.person and (reached(path) or reached(self.common / "packed-refs"))):
                reached.say(report, path, line)
            elif reached.after_crash:
                report.violations.append(line)
            else:
                report.violations.append(
                    line.replace("(not undone", "(put back") + self._reset(name, old)
                )

    def _reset(self, name: str, old: str) -> str:
        """Put HEAD or a ref back to the snapshot's value; '' or why it could not be."""
        if name == "HEAD":
            with contextlib.suppress(OSError):
                atomic_write_text(self.git_dir / "HEAD", old)
                return ""
            return "; HEAD could NOT be put back"
        args = ("update-ref", "--no-deref", name, old) if old else ("update-ref", "-d", name)
        done = gitops.git(self.root, *args, check=False)
        return "" if done.ok else f"; {name} could NOT be put back"

    def _put_back(
        self,
        evidence: _Evidence,
        label: str,
        path: Path,
        change: tuple[FileState, FileState],
        restore: bool,
        after_crash: bool = False,
    ) -> str:
        """Save a changed file's bytes as evidence and restore it; what was done, in words.
        After a crash it stays as it is, and its earlier bytes are saved beside."""
        old, new = change
        kept = evidence.save(label, path, old, new)
        if restore and after_crash:
            earlier = evidence.earlier(label, old)
            saved = [f"saved as {kept}"] if kept else []
            saved += [f"its earlier bytes as {earlier}"] if earlier else []
            return (
                "left as it is: after a crash, a later edit of yours cannot be told from the run's"
                + (f" ({'; '.join(saved)})" if saved else "")
            )
        done = self._restore(path, old, evidence.report) if restore else "left as it is"
        return done + (f" (saved as {kept})" if kept else "")

    def _remove_side_files(self, since_ns: int) -> list[str]:
        """Compiled code written under a protected path during the run, removed."""
        removed: list[str] = []
        for rel in _protected_paths(self.root, self.protected, _listed_files(self.root)):
            if _side_file(rel):
                with contextlib.suppress(OSError):
                    if (self.root / rel).lstat().st_mtime_ns >= since_ns:
                        (self.root / rel).unlink()
                        removed.append(
                            f"removed {rel}: compiled code written under a protected path during the run (Python rebuilds it)"
                        )
        return removed

    def _label_path(self, label: str) -> Path:
        if label.startswith(".git/"):
            return self.common / label.removeprefix(".git/")
        return Path(label)

    def _restore(self, path: Path, state: FileState, report: Report) -> str:
        """Put one file back to its snapshot state; say what was done."""
        try:
            if state.kind == "missing":
                _clear(path)
                return "removed"
            blob = self.blobs / state.sha
            if not blob.is_file():
                report.problems.append(f"{path}: its earlier bytes were not kept; not restored")
                return "NOT restored (its earlier bytes were not kept)"
            data = blob.read_bytes()
            if hashlib.sha256(data).hexdigest() != state.sha:
                report.problems.append(f"{path}: its kept bytes were altered; not restored")
                return "NOT restored (its kept bytes were altered)"
            _make_parents(self.root, path)
            if path.is_dir() and not path.is_symlink():
                report.problems.append(f"{path}: a directory now stands there; not restored")
                return "NOT restored (a directory stands there now)"
            if state.kind == "symlink":
                _clear(path)
                os.symlink(data.decode("utf-8", errors="surrogateescape"), path)
            else:
                _replace_file(path, data, state.mode)
            return "restored to its exact earlier bytes"
        except OSError as exc:
            report.problems.append(f"{path}: could not restore: {exc.strerror or exc}")
            return f"NOT restored ({exc.strerror or exc})"


def _free(folder: Path, name: str) -> Path:
    """A new file for saved bytes: folder/name, or a flat name when a file is in the way."""
    target = folder / name
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        target = folder / name.replace("/", "__")
        target.parent.mkdir(parents=True, exist_ok=True)
    return unique_path(target)


@dataclass
class _Evidence:
    """The changed bytes a check saves under the iteration's folder, and the list of them."""

    folder: Path
    report: Report
    blobs: Path
    """The snapshot's kept bytes (the earlier bytes of a file not put back are copied out)."""
    saved: list[dict[str, str]] = field(default_factory=list[dict[str, str]])

    def earlier(self, label: str, old: FileState) -> str:
        """Keep a file's snapshot bytes under integrity/earlier/; where they went, or ""."""
        blob = self.blobs / old.sha
        with contextlib.suppress(OSError):
            data = blob.read_bytes() if old.kind != "missing" and blob.is_file() else b""
            if data and hashlib.sha256(data).hexdigest() == old.sha:
                target = _free(self.folder / "integrity" / "earlier", _name(label, old))
                target.write_bytes(data + (b"\n" if old.kind == "symlink" else b""))
                return target.relative_to(self.folder).as_posix()
        return ""

    def save(self, label: str, path: Path, old: FileState, state: FileState) -> str:
        """Keep a changed file's bytes; where they went (relative to the folder), or ""."""
        if state.kind == "missing":
            self.saved.append({"what": label, "saved": "", "before": old.sha, "after": ""})
            return ""
        name = _name(label, state)
        try:
            data = (
                os.readlink(path).encode("utf-8", errors="surrogateescape") + b"\n"
                if state.kind == "symlink"
                else path.read_bytes()
            )
            target = _free(self.folder / "integrity", name)
            target.write_bytes(data)
        except OSError as exc:
            self.report.problems.append(f"could not save {label}: {exc.strerror or exc}")
            return ""
        rel = target.relative_to(self.folder).as_posix()
        self.saved.append({"what": label, "saved": rel, "before": old.sha, "after": state.sha})
        return rel

    def write(self) -> None:
        """integrity.json, when anything was saved or violated."""
        report = self.report
        if not (self.saved or report.violations or report.undecided):
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        atomic_write_text(
            self.folder / "integrity.json",
            json.dumps(
                {
                    "violations": report.violations,
                    "changes": report.changes,
                    "undecided": report.undecided,
                    "problems": report.problems,
                    "saved": self.saved,
                },
                indent=2,
            )
            + "\n",
        )


def _name(label: str, state: FileState) -> str:
    """Where a file's bytes are saved: never a folder named .git inside history/ (git would
    take it for a repository); a symlink's target as a file of its own name."""
    name = "git-dir/" + label[5:] if label.startswith(".git/") else label.lstrip("/")
    return name + (".symlink" if state.kind == "symlink" else "")


def _head_and_refs(
    before: Snapshot, after: Snapshot, evidence_dir: Path
) -> list[tuple[str, str, str]]:
    """A moved HEAD or ref: (what happened, HEAD or the ref's name, its value before); both
    ref lists are saved when one moved."""
    violations: list[tuple[str, str, str]] = []
    if after.head != before.head or after.head_commit != before.head_commit:
        line = (
            f"HEAD of the checkout changed: {_describe_head(before.head, before.head_commit)} -> "
            f"{_describe_head(after.head, after.head_commit)} (not undone: check `git reflog`)"
        )
        violations.append((line, "HEAD", before.head))
    for name in sorted(set(before.refs) | set(after.refs)):
        old, new = before.refs.get(name), after.refs.get(name)
        if old != new:
            line = (
                f"ref {name} changed: {(old or 'absent')[:12]} -> {(new or 'absent')[:12]} "
                "(not undone)"
            )
            violations.append((line, name, old or ""))
    if after.refs != before.refs:
        folder = evidence_dir / "integrity"
        folder.mkdir(parents=True, exist_ok=True)
        for label, refs in (("refs.before", before.refs), ("refs.after", after.refs)):
            (folder / label).write_text(
                "".join(f"{v} {k}\n" for k, v in sorted(refs.items())), encoding="utf-8"
            )
    return violations


def _changed(
    before: dict[str, FileState], after: dict[str, FileState]
) -> list[tuple[str, FileState, FileState]]:
    """(name, before, after) of every file whose state differs, by name."""
    pairs = ((k, before.get(k, MISSING), after.get(k, MISSING)) for k in sorted({*before, *after}))
    return [(k, old, new) for k, old, new in pairs if old != new]


def _listed_changes(
    before: dict[str, tuple[int, int, int]], after: dict[str, tuple[int, int, int]]
) -> list[tuple[str, str]]:
    """Other files created, deleted or modified in the checkout: (what happened, path)."""
    changes: list[tuple[str, str]] = []
    for rel in sorted(set(before) | set(after)):
        old_sig, new_sig = before.get(rel), after.get(rel)
        if old_sig == new_sig:
            continue
        if old_sig is None:
            changes.append((f"created: {rel}", rel))
        elif new_sig is None or new_sig[0] < 0:
            changes.append((f"deleted: {rel}", rel))
        else:
            changes.append((f"modified: {rel}", rel))
    return changes


@dataclass(frozen=True)
class _Reach:
    """The places a run's sandbox had writable: what changed under one is the run's doing."""

    writable: tuple[str, ...]
    after_crash: bool = False
    """Recovery: with the sandbox off, a change to what is protected is undecided."""

    @property
    def person(self) -> bool:
        """Sandboxed: a change nothing writable reached is a person's."""
        return self.writable != ("/",)

    def __call__(self, path: Path) -> bool:
        """Whether a writable place is path or a folder above it (links resolved)."""
        real = os.path.realpath(path)
        return any(real == w or real.startswith(w.rstrip("/") + "/") for w in self.writable)

    def say(self, report: Report, path: Path, line: str) -> None:
        """A violation when the run could reach path, else a person's change (undecided after
        the crash of an unsandboxed run)."""
        if self(path) and not self.person and self.after_crash:
            report.undecided.append(line)
        elif self(path):
            report.violations.append(line)
        else:
            report.changes.append(
                f"{line} (by a person: no writable place of the sandbox reached it)"
            )
