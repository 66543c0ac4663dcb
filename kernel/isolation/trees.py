"""Trees the kernel builds itself: the candidate from the worktree's files, exports of a
tree into a fresh folder, and the commit of exactly the tree that was verified.

Nothing here reads the agent's index (its skip-worktree and assume-unchanged bits),
`info/exclude`, global excludes, attributes or filters: files are walked and hashed by the
kernel with `--no-filters` into a private object folder, untracked files follow the
`.gitignore` files of the base commit, and blobs reach the repository's own object store
only when a candidate is committed.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import pathspec

from kernel.isolation import gitops

SIDE_DIRS = frozenset(
    {"__pycache__", ".pytest_cache", ".ruff_cache", ".mypy_cache", ".hypothesis", ".git"}
)
"""Folders that are never part of a candidate (caches of tools, nested git folders)."""
_MAX_HOPS = 40


@dataclass(frozen=True)
class ObjectStore:
    """A private bare repository of the kernel's, borrowing the repository's objects.

    Candidate trees are built, diffed and exported here: none of the repository's own
    configuration, `info/attributes` or `info/exclude` applies, and new objects stay here
    until a candidate is committed.
    """

    path: Path
    repo_objects: Path

    def env(self) -> dict[str, str]:
        """Environment for git commands that read or write this store."""
        if not (self.path / "HEAD").is_file():
            self.path.mkdir(parents=True, exist_ok=True)
            gitops.git(self.path, "init", "--bare", "--quiet", "--template=", str(self.path))
        alternates = self.path / "objects" / "info" / "alternates"
        if not alternates.is_file():
            alternates.parent.mkdir(parents=True, exist_ok=True)
            alternates.write_text(f"{self.repo_objects}\n", encoding="utf-8")
        return {"GIT_DIR": str(self.path), "GIT_INDEX_FILE": str(self.path / "index")}


@dataclass
class Candidate:
    """The tree the kernel built from the agent's worktree, and how it differs from the base."""

    tree: str
    changes: list[gitops.Change] = field(default_factory=list[gitops.Change])
    inserted: int = 0
    deleted: int = 0
    oversized: list[tuple[str, int]] = field(default_factory=list[tuple[str, int]])
    """Files over max_file_bytes by their apparent size: never read, never hashed."""
    left_out: list[str] = field(default_factory=list[str])
    """Untracked files that are ignored, side files, or written by the baseline's tests."""


def _entries(
    root: Path, tree: str, env: dict[str, str] | None = None, only: Sequence[str] = ()
) -> Iterator[tuple[str, str, str]]:
    """(mode, object id, path) of every file in a tree (`only`: below these folders)."""
    raw = gitops.git(root, "ls-tree", "-r", "-z", "--full-tree", tree, "--", *only, env=env).stdout
    for item in raw.split(b"\0"):
        if not item:
            continue
        meta, _, path = item.partition(b"\t")
        mode, _kind, oid = meta.decode().split(" ")
        yield mode, oid, path.decode("utf-8", errors="surrogateescape")


def entries(
    root: Path, tree: str, env: dict[str, str] | None = None
) -> Iterator[tuple[str, str, str]]:
    """(mode, object id, path) of every entry of a tree (a store's, with its env)."""
    return _entries(root, tree, env)


def entry_map(
    root: Path, tree: str, env: dict[str, str] | None = None
) -> dict[str, tuple[str, str]]:
    """path: (mode, object id) of every entry of a tree."""
    return {p: (m, o) for m, o, p in _entries(root, tree, env)}


def tree_from_entries(
    root: Path, entries: Mapping[str, tuple[str, str]], store: ObjectStore
) -> str:
    """A tree in the store holding exactly these entries (path: (mode, object id))."""
    (store.path / "index").unlink(missing_ok=True)
    listed = sorted(entries.items(), key=lambda e: (e[1][0] == "160000", e[0]))
    lines = [
        f"{m} {'commit' if m == '160000' else 'blob'} {o}\t{p}".encode(
            "utf-8", errors="surrogateescape"
        )
        for p, (m, o) in listed
    ]
    return tree_from_lines(root, store.env(), lines)


def blob_id(data: bytes, oid_len: int) -> str:
    """git's object id of a blob with these bytes (sha1, or sha256 in a sha256 repository)."""
    digest = hashlib.sha256() if oid_len == 64 else hashlib.sha1()
    digest.update(b"blob %d\0" % len(data))
    digest.update(data)
    return digest.hexdigest()


def unlike_blobs(root: Path, old: str, new: str) -> list[str]:
    """Files that commit `new` changes from `old` whose bytes in the checkout are not its blobs."""
    raw = gitops.git(
        root, "diff", "--name-only", "-z", "--no-renames", "--diff-filter=AMT", old, new
    ).stdout
    changed = set(raw.decode("utf-8", errors="surrogateescape").split("\0")) - {""}
    differ: list[str] = []
    for mode, oid, path in _entries(root, new):
        if (
            path in changed
            and mode != "160000"
            and disk_blob_id(root / path, mode, len(oid)) != oid
        ):
            differ.append(path)
    return differ


def disk_blob_id(path: Path, mode: str, oid_len: int, limit: int = 0) -> str:
    """The blob id of what is on disk at path, read as a file of this git mode: '' when it is
    not one, or (limit) bigger. Never follows a link, never blocks on a FIFO."""
    try:
        if mode == "120000":
            return blob_id(os.fsencode(os.readlink(path)), oid_len) if path.is_symlink() else ""
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return ""
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or (limit and info.st_size > limit):
            return ""
        digest = hashlib.sha256() if oid_len == 64 else hashlib.sha1()
        digest.update(b"blob %d\0" % info.st_size)
        read = 0
        while chunk := handle.read(1 << 20):
            read += len(chunk)
            digest.update(chunk)
        return digest.hexdigest() if read == info.st_size else ""


def read_blobs(root: Path, oids: list[str], env: dict[str, str] | None = None) -> list[bytes]:
    """The contents of blobs, in order, from one `cat-file --batch`, each checked against its id."""
    if not oids:
        return []
    data = gitops.git(
        root, "cat-file", "--batch", env=env, stdin=("\n".join(oids) + "\n").encode()
    ).stdout
    out: list[bytes] = []
    at = 0
    for oid in oids:
        end = data.find(b"\n", at)
        header = data[at:end].split(b" ") if end >= 0 else []
        if len(header) < 3 or header[1] != b"blob" or not header[2].isdigit():
            raise gitops.GitError(f"cat-file: no blob {oid} in its output")
        size = int(header[2])
        blob = data[end + 1 : end + 1 + size]
        if blob_id(blob, len(oid)) != oid:
            raise gitops.GitError(f"cat-file: the bytes given for {oid} are not that blob")
        out.append(blob)
        at = end + 1 + size + 1
    return out


def read_texts(root: Path, oids: list[str], env: dict[str, str] | None = None) -> list[str]:
    """Blobs as text, what is not UTF-8 replaced."""
    return [d.decode("utf-8", errors="replace") for d in read_blobs(root, oids, env)]


def _ignores(root: Path, base: str) -> dict[str, pathspec.GitIgnoreSpec]:
    """The base commit's .gitignore files by folder ("" for the top)."""
    found = [
        (p, oid)
        for mode, oid, p in _entries(root, base)
        if PurePosixPath(p).name == ".gitignore" and mode != "120000"
    ]
    specs: dict[str, pathspec.GitIgnoreSpec] = {}
    for (path, _), data in zip(found, read_blobs(root, [oid for _, oid in found]), strict=True):
        folder = str(PurePosixPath(path).parent)
        lines = data.decode("utf-8", errors="replace").splitlines()
        specs["" if folder == "." else folder] = pathspec.GitIgnoreSpec.from_lines(lines)
    return specs


def _ignored(rel: str, specs: dict[str, pathspec.GitIgnoreSpec], is_dir: bool) -> bool:
    """Whether git would ignore this path by these .gitignore files (deeper ones win)."""
    verdict: bool | None = None
    parts = rel.split("/")
    for depth in range(len(parts)):
        folder = "/".join(parts[:depth])
        spec = specs.get(folder)
        if spec is None:
            continue
        sub = "/".join(parts[depth:]) + ("/" if is_dir else "")
        result = spec.check_file(sub)
        if result.include is not None:
            verdict = result.include
    return bool(verdict)


def _walk(worktree: Path) -> Iterator[tuple[str, os.stat_result]]:
    """Every non-folder entry under the worktree (side folders skipped), with its lstat."""
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        try:
            entries = list(os.scandir(worktree / rel_dir if rel_dir else worktree))
        except OSError:
            continue
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            info = entry.stat(follow_symlinks=False)
            if stat.S_ISDIR(info.st_mode):
                if entry.name not in SIDE_DIRS:
                    stack.append(rel)
            elif entry.name != ".git":
                yield rel, info


def fingerprint(worktree: Path) -> str:
    """A digest of the worktree's files as they stand (each one's path, mode, size and change
    time; side folders skipped): equal while no byte there changed, read without one file's
    content."""
    lines = sorted(
        f"{rel}\0{info.st_mode}\0{info.st_size}\0{info.st_mtime_ns}"
        for rel, info in _walk(worktree)
    )
    return hashlib.sha256("\n".join(lines).encode("utf-8", "surrogateescape")).hexdigest()


def build_candidate(
    root: Path,
    worktree: Path,
    base: str,
    store: ObjectStore,
    *,
    leave_out: Mapping[str, str] | None = None,
    max_file_bytes: int = 0,
) -> Candidate:
    """The candidate tree from the worktree's files, hashed into the private store.

    `leave_out`: untracked files a test run wrote (path -> blob id); such a file stays out
    only while it holds exactly those bytes (an agent's own file of that name is kept)."""
    env = store.env()
    (store.path / "index").unlink(missing_ok=True)
    candidate = Candidate(tree="")
    files, links = _gather(root, worktree, base, candidate, leave_out or {}, max_file_bytes)
    if candidate.oversized:
        return candidate
    lines = _hash_files(root, worktree, env, files) + _hash_links(root, env, links)
    return rediff(root, base, candidate, tree_from_lines(root, env, lines), store)


def tree_from_lines(root: Path, env: dict[str, str], lines: Sequence[bytes]) -> str:
    """The tree of the store's index after these `update-index --index-info` lines."""
    stdin = b"\0".join(lines) + b"\0" if lines else b""
    gitops.git(root, "update-index", "-z", "--index-info", env=env, stdin=stdin)
    return gitops.git(root, "write-tree", env=env).text().strip()


def _gather(
    root: Path,
    worktree: Path,
    base: str,
    candidate: Candidate,
    left: Mapping[str, str],
    max_bytes: int,
) -> tuple[list[tuple[str, str]], list[tuple[str, bytes]]]:
    """The worktree's files (path, mode) and symlinks (path, target) that make the candidate;
    what is left out or too big is noted in the candidate."""
    tracked = {p for _, _, p in _entries(root, base)}
    specs = _ignores(root, base)
    files: list[tuple[str, str]] = []
    links: list[tuple[str, bytes]] = []
    for rel, info in sorted(_walk(worktree)):
        if "\n" in rel or "\r" in rel:
            # git reads paths a line each: such a name could shift every blob after it
            candidate.left_out.append(rel)
            continue
        if rel not in tracked and (
            _as_written(worktree / rel, info, left.get(rel), len(base))
            or _untracked_side_file(rel, specs)
        ):
            candidate.left_out.append(rel)
            continue
        if stat.S_ISLNK(info.st_mode):
            links.append((rel, os.fsencode(os.readlink(worktree / rel))))
        elif stat.S_ISREG(info.st_mode):
            if (
                max_bytes
                and info.st_size > max_bytes
                and not _same_size_at_base(root, base, rel, info.st_size)
            ):
                candidate.oversized.append((rel, info.st_size))
                continue
            files.append((rel, "100755" if info.st_mode & 0o111 else "100644"))
    return files, links


def _as_written(path: Path, info: os.stat_result, written: str | None, oid_len: int) -> bool:
    """Whether the file holds exactly the bytes a test run wrote under its name."""
    if not written:
        return False
    mode = "120000" if stat.S_ISLNK(info.st_mode) else "100644"
    return disk_blob_id(path, mode, oid_len) == written


def _untracked_side_file(rel: str, specs: dict[str, pathspec.GitIgnoreSpec]) -> bool:
    """An untracked file that stays out: an aider file, compiled code, or one git ignores."""
    return (
        PurePosixPath(rel).name.startswith(".aider")
        or rel.endswith(".pyc")
        or any(
            _ignored("/".join(rel.split("/")[: i + 1]), specs, True) for i in range(rel.count("/"))
        )
        or _ignored(rel, specs, False)
    )


def _hash_files(
    root: Path, worktree: Path, env: dict[str, str], files: list[tuple[str, str]]
) -> list[bytes]:
    """Index lines of the files, their bytes written as blobs into the store (no filters)."""
    if not files:
        return []
    paths = "\n".join(str(worktree / rel) for rel, _ in files) + "\n"
    oids = (
        gitops.git(
            root,
            "hash-object",
            "-w",
            "--no-filters",
            "--stdin-paths",
            env=env,
            stdin=paths.encode("utf-8", errors="surrogateescape"),
            timeout_s=600,
        )
        .text()
        .split()
    )
    return [
        f"{mode} blob {oid}\t{rel}".encode("utf-8", errors="surrogateescape")
        for (rel, mode), oid in zip(files, oids, strict=True)
    ]


def _hash_links(root: Path, env: dict[str, str], links: list[tuple[str, bytes]]) -> list[bytes]:
    """Index lines of the symlinks, their targets written as blobs into the store."""
    lines: list[bytes] = []
    for rel, target in links:
        oid = (
            gitops.git(root, "hash-object", "-w", "--no-filters", "--stdin", env=env, stdin=target)
            .text()
            .strip()
        )
        lines.append(f"120000 blob {oid}\t{rel}".encode("utf-8", errors="surrogateescape"))
    return lines


def rediff(root: Path, base: str, candidate: Candidate, tree: str, store: ObjectStore) -> Candidate:
    """The candidate with another tree (a repaired one): its changes and line counts anew."""
    env = store.env()
    base_tree = gitops.tree_of(root, base)
    candidate.tree = tree
    candidate.changes = _changes(root, base_tree, tree, env)
    candidate.inserted, candidate.deleted = _numstat(root, base_tree, tree, env)
    return candidate


def _same_size_at_base(root: Path, base: str, rel: str, size: int) -> bool:
    """An existing big file (a lock file) that did not grow may stay."""
    result = gitops.git(root, "cat-file", "-s", f"{base}:{rel}", check=False)
    return result.ok and result.text().strip().isdigit() and size <= int(result.text().strip())


def _changes(root: Path, old: str, new: str, env: dict[str, str]) -> list[gitops.Change]:
    raw = gitops.git(
        root, "diff-tree", "-r", "-z", "-M", "--name-status", "--no-ext-diff", old, new, env=env
    ).stdout
    return gitops.parse_name_status(raw)


def _numstat(root: Path, old: str, new: str, env: dict[str, str]) -> tuple[int, int]:
    """Inserted and deleted lines; run in the kernel's store, where no attribute applies."""
    text = gitops.git(
        root,
        "diff-tree",
        "-r",
        "--numstat",
        "--text",
        "--no-textconv",
        "--no-ext-diff",
        old,
        new,
        env=env,
    ).text()
    return gitops.sum_numstat(text)


@dataclass(frozen=True)
class Size:
    """How big one file's change is: the lines added and removed, and for a file git calls
    binary (it counts it no lines) the bytes of its blobs, old and new."""

    lines: int = 0
    binary_bytes: int = 0


def sizes(root: Path, old: str, new: str, env: Mapping[str, str] | None = None) -> dict[str, Size]:
    """Each changed path's size between two trees (in the kernel's store where env names it)."""
    args = ("diff-tree", "-r", "-z", "--no-renames", "--raw", "--numstat", "--no-ext-diff")
    raw = gitops.git(root, *args, "--no-textconv", old, new, env=env).stdout
    parts = raw.decode("utf-8", "surrogateescape").split("\0")
    blobs: dict[str, tuple[str, ...]] = {}
    i = 0
    while i + 1 < len(parts) and parts[i].startswith(":"):  # the raw part: each path's blobs
        blobs[parts[i + 1]] = tuple(o for o in parts[i].split()[2:4] if o.strip("0"))
        i += 2
    lines: dict[str, int] = {}
    binary: dict[str, tuple[str, ...]] = {}
    for row in parts[i:]:
        added, deleted, path = [*row.split("\t", 2), "", ""][:3]
        if added.isdigit() and deleted.isdigit():
            lines[path] = int(added) + int(deleted)
        elif path:  # "-\t-": binary
            binary[path] = blobs.get(path, ())
    held = _blob_bytes(root, [o for ids in binary.values() for o in ids], env)
    found = {p: Size(lines=n) for p, n in lines.items()}
    return found | {p: Size(binary_bytes=sum(held.get(o, 0) for o in b)) for p, b in binary.items()}


def _blob_bytes(root: Path, oids: Sequence[str], env: Mapping[str, str] | None) -> dict[str, int]:
    if not oids:
        return {}
    check = gitops.git(
        root,
        "cat-file",
        "--batch-check=%(objectname) %(objectsize)",
        env=env,
        stdin="".join(f"{o}\n" for o in oids).encode(),
    ).text()
    pairs = (line.split() for line in check.splitlines())
    return {p[0]: int(p[1]) for p in pairs if len(p) == 2 and p[1].isdigit()}


def export_tree(
    root: Path,
    tree: str,
    dest: Path,
    store: ObjectStore | None = None,
    only: Sequence[str] = (),
) -> list[str]:
    """A fresh folder holding exactly the tree's files (`only`: those below these folders),
    written by the kernel from git objects (never checkout or archive, which apply smudge
    filters, export-ignore and export-subst); returns the paths written."""
    env = store.env() if store is not None else None
    entries = list(_entries(root, tree, env, only))
    blobs = [(m, o, p) for m, o, p in entries if m != "160000"]
    dest.mkdir(parents=True, exist_ok=True)
    for (mode, _, rel), data in zip(
        blobs, read_blobs(root, [o for _, o, _ in blobs], env), strict=True
    ):
        path = dest / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if mode == "120000":
            os.symlink(os.fsdecode(data), path)
        else:
            path.write_bytes(data)
            if mode == "100755":
                path.chmod(0o755)
    for mode, _, rel in entries:
        if mode == "160000":
            (dest / rel).mkdir(parents=True, exist_ok=True)
    return [rel for _, _, rel in entries]


def unsafe_links(root: Path, tree: str, store: ObjectStore | None = None) -> list[tuple[str, str]]:
    """Symlinks of the tree that, resolved as they will be in the user's checkout, point into
    `.git` or outside the repository; each with the reason."""
    env = store.env() if store is not None else None
    found = [(o, p) for m, o, p in _entries(root, tree, env) if m == "120000"]
    targets = dict(
        zip(
            (p for _, p in found),
            (os.fsdecode(d) for d in read_blobs(root, [o for o, _ in found], env)),
            strict=True,
        )
    )
    top = root.resolve()
    bad: list[tuple[str, str]] = []
    for path, target in targets.items():
        where = _resolve(path, targets, top)
        if where:
            bad.append((path, f"a symlink pointing {where} ({target})"))
    return bad


def _resolve(path: str, links: dict[str, str], top: Path) -> str:
    """'' when the link stays inside the repository and out of .git, else where it points."""
    current = list(PurePosixPath(path).parent.parts)
    queue: list[str] = []
    target: str | None = links[path]
    hops = 0
    while True:
        if target is not None:
            parts = _parts(target, top)
            if parts is None:
                return "outside the repository"
            if PurePosixPath(target).is_absolute():
                current = []
            queue = [*parts, *queue]
            target = None
        if not queue:
            return ""
        part = queue.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            if not current:
                return "outside the repository"
            current.pop()
            continue
        current.append(part)
        if part == ".git":
            return "into .git"
        joined = "/".join(current)
        if joined in links:
            hops += 1
            if hops > _MAX_HOPS:
                return "in a loop"
            current.pop()
            target = links[joined]


def _parts(target: str, top: Path) -> list[str] | None:
    """A link target as path parts; an absolute one relative to the repository's top, or
    None when it lies outside it."""
    pure = PurePosixPath(target)
    if not pure.is_absolute():
        return list(pure.parts)
    rel = os.path.relpath(os.path.normpath(target), top.as_posix())
    if rel == ".." or rel.startswith("../"):
        return None
    return [p for p in PurePosixPath(rel).parts if p != "."]


def commit_tree(
    root: Path,
    tree: str,
    parent: str,
    message: str,
    name: str,
    email: str,
    store: ObjectStore,
    committer: tuple[str, str] | None = None,
) -> str:
    """Copy the candidate's objects into the repository, then commit exactly that tree
    (authored by name/email; committed by `committer`, the author when not given)."""
    source = store.path / "objects"
    target = store.repo_objects
    if source.is_dir():
        for folder, dirs, names in os.walk(source):
            dirs[:] = [d for d in dirs if d not in ("info", "pack")]
            for entry in names:
                src = Path(folder, entry)
                dst = target / src.relative_to(source)
                if not dst.exists():
                    dst.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(src, dst)
    by = committer or (name, email)
    identity = {
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_COMMITTER_NAME": by[0],
        "GIT_COMMITTER_EMAIL": by[1],
    }
    return (
        gitops.git(root, "commit-tree", tree, "-p", parent, "-m", message, env=identity)
        .text()
        .strip()
    )


def with_file(root: Path, tree: str, path: str, data: bytes, store: ObjectStore) -> str:
    """The tree with one file's bytes replaced (its mode kept)."""
    env = store.env()
    (store.path / "index").unlink(missing_ok=True)
    mode = next((m for m, _, p in _entries(root, tree, env) if p == path), "100644")
    oid = (
        gitops.git(root, "hash-object", "-w", "--no-filters", "--stdin", env=env, stdin=data)
        .text()
        .strip()
    )
    gitops.git(root, "read-tree", tree, env=env)
    gitops.git(root, "update-index", "--cacheinfo", f"{mode},{oid},{path}", env=env)
    return gitops.git(root, "write-tree", env=env).text().strip()
