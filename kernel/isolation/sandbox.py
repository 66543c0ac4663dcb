"""The OS sandbox every agent run and every run of repository code goes through (bubblewrap).

The whole filesystem is seen read-only; named places are bound read-write (a tree under
test may be bound over the person's checkout, `Profile.in_place`, which then shows only
named places of the person's side, read-only); the kernel's
state and the real HOME are hidden behind empty tmpfs mounts (with the places a run needs
shown through again); `/tmp` is private and bounded; the run gets a new PID namespace, so
when it ends every process it started is gone; all capabilities are dropped (as root,
bubblewrap keeps them otherwise, and root could remount `/` read-write); the network is
cut unless the profile keeps it, and a run without network has no sockets either: `/run`,
`/var/run` and XDG_RUNTIME_DIR are covered by empty tmpfs (a session bus, ssh, gpg or docker
agent) and abstract sockets live in the network namespace it no longer shares; only a socket
the profile names is bound in (`Profile.sockets`: the model gateway's). Memory is
bounded by an rlimit set by a small launcher inside the sandbox (RLIMIT_DATA rather than
RLIMIT_AS: node-based agent CLIs reserve far more address space than they use).

Processes are bounded per sandbox, never per user: each run gets a pids cgroup of its own
under the daemon's (cgroup v1's pids hierarchy, or v2 where pids is delegated), which the
run joins before bubblewrap starts. Where no cgroup can be made, the run gets a user
namespace of its own and RLIMIT_NPROC, which Linux counts per user namespace since 5.14 (for
root, RLIMIT_NPROC counts nothing at all: the cgroup is what holds there).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import re
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

_LIMITS = (
    "import os, resource, sys\n"
    "data, procs = int(sys.argv[1]), int(sys.argv[2])\n"
    "if data: resource.setrlimit(resource.RLIMIT_DATA, (data, data))\n"
    "if procs: resource.setrlimit(resource.RLIMIT_NPROC, (procs, procs))\n"
    "os.execvp(sys.argv[3], sys.argv[3:])\n"
)
"""Runs inside the sandbox, as its first process: set the limits, then become the command."""

_JOIN = 'echo $$ > "$1" && shift && exec "$@"'
"""Runs before bubblewrap: join the run's pids cgroup (argument 1), then become bubblewrap."""
_CGROUPS = Path("/sys/fs/cgroup")
_GROUP_PREFIX = "seed-sandbox-"
_GROUP_IDS = itertools.count()
_STALE_S = 300.0
"""An empty run cgroup older than this is left over (its run is gone) and removed."""


@dataclass(frozen=True)
class Profile:
    """What one sandboxed run may see and touch.

    Mounts are applied over the read-only root and the private home: the most specific
    (deepest) place last, so nothing writable covers a hidden place inside it; at one path,
    `hidden` over `readonly` over `writable` and `home_binds` over `shown`.
    """

    writable: tuple[Path, ...] = ()
    """Bound read-write at their own path (the worktree or export, run folders)."""
    readonly: tuple[Path, ...] = ()
    """Re-bound read-only at their own path, over a writable place (prompt and plan files)."""
    hidden: tuple[Path, ...] = ()
    """Folders replaced by an empty tmpfs (the kernel's state), files by an empty one."""
    shown: tuple[Path, ...] = ()
    """Shown read-only again where the private /tmp or home covers them (the repository,
    interpreters, PATH folders, the agent's own program)."""
    home: Path | None = None
    """A folder bound read-write over the real HOME (which is then unseen)."""
    private_home: bool = False
    """Without `home`: an empty tmpfs over the real HOME, gone with the run."""
    real_home: Path | None = None
    """The HOME path to cover (default: $HOME)."""
    home_binds: tuple[str, ...] = ()
    """Names under the real HOME bound read-write at their place in the private home."""
    network: bool = False
    tmp_bytes: int = 512 * 1024 * 1024
    memory_bytes: int = 4 * 1024 * 1024 * 1024
    max_processes: int = 512
    """Processes the run may have at once (its pids cgroup; else RLIMIT_NPROC in a user
    namespace of its own)."""
    chdir: Path | None = None
    in_place: tuple[Path, Path] | None = None
    """(export, checkout): the export bound read-write at the checkout's path, so the run sees
    the export by the checkout's name and nothing of the checkout but `through`; every other
    place inside the checkout is left out (hidden ones are unseen anyway)."""
    named: tuple[Path, ...] = ()
    """Places runs reach by a name through a link (a `.pth` entry written in a linked folder):
    nothing is mounted for them, the links on the way are made again (`_links`)."""
    through: tuple[tuple[Path, Path], ...] = ()
    """(source, place): with `in_place`, what the run still sees of the person's side inside
    the checkout, read-only (their environment, build products git ignores); shown places
    inside the checkout are added here."""
    frozen: bool = False
    """With `in_place`: the export read-only too (module code writes nothing)."""
    sockets: tuple[tuple[Path, Path], ...] = ()
    """(source, place): Unix sockets bound read-write at a place under the empty /run of a run
    without network, mounted last (the model gateway's: the only way out of the namespace)."""


@dataclass(frozen=True)
class Availability:
    """Whether the sandbox can run here, and why not."""

    ok: bool
    reason: str = ""


@dataclass(frozen=True)
class Facts:
    """What the machine says about user namespaces and bubblewrap, read from /proc/sys and
    the file system (`facts`), for `cause` to name why bubblewrap cannot start."""

    installed: bool = True
    said: str = ""
    """bubblewrap's own words when it failed (stderr)."""
    setuid: bool = False
    root: bool = False
    unprivileged_userns_clone: int | None = None
    """kernel.unprivileged_userns_clone (Debian's and older Ubuntu kernels' switch)."""
    max_user_namespaces: int | None = None
    """user.max_user_namespaces (0 turns user namespaces off: RHEL/CentOS 7's default)."""
    apparmor_restrict: int | None = None
    """kernel.apparmor_restrict_unprivileged_userns (1 by default on Ubuntu 24.04)."""
    container: str = ""
    """The container this process runs in ("docker", "podman", ...), if any."""


_OFF = 'or set [guard] sandbox = "off" in seed.toml to run agents and tests unsandboxed'
_PERSIST = "(to keep it after a reboot, put the same line in /etc/sysctl.d/90-seed.conf)"
_APPARMOR_PROFILE = (
    "/etc/apparmor.d/bwrap holding `abi <abi/4.0>, include <tunables/global> profile bwrap "
    "/usr/bin/bwrap flags=(unconfined) { userns, }`, then `sudo apparmor_parser -r "
    "/etc/apparmor.d/bwrap`"
)


_NAMESPACE_WORDS = re.compile(
    r"namespace|uid map|operation not permitted|permission denied|no permissions", re.IGNORECASE
)
"""What bubblewrap says when the container forbids it a namespace (not a missing file)."""


def cause(found: Facts) -> str:
    """Why bubblewrap cannot start a sandbox here, and what fixes it (a pure function)."""
    said = f" (bwrap said: {found.said})" if found.said else ""
    if not found.installed:
        return (
            "bubblewrap (bwrap) is not installed: install it (Debian/Ubuntu: sudo apt-get "
            "install bubblewrap; Fedora: sudo dnf install bubblewrap; Arch: sudo pacman -S "
            f"bubblewrap), {_OFF}"
        )
    unprivileged = not found.root and not found.setuid
    if found.max_user_namespaces == 0:
        return (
            f"user namespaces are turned off (user.max_user_namespaces = 0){said}: run `sudo "
            f"sysctl -w user.max_user_namespaces=15000` {_PERSIST}, {_OFF}"
        )
    if unprivileged and found.unprivileged_userns_clone == 0:
        return (
            "unprivileged user namespaces are turned off (kernel.unprivileged_userns_clone = "
            f"0){said}: run `sudo sysctl -w kernel.unprivileged_userns_clone=1` {_PERSIST}, {_OFF}"
        )
    if unprivileged and found.apparmor_restrict == 1:
        return (
            "AppArmor restricts unprivileged user namespaces "
            f"(kernel.apparmor_restrict_unprivileged_userns = 1, Ubuntu 23.10 and later){said}: "
            "run `sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0` "
            f"{_PERSIST}, or allow bubblewrap alone with an AppArmor profile: "
            f"{_APPARMOR_PROFILE}; {_OFF}"
        )
    if found.container and _NAMESPACE_WORDS.search(found.said):
        return (
            f"this is a {found.container} container that allows no new namespaces{said}: start "
            "it with user namespaces allowed (docker/podman run --security-opt "
            "seccomp=unconfined --security-opt apparmor=unconfined, or a rootless podman), "
            f"{_OFF} (the container is then the only sandbox)"
        )
    if found.setuid:
        return (
            f"bubblewrap is installed setuid root and refused{said}: a setuid bwrap cannot "
            "make the user namespace seed asks for where the kernel forbids them to "
            f"unprivileged users; enable user namespaces, {_OFF}"
        )
    return f"bubblewrap could not start a sandbox{said}: {_OFF}"


def _sysctl(name: str) -> int | None:
    try:
        return int(Path("/proc/sys", *name.split(".")).read_text().strip())
    except (OSError, ValueError):
        return None


def _container() -> str:
    """The container this process runs in, from the marks container engines leave."""
    if Path("/run/.containerenv").exists():
        return "podman"
    if Path("/.dockerenv").exists():
        return "docker"
    try:
        groups = Path("/proc/1/cgroup").read_text()
    except OSError:
        return ""
    for name in ("docker", "kubepods", "lxc", "containerd"):
        if name in groups:
            return name
    return ""


def facts(found: str | None, said: str) -> Facts:
    """The machine's facts for `cause`: /proc/sys, bwrap's mode, the container's marks."""
    setuid = False
    if found is not None:
        with contextlib.suppress(OSError):
            setuid = bool(os.stat(found).st_mode & stat.S_ISUID)
    return Facts(
        installed=found is not None,
        said=said,
        setuid=setuid,
        root=os.geteuid() == 0,
        unprivileged_userns_clone=_sysctl("kernel.unprivileged_userns_clone"),
        max_user_namespaces=_sysctl("user.max_user_namespaces"),
        apparmor_restrict=_sysctl("kernel.apparmor_restrict_unprivileged_userns"),
        container=_container(),
    )


def _bwrap() -> str | None:
    return shutil.which("bwrap")


def _said(done: subprocess.CompletedProcess[bytes]) -> str:
    return done.stderr.decode("utf-8", errors="replace").strip()[:300]


@functools.cache
def available() -> Availability:
    """Whether bubblewrap starts a sandbox with the flags the kernel uses, and the daemon's
    interpreter (the launcher of every run) inside it.

    First a program that needs nothing of seed's location (where seed lives never matters):
    when that fails, the cause is the machine's, named from its facts (`cause`). Then the
    launcher: when only that fails, the fault is seed's, and it says so."""
    found = _bwrap()
    if found is None:
        return Availability(False, cause(facts(None, "")))
    bare = Profile(tmp_bytes=1 << 20)
    try:
        probe = subprocess.run(
            wrap([shutil.which("true") or "/bin/true"], bare, launcher=False),
            capture_output=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Availability(False, cause(facts(found, str(exc))))
    if probe.returncode != 0:
        return Availability(False, cause(facts(found, _said(probe))))
    try:
        launcher = subprocess.run(
            wrap([sys.executable, "-I", "-S", "-c", "pass"], Profile(tmp_bytes=1 << 20)),
            capture_output=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Availability(False, _unstarted(str(exc)))
    if launcher.returncode != 0:
        return Availability(False, _unstarted(_said(launcher)))
    return Availability(True)


def _unstarted(said: str) -> str:
    return (
        f"bubblewrap works, but seed's interpreter {sys.executable} did not start inside it "
        f"(bwrap said: {said}): a fault of seed's, please report it; {_OFF}"
    )


def _interpreter() -> tuple[Path, ...]:
    """The daemon's interpreter and its installation (the launcher and the probe run it)."""
    here = Path(sys.executable)
    return (Path(sys.prefix), Path(sys.base_prefix), here.parent, here.resolve().parent.parent)


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _mounts(profile: Profile, covered: Sequence[Path], real_home: Path) -> list[str]:
    """The shown, hidden, writable and read-only mounts, the most specific last.

    bubblewrap applies mounts in order, a later one over an earlier: ordered by depth, a
    folder bound writable can never cover a hidden place inside it (the kernel's state, its
    seal key), while a place bound inside a hidden folder (a run's own folder) still shows;
    at the same path, hidden wins over read-only, read-only over writable.
    """
    mounts: list[tuple[int, int, list[str]]] = []
    checkout = profile.in_place[1].resolve() if profile.in_place is not None else None

    def add(path: Path, rank: int, args: list[str]) -> None:
        # inside the checkout the run sees the export: nothing else is mounted there
        if checkout is None or not _inside(path, checkout):
            mounts.append((len(path.parts), rank, args))

    # what the run needs from under a covered folder is shown again, read-only; never inside
    # a writable place, which shows it already (a read-only bind deeper in would win there)
    places = [w.resolve() for w in profile.writable if w.exists()]
    for path in profile.shown:
        real = path.resolve()
        if any(_inside(real, w) for w in places):
            continue
        if path.exists() and any(_inside(real, c) for c in covered):
            add(real, 0, ["--ro-bind", str(real), str(real)])
    for path in profile.writable:
        if path.exists():
            add(path.resolve(), 1, ["--bind", str(path.resolve()), str(path.resolve())])
    if profile.home is not None:
        for name in profile.home_binds:
            source = real_home / name
            if source.exists():
                add(source, 1, ["--bind", str(source), str(source)])
    for path in profile.readonly:
        if path.exists():
            add(path.resolve(), 2, ["--ro-bind", str(path.resolve()), str(path.resolve())])
    for path in profile.hidden:
        if path.is_dir():
            add(path.resolve(), 3, ["--tmpfs", str(path.resolve())])
        elif path.exists():
            add(path.resolve(), 3, ["--ro-bind", os.devnull, str(path.resolve())])
    for link, target in _links(profile, covered):
        add(link, -1, ["--symlink", target, str(link)])
    if profile.in_place is not None and checkout is not None:
        export = profile.in_place[0].resolve()
        mounts.append((len(checkout.parts), 1, ["--bind", str(export), str(checkout)]))
        for source, place in _through(profile, checkout):
            mounts.append((len(place.parts), 2, ["--ro-bind", str(source), str(place)]))
        if profile.frozen:
            # after every mount point inside it is made: that mount alone, not those inside
            mounts.append((1 << 16, 0, ["--remount-ro", str(checkout)]))
    # sorted is stable: at equal depth and rank, the profile's own order stays
    return [arg for _, _, args in sorted(mounts, key=lambda m: (m[0], m[1])) for arg in args]


_MAX_LINKS = 40
"""Links followed at most while looking for those a profile's places are reached through."""


def _links(profile: Profile, covered: Sequence[Path]) -> list[tuple[Path, str]]:
    """The links inside covered folders (/tmp, HOME) that the profile's places are named
    through (`/tmp/work -> /tmp/real`), each with its target: made again in the sandbox, so a
    place is found by the name runs use (a virtualenv's python finds its pyvenv.cfg by it).
    A link grants nothing: every mount is made by its resolved path."""
    named = [*profile.writable, *profile.readonly, *profile.shown, *profile.named]
    named += [profile.chdir] if profile.chdir is not None else []
    # a link inside a place bound whole is there already
    bound = [p.resolve() for p in (*profile.writable, *profile.readonly, *profile.shown)]
    found: dict[Path, str] = {}
    todo = [Path(os.path.normpath(p)) for p in named if p.is_absolute()]
    while todo and len(found) < _MAX_LINKS:
        path = todo.pop()
        for depth in range(2, len(path.parts) + 1):
            prefix = Path(*path.parts[:depth])
            if not prefix.is_symlink() or not any(_inside(prefix, c) for c in covered):
                continue
            if any(_inside(prefix.parent.resolve(), b) for b in bound):
                continue
            if prefix not in found:
                with contextlib.suppress(OSError):
                    target = os.readlink(prefix)
                    found[prefix] = target
                    rest = Path(*path.parts[depth:]) if depth < len(path.parts) else Path()
                    todo.append(Path(os.path.normpath(prefix.parent / target / rest)))
            break
    return list(found.items())


def _through(profile: Profile, checkout: Path) -> list[tuple[Path, Path]]:
    """The person's places shown inside the checkout over the export: `through`, and shown
    places inside the checkout (an environment, seen at the name it is used by); each
    strictly inside the checkout, existing, and never holding a hidden place (the state)."""
    wanted = list(profile.through)
    for path in profile.shown:
        if path.exists():
            real = path.resolve()
            place = path.parent.resolve() / path.name if path.name else real
            wanted += [(real, p) for p in dict.fromkeys((place, real))]
    kept: dict[Path, Path] = {}
    secret = [h.resolve() for h in profile.hidden]
    for source, place in wanted:
        if place == checkout or not _inside(place, checkout) or not source.exists():
            continue
        if any(_inside(h, source.resolve()) or _inside(h, place) for h in secret):
            continue
        kept.setdefault(place, source)
    return [(source, place) for place, source in kept.items()]


def _completed(profile: Profile) -> Profile:
    """The profile with the daemon's own interpreter shown: the launcher runs it, wherever it
    lives (a seed cloned under /tmp or HOME), whatever the profile names."""
    return replace(profile, shown=(*profile.shown, *_interpreter()))


def mount_points(profile: Profile) -> list[Path]:
    """The places inside the export that bubblewrap will make as mount points of `through`
    (missing in the export), deepest last: removed again once the run is over (`settle`)."""
    if profile.in_place is None:
        return []
    export, checkout = (p.resolve() for p in profile.in_place)
    made: list[Path] = []
    for _, place in _through(_completed(profile), checkout):
        here = export
        for part in place.relative_to(checkout).parts:
            here = here / part
            if here.is_symlink():
                break  # made beyond a link is none of the kernel's to remove
            if not os.path.lexists(here):
                made.append(here)
    return list(dict.fromkeys(made))


def settle(made: Sequence[Path]) -> None:
    """Remove the mount points a run left in the export: empty files and folders only (a
    mount point is one; anything else was put there by someone else and stays)."""
    for path in sorted(made, key=lambda p: len(p.parts), reverse=True):
        with contextlib.suppress(OSError):
            if path.is_symlink() or path.parent.resolve() != path.parent:
                continue  # never through a link the run may have put on the way
            if path.is_dir():
                path.rmdir()
            elif path.is_file() and path.stat().st_size == 0:
                path.unlink()


def _own_pids_cgroup() -> Path | None:
    """The pids cgroup folder this process is in, if it may make a child there with a limit."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        number, controllers, where = line.split(":", 2)
        if "pids" in controllers.split(","):
            folder = _CGROUPS / "pids" / where.lstrip("/")
        elif number == "0" and (_CGROUPS / "cgroup.controllers").is_file():
            folder = _CGROUPS / where.lstrip("/")
            with contextlib.suppress(OSError):
                if "pids" not in (folder / "cgroup.subtree_control").read_text().split():
                    continue
        else:
            continue
        # a child is made here, and the run moves itself in through this folder's cgroup.procs
        if os.access(folder, os.W_OK) and os.access(folder / "cgroup.procs", os.W_OK):
            return folder
    return None


def _sweep(parent: Path) -> None:
    """Remove run cgroups left empty by runs that are over: those of a daemon that is gone,
    and old ones (a cgroup that still holds a process refuses)."""
    now = time.time()
    with contextlib.suppress(OSError):
        for group in parent.glob(f"{_GROUP_PREFIX}*"):
            owner = group.name.removeprefix(_GROUP_PREFIX).split("-")[0]
            with contextlib.suppress(OSError):
                gone = not Path(f"/proc/{owner}").exists()
                if gone or now - group.stat().st_mtime > _STALE_S:
                    group.rmdir()


def pids_cgroup(limit: int) -> Path | None:
    """A new pids cgroup for one run, under the daemon's own, holding at most `limit` processes
    (so they count against the person's session too); None where none can be made."""
    parent = _own_pids_cgroup()
    if parent is None:
        return None
    _sweep(parent)
    group = parent / f"{_GROUP_PREFIX}{os.getpid()}-{next(_GROUP_IDS)}"
    try:
        group.mkdir()
        (group / "pids.max").write_text(f"{limit}\n")
    except OSError:
        with contextlib.suppress(OSError):
            group.rmdir()
        return None
    return group


@functools.cache
def _user_namespaces() -> bool:
    """Whether bubblewrap can give a run a user namespace of its own here (a setuid bubblewrap
    on a kernel that forbids unprivileged user namespaces cannot)."""
    argv = [_bwrap() or "bwrap", "--unshare-user", "--ro-bind", "/", "/", "--", "/bin/true"]
    try:
        probe = subprocess.run(argv, capture_output=True, timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


def _runtime_dirs() -> list[Path]:
    """Where the person's session keeps its sockets: /run, /var/run unless it is a link into
    /run, and XDG_RUNTIME_DIR wherever it is."""
    found = [Path("/run")]
    if not Path("/var/run").is_symlink():
        found.append(Path("/var/run"))
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    if runtime and os.path.isabs(runtime):
        found.append(Path(runtime).resolve())
    kept = [p for p in dict.fromkeys(found) if p.is_dir() and p != Path("/")]
    return [p for p in kept if not any(o != p and _inside(p, o) for o in kept)]


def wrap(argv: Sequence[str], profile: Profile, *, launcher: bool = True) -> list[str]:
    """The argv that runs argv inside the sandbox the profile describes (without `launcher`,
    no limits and nothing of the daemon's interpreter: a probe that needs nothing of seed)."""
    if not launcher:
        profile = replace(profile, memory_bytes=0, max_processes=0)
    bwrap = _bwrap() or "bwrap"
    out = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    out += ["--size", str(profile.tmp_bytes), "--tmpfs", "/tmp"]
    out += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent"]
    out += ["--new-session", "--cap-drop", "ALL"]
    covered = [Path("/tmp")]
    if not profile.network:
        out.append("--unshare-net")
        for folder in _runtime_dirs():
            out += ["--size", str(1 << 20), "--tmpfs", str(folder)]
            covered.append(folder)
    real_home = (profile.real_home or Path(os.environ.get("HOME") or "/nonexistent")).resolve()
    if real_home.is_dir() and real_home != Path("/"):
        if profile.home is not None:
            out += ["--bind", str(profile.home), str(real_home)]
            covered.append(real_home)
        elif profile.private_home:
            out += ["--size", str(profile.tmp_bytes), "--tmpfs", str(real_home)]
            covered.append(real_home)
    # the launcher below is the daemon's own interpreter: shown wherever it lives (a seed
    # cloned under /tmp or HOME), whatever the profile names
    out += _mounts(_completed(profile) if launcher else profile, covered, real_home)
    if profile.sockets and profile.network:
        raise ValueError("a socket is bound only into a run without network (under its /run)")
    for source, place in profile.sockets:
        out += ["--bind", str(source), str(place)]
    if profile.chdir is not None:
        out += ["--chdir", str(profile.chdir)]
    group = pids_cgroup(profile.max_processes) if profile.max_processes else None
    nproc = 0 if group is not None else profile.max_processes
    if nproc and _user_namespaces():
        # no cgroup here: RLIMIT_NPROC counts per user namespace (Linux >= 5.14)
        out.insert(1, "--unshare-user")
    out.append("--")
    if profile.memory_bytes or nproc:
        out += [sys.executable, "-I", "-S", "-c", _LIMITS]
        out += [str(profile.memory_bytes), str(nproc)]
    joined = [*out, *argv]
    if group is not None:
        return ["/bin/sh", "-c", _JOIN, "sh", str(group / "cgroup.procs"), *joined]
    return joined
