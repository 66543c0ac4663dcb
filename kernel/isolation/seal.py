"""Seals on the kernel's own state: an HMAC with a key only the kernel reads.

The key lives in the kernel's state folder, which every sandbox profile hides (agents, test
runs); the hiding is mounted after any writable place around it (`sandbox._mounts`), no
place inside the state folder is ever a person's extra writable one (`jails.extra_writable`),
and no agent checkout lives there (`paths.checkouts`), so nothing writable can cover the key.
A cache entry or snapshot whose seal does not match was not written by this kernel and is
not used (a forged measurement would otherwise skip the test run).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

_KEY_NAME = "seal.key"


def _key(state: Path) -> bytes:
    path = state / _KEY_NAME
    try:
        key = path.read_bytes()
        if len(key) == 32:
            return key
    except OSError:
        pass
    state.mkdir(parents=True, exist_ok=True)
    key = secrets.token_bytes(32)
    temp = state / f".{_KEY_NAME}.{os.getpid()}"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(key)
    os.replace(temp, path)
    return key


def seal(state: Path, data: bytes) -> str:
    """The seal of data (hex)."""
    return hmac.new(_key(state), data, hashlib.sha256).hexdigest()


def valid(state: Path, data: bytes, mac: str) -> bool:
    """Whether mac is this kernel's seal of data."""
    return hmac.compare_digest(seal(state, data), mac)
