"""How the loop stops: a small hierarchy of exceptions that carry what happened."""

from __future__ import annotations

from domain import IterationRecord


class SeedError(Exception):
    """Base of everything the kernel raises on purpose."""


class UsageError(SeedError):
    """Bad usage, bad config or a daemon already running: exit 2."""


class ConfigError(UsageError):
    """seed.toml is malformed; the message names the file and the key."""


class LockHeld(UsageError):
    """Another daemon holds the repository's lock."""


class HostError(SeedError):
    """The module host failed to start or gave an answer the kernel refuses."""


class StopLoop(SeedError):
    """The loop must stop; carries the record of the iteration it ended, if any."""

    def __init__(self, message: str, record: IterationRecord | None = None) -> None:
        super().__init__(message)
        self.record = record


class Interrupted(StopLoop):
    """Ctrl-C or SIGTERM: end the agent, discard the worktree, record ABORTED."""


class Halted(StopLoop):
    """A halt condition holds: no agent runs until `seed.py resume`."""
