"""Integrity of the user's checkout while an agent runs.

Before the agent starts, the kernel takes a snapshot of the checkout: HEAD, every ref,
.git/config and the hooks, the bytes of every protected file, and the status of tracked
and untracked files. After the run (or, after a crash, at the next start) it compares:

- a change to a protected file, .git/config or a hook is SANDBOX_VIOLATION: the changed
  bytes are saved under history/<iteration>/integrity/, and the file is put back to the
  exact bytes (and mode) it had, or removed if it did not exist;
- a change to HEAD or a ref is SANDBOX_VIOLATION too; it is saved and reported but not
  undone (moving a ref back could hide a commit a person made);
- any other change in the checkout is listed (the person may be working there), never undone.

The snapshot and the bytes of what it protects are kept under <git-common-dir>/seed/integrity/
so that a daemon killed during the run can still restore them.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kernel import gitops, seal
from kernel.fsutil import atomic_write_bytes, atomic_write_text, unique_path
from kernel.globs import matches_any
from kernel.snapshot import (
    MAX_KEPT_BYTES,
    MISSING,
    UNWATCHED,
    FileState,
    Snapshot,
    clear,
    describe_head,
    git_paths,
    listed_files,
    make_parents,
    protected_paths,
    read_state,
    replace_file,
    side_file,
    under,
    verb,
)


@dataclass
class Report:
    """What the comparison found."""

    violations: list[str] = field(default_factory=list[str])
    """SANDBOX_VIOLATION evidence: protected files, HEAD, refs, config, hooks."""
    changes: list[str] = field(default_factory=list[str])
    """Other changes in the checkout (listed, never undone)."""
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
        self.protected = tuple(protected)
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
        for label, path in git_paths(root, self.common, self.git_dir).items():
            state, data = read_state(path)
            if state.kind != "missing":
                git_files[label] = state
                if keep:
                    self._keep(state, data)
        listed = listed_files(root)
        protected: dict[str, FileState] = {}
        for rel in protected_paths(root, self.protected, listed):
            if side_file(rel):
                continue
            state, data = read_state(root / rel, root)
            protected[rel] = state
            if keep:
                self._keep(state, data)
        files: dict[str, tuple[int, int, int]] = {}
        for rel in listed:
            if rel in protected or under(rel, UNWATCHED) or matches_any(rel, self.protected):
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

    def begin(self, iteration_id: str) -> Snapshot:
        """Take the snapshot before an agent run and persist it (with the bytes it protects)."""
        snapshot = self.take(iteration_id)
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

    def check(self, before: Snapshot, evidence_dir: Path, *, person: bool = False) -> Report:
        """Compare the checkout with the snapshot; restore what is protected; list the rest.

        With person (the run was sandboxed, so it could not write here), every change is a
        person's: listed, never restored, never a violation.
        """
        report = Report()
        if person:
            found = self._check(before, evidence_dir, restore=False)
            report.changes = [
                f"{line} (by a person: the sandbox kept the agent out)" for line in found.violations
            ]
            report.changes += found.changes
            report.problems = found.problems
            return report
        return self._check(before, evidence_dir, restore=True)

    def _check(self, before: Snapshot, evidence_dir: Path, *, restore: bool) -> Report:
        report = Report()
        after = self.take(before.iteration_id, keep=False)
        saved: list[dict[str, str]] = []

        def save(label: str, path: Path, old: FileState, state: FileState) -> str:
            if state.kind == "missing":
                saved.append({"what": label, "saved": "", "before": old.sha, "after": ""})
                return ""
            # never a folder named .git inside history/: git would take it for a repository
            name = "git-dir/" + label[5:] if label.startswith(".git/") else label.lstrip("/")
            if state.kind == "symlink":
                name += ".symlink"
            try:
                data = (
                    os.readlink(path).encode("utf-8", errors="surrogateescape") + b"\n"
                    if state.kind == "symlink"
                    else path.read_bytes()
                )
                target = _free(evidence_dir / "integrity", name)
                target.write_bytes(data)
            except OSError as exc:
                report.problems.append(f"could not save {label}: {exc.strerror or exc}")
                return ""
            rel = target.relative_to(evidence_dir).as_posix()
            saved.append({"what": label, "saved": rel, "before": old.sha, "after": state.sha})
            return rel

        if after.head != before.head or after.head_commit != before.head_commit:
            report.violations.append(
                f"HEAD of the checkout changed: {describe_head(before.head, before.head_commit)} -> "
                f"{describe_head(after.head, after.head_commit)} (not undone: check `git reflog`)"
            )
        for name in sorted(set(before.refs) | set(after.refs)):
            old, new = before.refs.get(name), after.refs.get(name)
            if old != new:
                report.violations.append(
                    f"ref {name} changed: {(old or 'absent')[:12]} -> {(new or 'absent')[:12]} "
                    "(not undone)"
                )
        if after.refs != before.refs:
            folder = evidence_dir / "integrity"
            folder.mkdir(parents=True, exist_ok=True)
            for label, refs in (("refs.before", before.refs), ("refs.after", after.refs)):
                (folder / label).write_text(
                    "".join(f"{v} {k}\n" for k, v in sorted(refs.items())), encoding="utf-8"
                )
        paths = git_paths(self.root, self.common, self.git_dir)
        for label in sorted(set(before.git_files) | set(after.git_files)):
            old = before.git_files.get(label, MISSING)
            new = after.git_files.get(label, MISSING)
            if old == new:
                continue
            path = paths.get(label) or self._label_path(label)
            kept = save(label, path, old, new)
            done = self._restore(path, old, report) if restore else "left as it is"
            report.violations.append(
                f"{label} was {verb(old, new)}; {done}" + (f" (saved as {kept})" if kept else "")
            )
        for rel in sorted(set(before.protected) | set(after.protected)):
            old = before.protected.get(rel, MISSING)
            new = after.protected.get(rel, MISSING)
            if old == new:
                continue
            path = self.root / rel
            kept = save(rel, path, old, new)
            done = self._restore(path, old, report) if restore else "left as it is"
            report.violations.append(
                f"protected {rel} was {verb(old, new)} in your checkout; {done}"
                + (f" (saved as {kept})" if kept else "")
            )
        for rel in protected_paths(self.root, self.protected, listed_files(self.root)):
            if restore and side_file(rel):
                with contextlib.suppress(OSError):
                    if (self.root / rel).lstat().st_mtime_ns >= before.taken_ns:
                        (self.root / rel).unlink()
                        report.changes.append(
                            f"removed {rel}: compiled code written under a protected path during the run (Python rebuilds it)"
                        )
        for rel in sorted(set(before.files) | set(after.files)):
            old_sig, new_sig = before.files.get(rel), after.files.get(rel)
            if old_sig == new_sig:
                continue
            if old_sig is None:
                report.changes.append(f"created: {rel}")
            elif new_sig is None or new_sig[0] < 0:
                report.changes.append(f"deleted: {rel}")
            else:
                report.changes.append(f"modified: {rel}")
        if saved or report.violations:
            evidence_dir.mkdir(parents=True, exist_ok=True)
            atomic_write_text(
                evidence_dir / "integrity.json",
                json.dumps(
                    {
                        "violations": report.violations,
                        "changes": report.changes,
                        "problems": report.problems,
                        "saved": saved,
                    },
                    indent=2,
                )
                + "\n",
            )
        return report

    def _label_path(self, label: str) -> Path:
        if label.startswith(".git/"):
            return self.common / label.removeprefix(".git/")
        return Path(label)

    def _restore(self, path: Path, state: FileState, report: Report) -> str:
        """Put one file back to its snapshot state; say what was done."""
        try:
            if state.kind == "missing":
                clear(path)
                return "removed"
            blob = self.blobs / state.sha
            if not blob.is_file():
                report.problems.append(f"{path}: its earlier bytes were not kept; not restored")
                return "NOT restored (its earlier bytes were not kept)"
            data = blob.read_bytes()
            if hashlib.sha256(data).hexdigest() != state.sha:
                report.problems.append(f"{path}: its kept bytes were altered; not restored")
                return "NOT restored (its kept bytes were altered)"
            make_parents(self.root, path)
            if path.is_dir() and not path.is_symlink():
                report.problems.append(f"{path}: a directory now stands there; not restored")
                return "NOT restored (a directory stands there now)"
            if state.kind == "symlink":
                clear(path)
                os.symlink(data.decode("utf-8", errors="surrogateescape"), path)
            else:
                replace_file(path, data, state.mode)
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
