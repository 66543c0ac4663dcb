"""The boot self-check: the modules of a tree load in a host of their own and meet their contracts."""

from __future__ import annotations

from pathlib import Path

from kernel.errors import HostError
from kernel.host import ModuleHost


def selfcheck(tree: Path, log: Path) -> tuple[bool, str]:
    """Start a module host from tree; every module must load and satisfy its contract."""
    host = ModuleHost(tree, log, timeout_s=120)
    try:
        hello = host.start()
        host.agents()
    except HostError as exc:
        return False, str(exc)[:500]
    finally:
        host.stop()
    analyzers = ", ".join(str(a) for a in hello.get("analyzers", []))
    return True, f"modules load and meet their contracts (analysers: {analyzers})"
