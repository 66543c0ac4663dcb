"""Everything one command needs: paths, config, target tools, record store, module host."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

from pydantic import ValidationError

from kernel.bounds import CONFIG_MAX_BYTES, clean
from kernel.config import Config, config_document, load_config
from kernel.errors import ConfigError, HostError, SeedError
from kernel.fsutil import append_line, atomic_write_text
from kernel.host.answers import Backend
from kernel.host.host import BootNeeds, ModuleHost, boot, reload_after_landing
from kernel.host.selfcheck import selfcheck
from kernel.isolation import gitops, jails
from kernel.isolation.paths import Paths, discover
from kernel.measuring.measure import Target, resolve_python, ruff_binary
from kernel.records import notify
from kernel.records.store import RecordStore
from kernel.terminal import say

DEFAULT_STRICT_SELFHOST = ("kernel", "domain", "modules")
IN_FORCE = "config-in-force.json"
"""The config the daemon put in force, in its state folder (`status` reads it)."""
SELFHOST_PROTECTED = ("domain/**", "requirements*.lock", ".venv/**")
"""On seed's own repository, what the kernel's processes run besides kernel/ and seed.py:
domain/ (every kernel process imports it), the locks the bootstrap installs and the
virtualenv it installs them in (SECURITY.md, "One level of trust")."""


def _own_protected(config: Config) -> Config:
    """The config with seed's own packages, locks and virtualenv protected (seed on itself)."""
    protected = list(dict.fromkeys((*config.guard.protected, *SELFHOST_PROTECTED)))
    guard = config.guard.model_copy(update={"protected": protected})
    return config.model_copy(update={"guard": guard})


def log_line(paths: Paths, message: str, *, echo: bool = True) -> None:
    """One line to history/daemon.log, cleaned (it quotes agents and the tree), and to stderr
    unless it was said there already."""
    line = clean(f"seed {datetime.now(UTC):%Y-%m-%d %H:%M:%S}Z {message}")
    if echo:
        # on a terminal, over the progress line (kernel/shell/progress.py) rather than after it
        say(line, sys.stderr, redraw=sys.stderr.isatty(), flush=True)
    with contextlib.suppress(OSError):  # a read-only history must not stop the daemon
        append_line(paths.history / "daemon.log", line)


def fingerprint(root: Path) -> str:
    """A short identity of the repository for the planner's memory (its first commit)."""
    result = gitops.git(root, "rev-list", "--max-parents=0", "HEAD", check=False)
    roots = result.text().split()
    return roots[-1][:12] if result.ok and roots else root.name


@dataclass
class Context:
    """Paths, config, target and the services a command uses."""

    paths: Paths
    config: Config
    config_path: Path
    target: Target
    store: RecordStore
    host: ModuleHost
    quiet: bool = False
    daemon: bool = False
    """A daemon (run, once) boots the host with the self-check and records fallbacks."""
    _backend: Backend | None = field(default=None, repr=False)
    inbox_ready: Callable[[], frozenset[str]] = field(default=frozenset, repr=False)
    """Inbox files known to be complete (closed after writing, or moved in); the daemon's watcher."""
    used_so_far: Callable[[str], None] = field(default=lambda figure: None, repr=False)
    """Where the running agent's usage so far is shown (the daemon's status.json)."""
    config_problem: str = ""
    """Why seed.toml cannot be used (`status` only: it shows the config in force instead)."""
    notify: notify.Notify = field(default=notify.nowhere, repr=False)
    """Where word to a person goes (records/notify.py; the daemon's outbox in `run` and `once`)."""

    def log(self, message: str) -> None:
        """Log a line unless quiet."""
        if not self.quiet:
            log_line(self.paths, message)

    def _boot_needs(self) -> BootNeeds:
        return BootNeeds(
            self.paths,
            self.store,
            self.log,
            selfcheck,
            jails.module_jail(self.paths, self.config.guard),
        )

    def start_host(self) -> None:
        """Start the module host if it is not running."""
        if not self.host.running:
            message = boot(self.host, self._boot_needs(), record=self.daemon)
            if self.daemon:
                self.log(message)

    def reload_host(self, touched: Sequence[str]) -> str:
        """Restart the module host after a landed change to seed's own modules or domain."""
        return reload_after_landing(self.host, self._boot_needs(), touched)

    def reload_config(self) -> bool:
        """Read seed.toml again; whether it changed what is in force (SeedError: the config
        in force stays, whole).

        A change chooses the backend again and restarts the module host in its new jail.
        """
        config, target = _configured(self.paths, self.config_path, self.log)
        if config == self.config:
            return False
        before = (self.config, self.target, self._backend)
        self.config, self.target, self._backend = config, target, None
        try:
            self.backend()
        except SeedError:
            self.config, self.target, self._backend = before
            raise
        self.host.stop()
        self.host.jail = jails.module_jail(self.paths, config.guard)
        self.remember_config()
        return True

    def remember_config(self) -> None:
        """Keep the config in force where `status` finds it while seed.toml cannot be used."""
        with contextlib.suppress(OSError):
            text = json.dumps(config_document(self.config))
            atomic_write_text(self.paths.state / IN_FORCE, text + "\n")

    def backend(self) -> Backend:
        """The configured backend, or the first installed one for "auto" (with the reason)."""
        if self._backend is not None:
            return self._backend
        self.start_host()
        agents, _ = self.host.agents()
        wanted = self.config.agent.backend
        if wanted != "auto" and wanted not in agents:
            raise ConfigError(
                f"{self.config_path}: key 'agent.backend': unknown backend {wanted!r}; valid: auto, {', '.join(sorted(agents))}"
            )
        chosen = self.host.choose_backend(wanted, self.config_path.name, agents)
        if chosen.name == "command" and not self.config.agent.command:
            raise HostError("module host chose the command backend, but agent.command is not set")
        self._backend = chosen
        return self._backend


def _configured(
    paths: Paths, path: Path, note: Callable[[str], None] | None = None
) -> tuple[Config, Target]:
    """seed.toml read (what it says of removed keys to `note`, else stderr), and the target's
    tools as it sets them."""
    return _target(paths, load_config(path, note), path)


def _target(paths: Paths, config: Config, path: Path) -> tuple[Config, Target]:
    """The config with the target's tools as it sets them (and, on seed itself, its own
    packages, locks and virtualenv protected, whichever config stands)."""
    if paths.selfhost:
        config = _own_protected(config)
    strict = (
        tuple(config.quality.pyright_strict)
        if config.quality.pyright_strict is not None
        else (DEFAULT_STRICT_SELFHOST if paths.selfhost else ())
    )
    python = resolve_python(paths.root, config.quality.python)
    if config.quality.python and not Path(python).exists():
        raise ConfigError(f"{path}: key 'quality.python': {python} does not exist")
    target = Target(
        root=paths.root,
        python=python,
        quality=config.quality,
        strict=strict,
        jail=jails.measurement_jail(paths, config.guard),
        test_jail=(
            jails.measurement_jail(paths, config.guard, network=True)
            if config.quality.test_network == "full"
            else None
        ),
    )
    return config, target


def open_context(
    root: Path, config_path: Path | None = None, quiet: bool = False, keep_going: bool = False
) -> Context:
    """Discover the repository, read seed.toml, and prepare (not start) the module host.

    keep_going (`status`): a seed.toml that cannot be used is named in config_problem, and
    the config the daemon last used (or the defaults) stands in for it."""
    paths = discover(root)
    path = config_path if config_path is not None else paths.root / "seed.toml"
    # a removed key is news for the daemon's log; a quiet command says it on stderr
    problem = ""
    try:
        # a removed key is news for the daemon's log; a quiet command says it on stderr
        config, target = _configured(paths, path, None if quiet else partial(log_line, paths))
    except ConfigError as exc:
        if not keep_going:
            raise
        problem = str(exc)
        try:
            config, target = _target(paths, in_force(paths), path)
        except ConfigError:
            config, target = _target(paths, Config(), path)
    store = RecordStore(paths.history, fingerprint=fingerprint(paths.root), state=paths.state)
    host = ModuleHost(
        paths.seed_home, paths.state / "host.log", jail=jails.module_jail(paths, config.guard)
    )
    ruff_binary()  # fail early (at startup, not mid-iteration) if ruff is missing
    return Context(
        paths=paths,
        config=config,
        config_path=path,
        target=target,
        store=store,
        host=host,
        quiet=quiet,
        config_problem=problem,
    )


def in_force(paths: Paths) -> Config:
    """The config the daemon last put in force (the defaults when there is none to read)."""
    with contextlib.suppress(OSError, ValueError, ValidationError):
        return Config.model_validate_json((paths.state / IN_FORCE).read_bytes()[:CONFIG_MAX_BYTES])
    return Config()
