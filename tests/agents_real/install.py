"""Install the real agent CLIs the tests in tests/agents_real drive, pinned, into a shared cache.

    python -m tests.agents_real.install            # all of them
    python -m tests.agents_real.install npm aider  # only these

The npm CLIs (Claude Code, Codex, Gemini CLI, opencode) come from package.json and
package-lock.json here (`npm ci`), Aider from requirements-aider.lock and mini-swe-agent from
requirements-mini.lock (both hashed). Each lands in a folder under ~/.cache/seed/
($XDG_CACHE_HOME/seed) named by the hash of its lock file, so a changed pin installs afresh and
clones share one install. A second run finds the marker and does nothing; a file lock keeps two
sessions from installing the same folder at once. Prints, per part, the seconds it took and
its size.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEED_HOME = HERE.parent.parent
PACKAGE = HERE / "package.json"
PACKAGE_LOCK = HERE / "package-lock.json"

NPM_BINS = {"claude": "claude", "codex": "codex", "gemini": "gemini", "opencode": "opencode"}
"""Backend name to the program npm links into node_modules/.bin."""


def cache_root() -> Path:
    """~/.cache/seed, or $XDG_CACHE_HOME/seed."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "seed"


def _stamp(*files: Path) -> str:
    digest = hashlib.sha256()
    for file in files:
        digest.update(file.read_bytes())
    return digest.hexdigest()[:16]


@dataclass(frozen=True)
class Part:
    """One install: a folder keyed by its lock, and the marker that says it is complete."""

    name: str
    folder: Path
    marker: Path

    @property
    def installed(self) -> bool:
        """Whether a complete install is there."""
        return self.marker.exists()


def npm_part() -> Part:
    """The npm CLIs' folder (node_modules/.bin holds the programs)."""
    stamp = _stamp(PACKAGE, PACKAGE_LOCK)
    folder = cache_root() / f"agent-clis-npm-{stamp}"
    return Part("npm", folder, folder / f".seed-agent-clis-{stamp}")


def venv_part(name: str) -> Part:
    """A virtualenv for requirements-NAME.lock (the same folder test_mini_real.py uses for mini)."""
    lock = SEED_HOME / f"requirements-{name}.lock"
    stamp = _stamp(lock)
    folder = cache_root() / f"venv-{name}-{stamp}"
    return Part(name, folder, folder / f".seed-requirements-{name}-{stamp}")


PARTS = ("npm", "aider", "mini")


def part(name: str) -> Part:
    """One part by name."""
    return npm_part() if name == "npm" else venv_part(name)


def programs() -> dict[str, Path]:
    """Backend name to its installed program, for the parts that are installed."""
    found: dict[str, Path] = {}
    npm = npm_part()
    if npm.installed:
        for backend, program in NPM_BINS.items():
            found[backend] = npm.folder / "node_modules" / ".bin" / program
    for name in ("aider", "mini"):
        venv = venv_part(name)
        if venv.installed:
            found[name] = venv.folder / "bin" / name
    return found


def _run(argv: list[str], **kwargs: object) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, check=False, **kwargs)  # type: ignore[call-overload]
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:4])} ... failed:\n{(done.stdout + done.stderr)[-4000:]}")


def _node_major() -> int:
    """The major version of the node on PATH (0 when there is none)."""
    try:
        done = subprocess.run(["node", "--version"], capture_output=True, text=True, check=False)
    except OSError:
        return 0
    digits = done.stdout.strip().lstrip("v").split(".")[0]
    return int(digits) if digits.isdigit() else 0


def _install_npm(part: Part) -> None:
    if _node_major() < 20 or shutil.which("npm") is None:
        raise SystemExit("the npm agent CLIs need node 20 or newer with npm on PATH")
    shutil.rmtree(part.folder, ignore_errors=True)
    part.folder.mkdir(parents=True)
    shutil.copy(PACKAGE, part.folder / "package.json")
    shutil.copy(PACKAGE_LOCK, part.folder / "package-lock.json")
    # `npm ci` refuses a lock that lacks the optional native packages of other platforms (a
    # registry mirror may hold only this platform's); `npm install` follows the lock as it is
    npm = ["npm", "install", "--prefix", str(part.folder), "--no-audit", "--no-fund"]
    _run([*npm, "--no-save", "--loglevel=error"])


def _install_venv(part: Part) -> None:
    lock = SEED_HOME / f"requirements-{part.name}.lock"
    _run([sys.executable, "-m", "venv", "--clear", str(part.folder)])
    pip = [str(part.folder / "bin" / "python"), "-m", "pip", "install", "--quiet"]
    _run([*pip, "--disable-pip-version-check", "--require-hashes", "-r", str(lock)])


def size_of(folder: Path) -> int:
    """Bytes of the files under a folder (links not followed, a hard-linked file counted once)."""
    total = 0
    seen: set[tuple[int, int]] = set()
    for dirpath, _dirs, files in os.walk(folder):
        for name in files:
            with contextlib.suppress(OSError):
                info = os.lstat(os.path.join(dirpath, name))
                if (info.st_dev, info.st_ino) not in seen:
                    seen.add((info.st_dev, info.st_ino))
                    total += info.st_size
    return total


def install(wanted: Part) -> float:
    """Install one part unless it is there; the seconds it took (0 when it was there)."""
    wanted.folder.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{wanted.folder}.lock", "w") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)  # two sessions must not install one folder at once
        if wanted.installed:
            return 0.0
        start = time.monotonic()
        if wanted.name == "npm":
            _install_npm(wanted)
        else:
            _install_venv(wanted)
        wanted.marker.write_text("ok\n")
        return time.monotonic() - start


def main(names: list[str]) -> int:
    """Install the named parts (all when none are named) and report time and size."""
    wanted = names or list(PARTS)
    unknown = [n for n in wanted if n not in PARTS]
    if unknown:
        print(f"unknown part(s): {', '.join(unknown)}; known: {', '.join(PARTS)}", file=sys.stderr)
        return 2
    for name in wanted:
        found = part(name)
        seconds = install(found)
        how = f"installed in {seconds:.0f}s" if seconds else "already installed"
        print(f"{name}: {how}, {size_of(found.folder) / 1e6:.0f} MB at {found.folder}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
