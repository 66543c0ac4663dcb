"""The ruff a project runs, as the analysis of a commit has it: its pinned version from seed's
tool cache (else seed's own), and whether it adopted ruff format."""

from __future__ import annotations

import functools
from pathlib import Path

from kernel.config import QualityConfig
from kernel.isolation import gitops
from kernel.measuring import pins
from kernel.measuring.gate import adoption, paths_at, read_at, running_ruff_version
from kernel.measuring.measure import ruff_binary


def project_ruff(root: Path, commit: str, quality: QualityConfig) -> tuple[str, bool]:
    """The ruff executable the gate of this commit runs, and whether ruff format takes part
    (never installs: the analysis did, or seed's own ruff runs, as it does for the gate)."""
    read = functools.cache(read_at(root, commit))
    try:
        paths = paths_at(root, commit)
    except gitops.GitError:
        return ruff_binary(), False
    exe = ruff_binary()
    pin = pins.pinned_ruff(read, tuple(paths))
    if pin is not None and pin.version != running_ruff_version():
        found = pins.binary(pin.version)
        exe = str(found) if found is not None and not pins.cannot_judge(found) else exe
    return exe, "ruff-format" in adoption(read, quality, paths).tools
