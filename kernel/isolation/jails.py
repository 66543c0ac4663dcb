"""The sandbox profiles: one for runs of repository code (baseline, verification,
localisation), the same with nothing writable for module code (the module server and the
self-check), one for the agent. Built here from the paths and the config, nowhere else.

All hide the kernel's state folder and the real HOME, show folders under HOME by their exact
path only, and see the rest of the machine read-only; test runs and module code have no
network, no sockets and an empty HOME, the agent keeps the network (it calls model APIs), or
in model-only has none but its model gateway's socket (`agent_sandbox`).
Runs of repository code see the tree under test in the person's checkout's place.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any, Literal, Protocol

from kernel.config import GuardConfig
from kernel.isolation import gitops, ignored, procs, sandbox
from kernel.isolation.paths import PLUGIN_DIR, Paths


@dataclass(frozen=True)
class Jailed:
    """A run of repository code, sandboxed."""

    argv: list[str]
    seen: Path
    """Where the run sees the tree under test: the checkout's path when the sandbox puts the
    export in its place (editable installs then import the tree), else the tree's own."""
    made: tuple[Path, ...] = ()
    """Mount points the run leaves in the tree, removed once it is over (`sandbox.settle`)."""


class Jail(Protocol):
    """Wraps the argv of a run that executes repository code on a tree so it runs sandboxed, with
    only the tree and the given folders writable (the kernel's output folder)."""

    def __call__(
        self,
        argv: Sequence[str],
        tree: Path,
        writable: Sequence[Path],
        /,
        *,
        pythons: Sequence[Path] = (),
    ) -> Jailed:
        """`pythons`: interpreters the run uses besides its argv[0] (seed's mypy resolving
        imports with the target's), shown as argv[0]'s installation is."""
        ...


_NEVER_SHOWN = (
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".config/gh",
    ".kube",
    ".docker",
    ".netrc",
    ".pypirc",
    ".npmrc",
    ".git-credentials",
    ".cargo/credentials",
    ".cargo/credentials.toml",
)
"""Credentials no adapter may ask to see."""


def enabled(guard: GuardConfig) -> bool:
    """Whether runs are to be sandboxed (the config does not opt out)."""
    return guard.sandbox != "off"


def active(guard: GuardConfig) -> bool:
    """Whether runs are sandboxed now (on, and bubblewrap works here)."""
    return enabled(guard) and sandbox.available().ok


def why_not(guard: GuardConfig, paths: Paths | None = None, python: Path | None = None) -> str:
    """Why no agent that executes code may run now ('' when one may)."""
    problem = check(paths, guard, python)
    return f"no sandbox: {problem}" if problem else ""


def describe(guard: GuardConfig, paths: Paths | None = None, python: Path | None = None) -> str:
    """One line for `status`, the log and reports: how runs are isolated here."""
    if not enabled(guard):
        return 'off: agents and test runs are NOT sandboxed ([guard] sandbox = "off")'
    problem = check(paths, guard, python)
    if problem:
        return f"unavailable, so no agent runs (plans only): {problem}"
    return "on: bubblewrap (read-only filesystem, hidden HOME, PID namespace, limits)"


_CHECKED: dict[tuple[object, ...], str] = {}


def check(paths: Paths | None, guard: GuardConfig, python: Path | None) -> str:
    """Why runs cannot start in the sandbox here ('' when they can, or when it is off).

    Runs what real runs run, from wherever it lives: bubblewrap itself (`sandbox.available`),
    then the target's interpreter in the test-run profile and seed's in the module server's;
    each once per process."""
    if not enabled(guard):
        return ""
    found = sandbox.available()
    if not found.ok or paths is None:
        return found.reason
    key = (paths, python, guard.sandbox_memory_mb, guard.sandbox_max_processes)
    if key not in _CHECKED:
        _CHECKED[key] = _starts(paths, guard, python)
    return _CHECKED[key]


def _starts(paths: Paths, guard: GuardConfig, python: Path | None) -> str:
    """Whether the target's interpreter and seed's start in their real profiles, nothing writable."""
    runs: list[tuple[str, list[str], sandbox.Profile]] = []
    if python is not None and python.is_absolute():
        target = _measurement(guard, paths, shown=_shown(paths, (python,)))
        runs.append(("the target's interpreter", [str(python), "-I", "-c", "pass"], target))
    code = paths.seed_home
    module = _measurement(guard, paths, readonly=(code,), shown=_shown(paths), chdir=code)
    runs.append(("seed's interpreter (the module server)", [sys.executable, "-c", "pass"], module))
    for what, argv, profile in runs:
        try:
            done = procs.run(
                sandbox.wrap(argv, profile),
                cwd="/",
                timeout_s=60,
                env=procs.run_env(PYTHONNOUSERSITE="1", PYTHONDONTWRITEBYTECODE="1"),
                merge_stderr=True,
                interruptible=False,
            )
        except OSError as exc:
            return f"{what} {argv[0]} did not start in the sandbox: {exc}"
        if not done.ok:
            said = done.text().strip()[-300:]
            return (
                f"bubblewrap works, but {what} {argv[0]} did not start in the sandbox "
                f"(it said: {said}); a fault of seed's, please report it, or set "
                '[guard] sandbox = "off"'
            )
    return ""


def _limited(guard: GuardConfig, **mounts: Any) -> sandbox.Profile:
    """A profile with the config's limits on memory, processes and /tmp."""
    return sandbox.Profile(
        memory_bytes=guard.sandbox_memory_mb * 1024 * 1024,
        max_processes=guard.sandbox_max_processes,
        tmp_bytes=guard.sandbox_tmp_mb * 1024 * 1024,
        **mounts,
    )


def _real_home() -> Path:
    return Path(os.environ.get("HOME") or "/nonexistent").resolve()


_INSTALLATIONS = ("pyvenv.cfg", "libexec/pyenv")
"""Files that mark a folder directly under HOME as an installation of its own, shown whole
when a run needs it: a virtualenv (~/.venv), pyenv's root (~/.pyenv, which its shims run)."""


def _exact(folder: Path, home: Path) -> bool:
    """Whether a folder may be shown: never HOME or above it, and never a folder directly
    under HOME (~/.local holds keyrings beside bin/) unless it is an installation of its own."""
    if folder == home or folder in home.parents:
        return False
    return folder.parent != home or any((folder / mark).is_file() for mark in _INSTALLATIONS)


_TEMP_ROOTS = (Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"))
"""Folders that hold every process's temporary files: never shown whole."""


_CREDENTIALS = (*_NEVER_SHOWN, ".local/share/keyrings", ".password-store")
"""Places under HOME that hold logins: a folder holding one is never an agent's own."""


def own_refusal(folder: Path, paths: Paths) -> str:
    """Why a folder of the agent's own (of a file its argv names, or in [agent] files) is not
    shown ('' when it is). Refused: HOME or above it, HOME's dot-folders (~/.config, ~/.local,
    ~/.cache: other tools' logins), a folder that holds a login folder (~/.ssh, ~/.aws, the
    keyrings), the checkout, its git folder, seed's state or the agents' checkouts, one inside
    the git folder, and the temporary roots. Checked by the resolved path too: a link grants
    nothing."""
    home = _real_home()
    kept = (paths.root, paths.common, paths.state, paths.checkouts.parent)
    for place in dict.fromkeys((folder, folder.resolve())):
        if place in _TEMP_ROOTS or place == Path(tempfile.gettempdir()):
            return "it holds every process's temporary files"
        if place == home or place in home.parents:
            return "it is HOME or holds it"
        held = next((n for n in _CREDENTIALS if (home / n).is_relative_to(place)), "")
        if held:
            return f"it holds ~/{held}, where logins live"
        if place.parent == home and place.name.startswith("."):
            return "it is one of HOME's own dot-folders, where tools keep their logins"
        if any(k.resolve().is_relative_to(place) for k in kept):
            return "it holds the checkout, its git folder, seed's state or the agents' checkouts"
        if place.is_relative_to(paths.common.resolve()):
            return "it is inside the repository's git folder"
    return ""


def _secret_file(file: Path, paths: Paths) -> bool:
    """A file no agent is shown even when its argv names it: a login's, or the kernel's."""
    home = _real_home()
    real = file.resolve()
    logins = [home / n for n in _CREDENTIALS]
    return any(real.is_relative_to(p.resolve()) for p in (*logins, paths.common))


def own_folders(
    argv: Sequence[str], listed: Sequence[str], paths: Paths
) -> tuple[tuple[Path, ...], tuple[str, ...]]:
    """The agent's own places, each shown read-only by its exact path: the folder of each file
    its argv names (only the file when the folder is refused), and each place [agent] files
    lists (a folder, or a file); and why any was refused."""
    shown: list[Path] = []
    refused: list[str] = []
    for file in (Path(a) for a in argv if os.path.isabs(a) and Path(a).is_file()):
        why = own_refusal(file.parent, paths)
        if not why:
            shown.append(file.parent)
        elif not _secret_file(file, paths):
            shown.append(file)
            refused.append(f"the folder of {file} is not shown, only the file: {why}")
    for raw in listed:
        place = Path(os.path.expanduser(raw))
        why = (
            "it is not an absolute path that exists"
            if not place.is_absolute() or not place.exists()
            else own_refusal(place if place.is_dir() else place.parent, paths)
        )
        if place.is_file() and why and not _secret_file(place, paths):
            shown.append(place)  # a file of its own, in a folder that may not be shown
        elif why:
            refused.append(f"[agent] files {raw!r} is not shown: {why}")
        else:
            shown.append(place)
    return tuple(dict.fromkeys(shown)), tuple(dict.fromkeys(refused))


def _prefixes(python: Path) -> tuple[Path, ...]:
    """An interpreter's installation: its virtualenv (if any) and the prefix it resolves to."""
    return (python.parent.parent, python.resolve().parent.parent)


def _installation(command: Path) -> tuple[Path, ...]:
    """What an agent's own program needs to run: the file, the npm package or virtualenv or
    version folder it resolves into, and the same for the interpreter its #! line names."""
    found: list[Path] = [command]
    for program in (command, _interpreter(command)):
        if program is None:
            continue
        real = program.resolve()
        found += [program, real, _package(real)]
    return tuple(found)


def _package(real: Path) -> Path:
    """The installation a resolved program file belongs to."""
    for parent in real.parents:
        above = parent.parent
        if above.name == "node_modules" and not parent.name.startswith("@"):
            return parent  # node_modules/PKG
        if above.name.startswith("@") and above.parent.name == "node_modules":
            return parent  # node_modules/@scope/PKG
    if real.parent.name == "bin":
        return real.parent.parent  # a prefix: a virtualenv, ~/.nvm/versions/node/vX
    if real.parent.name == "shims" and (real.parent.parent / "libexec" / "pyenv").is_file():
        return real.parent.parent  # pyenv's root: its shims run libexec/pyenv and a version
    return real.parent


def _interpreter(program: Path) -> Path | None:
    """The interpreter a script's #! line names (through /usr/bin/env, looked up on PATH)."""
    try:
        with program.open("rb") as handle:
            first = handle.read(256).split(b"\n", 1)[0]
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    words = first[2:].decode("utf-8", errors="replace").split()
    if words and words[0].endswith("/env"):
        words = [w for w in words[1:] if not w.startswith("-")]
        found = shutil.which(words[0]) if words else None
        return Path(found) if found else None
    return Path(words[0]) if words and os.path.isabs(words[0]) else None


def _shown(
    paths: Paths,
    pythons: Sequence[Path] = (),
    command: Path | None = None,
    files: Sequence[Path] = (),
) -> tuple[Path, ...]:
    """What a run must still see read-only where HOME and /tmp are covered, each by its exact
    path, never its parent: the repository, seed, the interpreters' installations, and for an
    agent its own program's installation, the files its argv names and the PATH folders (not
    what sits beside them)."""
    home = _real_home()
    places = [paths.root, paths.seed_home, Path(sys.prefix), Path(sys.base_prefix)]
    for python in (Path(sys.executable), *pythons):
        places += _prefixes(python)
    if command is not None:
        places += _installation(command)
        places += [Path(p) for p in os.environ.get("PATH", "").split(os.pathsep)]
    places += files
    # a file an argv names is shown, but never a login's or the kernel's (by any name)
    kept = (p for p in places if p.is_absolute() and not _secret_file(p, paths))
    return tuple(dict.fromkeys(p for p in kept if _exact(p.resolve(), home)))


def _secrets() -> tuple[Path, ...]:
    """Credentials under HOME, hidden again wherever a shown folder would include them."""
    home = Path(os.environ.get("HOME") or "/nonexistent")
    return tuple(home / name for name in _NEVER_SHOWN)


def _measurement(
    guard: GuardConfig, paths: Paths, network: bool = False, **mounts: Any
) -> sandbox.Profile:
    """The profile of a run of repository code: no network (unless a test run's config gives
    it), no sockets, an empty private HOME, the kernel's state hidden, nothing writable but
    what the caller names."""
    return _limited(
        guard, hidden=(paths.state, *_secrets()), private_home=True, network=network, **mounts
    )


def measurement_jail(paths: Paths, guard: GuardConfig, *, network: bool = False) -> Jail | None:
    """The sandbox for runs of repository code, or None when it is off or missing. With
    `network`, the host's network (test runs under `[quality] test_network = "full"` only).

    The tree under test is bound over the person's checkout: editable installs (`.pth` path
    entries, setuptools finders, PEP 660 hooks) and the subprocesses tests start import the
    tree's code by the checkout's paths, with no variable to carry it. Of the person's side
    the run sees, read-only, only the environment the tests run with and the build products
    git ignores that an editable install needs (`build_products`), and the other files git
    ignores that the tests may read (`ignored.ignored_files`); the kernel's plugin too, when
    seed measures itself."""
    if not enabled(guard) or not sandbox.available().ok:
        return None

    def jail(
        argv: Sequence[str],
        tree: Path,
        writable: Sequence[Path],
        /,
        *,
        pythons: Sequence[Path] = (),
    ) -> Jailed:
        first = (Path(argv[0]),) if argv and os.path.isabs(argv[0]) else ()
        python = (*first, *(p for p in pythons if p.is_absolute()))
        # the environment whose editable installs and build products the run imports
        target = python[-1] if python else None
        root = paths.root.resolve()
        in_place = (tree, root) if tree.resolve() != root else None
        # the tree's own file wins over a build product of the same name; the environment
        # and the kernel's plugin never give way to anything in the tree
        shown = build_products(root, target) + tuple(
            (f, f) for f in ignored.ignored_files(root).files
        )
        through = tuple(
            (source, place)
            for source, place in dict.fromkeys(shown)
            if not os.path.lexists(tree / place.relative_to(root))
            and not any(place.is_relative_to(s) and place != s for s, _ in shown)
        )
        if root != PLUGIN_DIR and PLUGIN_DIR.is_relative_to(root):
            through += ((PLUGIN_DIR, PLUGIN_DIR),)
        profile = _measurement(
            guard,
            paths,
            network,
            writable=(tree, *writable),
            shown=_shown(paths, python),
            in_place=in_place,
            through=through,
            named=_linked_entries(root, target),
        )
        made = tuple(sandbox.mount_points(profile))
        return Jailed(sandbox.wrap(argv, profile), root if in_place else tree, made)

    return jail


_IMPORTED = (".py", ".pyi", ".so", ".pyd")
"""Suffixes of files Python imports (a C extension built in place: `name.cpython-*.so`)."""
_MAX_PRODUCTS = 1000
"""Build products shown at most (each is one mount)."""


def build_products(root: Path, python: Path | None) -> tuple[tuple[Path, Path], ...]:
    """What an editable install needs from the person's checkout that git ignores, so the
    export lacks it, each as (source, place), the same path: an ignored file with an import
    suffix in a folder that holds tracked Python files (a generated `_version.py`, an
    extension module built in place), and an ignored folder the environment's `.pth` files
    name (a build folder on the path) with the ignored `*.egg-info` beside it.

    An allow-list read only from the person's side (their checkout's git, their
    environment), never from anything a run or the agent wrote; regular files and folders
    whose path holds no link. Everything else git ignores (`.env`, caches, data) stays unseen."""
    listed = gitops.git(
        root,
        "ls-files",
        "-z",
        "--others",
        "--ignored",
        "--exclude-standard",
        "--directory",
        "--no-empty-directory",
        check=False,
    )
    tracked = gitops.git(root, "ls-files", "-z", "--", "*.py", check=False)
    if not listed.ok or not tracked.ok:
        return ()
    ignored = [n for n in listed.text().split("\0") if n]
    packages = {str(PurePosixPath(n).parent) for n in tracked.text().split("\0") if n}
    found = [
        root / name
        for name in ignored
        if not name.endswith("/")
        and name.endswith(_IMPORTED)
        and str(PurePosixPath(name).parent) in packages
    ]
    folders = [name.rstrip("/") for name in ignored if name.endswith("/")]
    for entry in _path_entries(root, python):
        rel = entry.relative_to(root).as_posix()
        if any(rel == f or rel.startswith(f + "/") for f in folders):
            found.append(entry)
        found += [
            root / f
            for f in folders
            if f.endswith(".egg-info") and str(PurePosixPath(f).parent) == rel
        ]
    kept = [p for p in dict.fromkeys(found) if p.resolve() == p and (p.is_file() or p.is_dir())]
    return tuple((p, p) for p in kept[:_MAX_PRODUCTS])


def _path_entries(root: Path, python: Path | None) -> list[Path]:
    """Folders inside the checkout that the `.pth` files of the environment `python` belongs
    to name (a path entry of an editable install)."""
    return [p for p in _pth_entries(python) if p != root and p.is_relative_to(root)]


def _pth_entries(python: Path | None) -> list[Path]:
    """The absolute path entries the `.pth` files of the environment `python` belongs to name."""
    if python is None:
        return []
    prefix = python.parent.parent
    found: list[Path] = []
    for pth in sorted(prefix.glob("lib*/python3*/site-packages/*.pth"))[:200]:
        try:
            lines = pth.read_text(encoding="utf-8", errors="replace").splitlines()[:200]
        except OSError:
            continue
        for line in lines:
            entry = line.strip()
            if entry.startswith(("#", "import ", "import\t")) or not os.path.isabs(entry):
                continue
            found.append(Path(os.path.normpath(entry)))
    return found


def _linked_entries(root: Path, python: Path | None) -> tuple[Path, ...]:
    """Path entries naming the checkout through a link (`pip install -e .` run in a linked
    folder): runs reach the tree by that name, so the links on the way are made again."""
    found = [p for p in _pth_entries(python) if not p.is_relative_to(root)]
    return tuple(p for p in found if Path(os.path.realpath(p)).is_relative_to(root))[:50]


@dataclass(frozen=True)
class ModuleJail:
    """The sandbox of module code (the module server, the self-check, a fitness replay): the
    test-run profile with nothing writable (answers go out on a pipe, the log on a descriptor
    the kernel opened), the code's folder bound read-only at seed's own folder (`place`),
    which is its working folder. Wherever the code came from (HEAD's, a generation's under
    test, the last good one's), it runs at one path, from one folder, in one profile: a run
    that is measured cannot be told from one that is used."""

    paths: Paths
    guard: GuardConfig

    @property
    def place(self) -> Path:
        """Where module code sees its own folder: seed's."""
        return self.paths.seed_home

    def __call__(self, argv: Sequence[str], code: Path) -> list[str]:
        """argv sandboxed, with the code folder at `place`."""
        # the planner reads the iteration's fresh checkout of HEAD (ProjectState.worktree):
        # the checkouts' folder is shown read-only, made first so the bind exists
        self.paths.checkouts.mkdir(parents=True, exist_ok=True)
        shown = (*_shown(self.paths), self.paths.checkouts)
        place = self.place
        if code.resolve() == place.resolve():  # seed's folder itself: its state stays hidden
            mounts: dict[str, Any] = {"readonly": (code,)}
        else:
            mounts = {"in_place": (code, place), "frozen": True}
        profile = _measurement(self.guard, self.paths, shown=shown, chdir=place, **mounts)
        return sandbox.wrap(argv, profile)


def module_jail(paths: Paths, guard: GuardConfig) -> ModuleJail | None:
    """The sandbox of module code; None when the sandbox is off or missing."""
    if not enabled(guard) or not sandbox.available().ok:
        return None
    return ModuleJail(paths, guard)


def extra_writable(paths: Paths) -> tuple[Path, ...]:
    """Folders the person lets a sandboxed agent write besides its worktree: SEED_SANDBOX_WRITABLE
    in the daemon's environment (a tool's shared cache; test harnesses' trace folders). The
    agent cannot change the daemon's environment, so it cannot widen this. A place inside the
    kernel's state folder is never one (the seal key and the kernel's records live there); a
    folder around it is bound under the state's hiding (`sandbox._mounts`), and what the run
    changes in the checkout or `.git` through it is a violation (`integrity.py`)."""
    raw = os.environ.get("SEED_SANDBOX_WRITABLE", "")
    state = paths.state.resolve()
    return tuple(
        Path(p)
        for p in raw.split(os.pathsep)
        if p and os.path.isabs(p) and not Path(p).resolve().is_relative_to(state)
    )


def home_names(names: Sequence[str]) -> tuple[str, ...]:
    """The adapter's HOME entries that may be shown: relative, inside HOME, no credentials."""
    kept: list[str] = []
    for name in names:
        pure = PurePosixPath(name)
        if pure.is_absolute() or ".." in pure.parts or not pure.parts:
            continue
        text = pure.as_posix()
        if any(text == n or text.startswith(n + "/") for n in _NEVER_SHOWN):
            continue
        kept.append(text)
    return tuple(kept)


def agent_argv(
    argv: Sequence[str],
    *,
    paths: Paths,
    guard: GuardConfig,
    writable: Sequence[Path],
    readonly: Sequence[Path],
    home: Path,
    home_binds: Sequence[str],
    cwd: Path,
    listed: Sequence[str] = (),
) -> list[str]:
    """The agent's argv, sandboxed: only the named places writable, HOME private."""
    profile = _agent_profile(
        argv,
        paths=paths,
        guard=guard,
        writable=writable,
        readonly=readonly,
        home=home,
        home_binds=home_binds,
        cwd=cwd,
        listed=listed,
    )
    return sandbox.wrap(argv, profile)


def _agent_profile(
    argv: Sequence[str],
    *,
    paths: Paths,
    guard: GuardConfig,
    writable: Sequence[Path],
    readonly: Sequence[Path],
    home: Path,
    home_binds: Sequence[str],
    cwd: Path,
    listed: Sequence[str] = (),
) -> sandbox.Profile:
    """The agent's profile with the network kept (today's)."""
    program = Path(shutil.which(argv[0]) or argv[0]) if argv else None
    files = [Path(a) for a in argv[1:] if os.path.isabs(a) and Path(a).exists()]
    command = program if program and program.is_absolute() else None
    own, _ = own_folders(argv, listed, paths)
    return _limited(
        guard,
        writable=tuple(writable),
        readonly=tuple(readonly),
        hidden=(paths.state, *_secrets()),
        shown=(*_shown(paths, command=command, files=files), *own),
        home=home,
        home_binds=home_names(home_binds),
        network=True,
        chdir=cwd,
    )


MODEL_SOCKET = Path("/run/seed/model.sock")
"""Where a model-only agent sees the gateway's Unix socket (under the run's empty /run)."""
MODEL_PORT = 8700
"""The forwarder's port on the sandbox's own loopback: the namespace is new and empty, so any
fixed port is free, and it is bound before the agent starts."""
MODEL_URL = f"http://127.0.0.1:{MODEL_PORT}"
MODEL_URL_ENV = "SEED_MODEL_BASE_URL"
"""The variable that tells a model-only agent (and its adapter's settings) the base URL."""
_FORWARDER = Path(__file__).with_name("forwarder.py")

Network = Literal["full", "model-only"]


@dataclass(frozen=True)
class AgentSandbox:
    """An agent's run, sandboxed, and how it reaches its model."""

    argv: list[str]
    base_url: str = ""
    """The model API's base URL inside the sandbox ('' with the network kept)."""
    env: dict[str, str] = field(default_factory=lambda: dict[str, str]())
    """Variables the agent runs with besides its own (the base URL; no proxy for loopback)."""


def agent_sandbox(
    argv: Sequence[str],
    *,
    paths: Paths,
    guard: GuardConfig,
    writable: Sequence[Path],
    readonly: Sequence[Path],
    home: Path,
    home_binds: Sequence[str],
    cwd: Path,
    listed: Sequence[str] = (),
    network: Network = "full",
    gateway: Path | None = None,
) -> AgentSandbox:
    """The agent's run with the network kept ("full", `agent_argv`'s argv exactly), or with
    none but its model ("model-only"): a network namespace of its own holding only a loopback,
    the gateway's Unix socket (`gateway`, the kernel's) bound at MODEL_SOCKET, and the
    forwarder as the agent's parent, relaying 127.0.0.1:MODEL_PORT to that socket."""
    profile = _agent_profile(
        argv,
        paths=paths,
        guard=guard,
        writable=writable,
        readonly=readonly,
        home=home,
        home_binds=home_binds,
        cwd=cwd,
        listed=listed,
    )
    if network == "full":
        return AgentSandbox(sandbox.wrap(argv, profile))
    if gateway is None or not gateway.is_socket():
        raise ValueError(f"model-only needs the gateway's Unix socket, not {gateway}")
    profile = replace(profile, network=False, sockets=((gateway, MODEL_SOCKET),))
    # the forwarder's source is passed whole: seed's own folder may be unseen in the sandbox
    forwarder = [sys.executable, "-I", "-S", "-c", _FORWARDER.read_text(encoding="utf-8")]
    forwarder += ["--listen", f"127.0.0.1:{MODEL_PORT}", "--to", str(MODEL_SOCKET), "--"]
    env = {MODEL_URL_ENV: MODEL_URL, "NO_PROXY": "127.0.0.1,localhost"}
    env["no_proxy"] = env["NO_PROXY"]
    return AgentSandbox(sandbox.wrap([*forwarder, *argv], profile), MODEL_URL, env)
