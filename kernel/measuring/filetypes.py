"""Which changed files may land without a person: an allow-list of file types, from the tree.

What may land on a verification alone is text of a kind the project already has (a suffix
the parent commit's tree holds), or documentation (`.md`, `.rst`, `.txt`: read in the diff,
and judged line by line as code if a test loads one). Everything else is code or configuration no line of the
diff shows a person: binaries, extension modules, `.pth` files (the interpreter runs them at
start), package metadata (`*.dist-info`/`*.egg-info`: entry points, plugins) and new
executables. Such work is kept for a person with the reason, never refused as wrong.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from kernel.isolation import gitops

EXTENSIONS = (".so", ".pyd", ".dylib", ".dll")
"""Suffixes the interpreter imports as compiled extension modules (or loads them from)."""
METADATA = (".dist-info", ".egg-info")
"""Folders whose files name entry points: plugins that load themselves."""
DOCUMENTATION = (".md", ".rst", ".txt")
"""Text suffixes a project without any yet may still gain (the docs that come with code)."""


def _suffix(path: str) -> str:
    """A file's type: its last suffix ("" for none, as for `Makefile` or `.gitignore`)."""
    return PurePosixPath(path).suffix.lower()


def _why(path: str, old_mode: str, new_mode: str, binary: bool, known: set[str]) -> str:
    """Why a person must see this changed file ("" when it may land on a verification)."""
    parts = PurePosixPath(path).parts
    suffix = _suffix(path)
    if any(p.lower().endswith(METADATA) for p in parts[:-1]):
        return "package metadata (entry points load themselves as plugins)"
    if suffix in EXTENSIONS or ".so." in parts[-1]:
        return "an extension module (compiled code the interpreter imports)"
    if suffix == ".pth":
        return "a .pth file (the interpreter runs it at start)"
    if binary:
        return "a binary file (no line of the diff shows it)"
    if new_mode == "100755" and old_mode != "100755":
        return "a new executable (mode 755)"
    if suffix not in known:
        return f"a file type the project has none of ({suffix or 'no suffix'})"
    return ""


def _binary(data: bytes) -> bool:
    """Not text: a NUL byte, or not UTF-8 (read from the blob: the tree's `.gitattributes`,
    which the change may set, has no say)."""
    if b"\0" in data:
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def _blobs(root: Path, shas: list[str]) -> list[bytes]:
    """The blobs' contents, in order, from one `git cat-file --batch` ("<sha> blob <size>\n",
    the contents and a newline each; "<sha> missing\n" for none)."""
    out = gitops.git(root, "cat-file", "--batch", stdin="".join(f"{s}\n" for s in shas).encode())
    data, found, at = out.stdout, list[bytes](), 0
    for _ in shas:
        end = data.index(b"\n", at)
        header = data[at:end].split()
        size = int(header[2]) if len(header) == 3 else -1
        found.append(data[end + 1 : end + 1 + size] if size >= 0 else b"")
        at = end + 1 + (size + 1 if size >= 0 else 0)
    return found


def unvetted(root: Path, commit: str) -> list[str]:
    """`path: why` for each file a commit adds or changes that a person must see first."""
    parent = f"{commit}^"
    listed = gitops.git(root, "ls-tree", "-r", "-z", "--name-only", parent).stdout
    known = {_suffix(p) for p in listed.decode("utf-8", "surrogateescape").split("\0") if p}
    known = (known | set(DOCUMENTATION)) - {*EXTENSIONS, ".pth"}
    raw = gitops.git(
        root, "diff", "--raw", "--no-renames", "--no-abbrev", "-z", parent, commit
    ).stdout.split(b"\0")
    changed: list[tuple[str, str, str, str]] = []
    # --raw -z: ":oldmode newmode oldsha newsha status" then the path, as two fields
    for head, name in zip(raw[::2], raw[1::2], strict=False):
        fields = head.decode("ascii", "replace").lstrip(":").split()
        if len(fields) >= 5 and not fields[4].startswith("D") and fields[1] != "160000":
            path = name.decode("utf-8", "surrogateescape")
            changed.append((path, fields[0], fields[1], fields[3]))
    blobs = _blobs(root, [sha for *_, sha in changed]) if changed else []
    found: list[str] = []
    for (path, old, new, _), data in zip(changed, blobs, strict=True):
        why = _why(path, old, new, _binary(data), known)
        if why:
            found.append(f"{path}: {why}")
    return found


def said(found: list[str]) -> str:
    """The files in one line, for a reason."""
    shown = "; ".join(found[:10])
    more = f" and {len(found) - 10} more" if len(found) > 10 else ""
    return f"files of a kind a person must see before they land: {shown}{more}"
