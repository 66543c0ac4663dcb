"""On seed's own repository, what the kernel's processes import or install from seed's folder
is protected like kernel/ (issue 39, item 3): domain/, the locks the bootstrap installs and
its virtualenv. Elsewhere a project's folders of those names are its own."""

from __future__ import annotations

from pathlib import Path

from kernel.contracts import matches_any, protected_patterns
from kernel.host.context import _configured
from kernel.isolation.paths import Paths

OWN = (
    "domain/__init__.py",
    "domain/plans.py",
    "requirements.lock",
    "requirements-test.lock",
    ".venv/lib/python3.11/site-packages/sitecustomize.py",
)


def _protected(root: Path, seed_home: Path) -> tuple[str, ...]:
    """What the guard protects in root, seed.toml read as the daemon reads it."""
    paths = Paths(root=root, common=root / ".git", seed_home=seed_home)
    config, _ = _configured(paths, root / "seed.toml")
    return protected_patterns(config.guard.protected)


def test_seeds_own_packages_locks_and_virtualenv_are_protected_on_seed_itself(
    tmp_path: Path,
) -> None:
    on_itself = _protected(tmp_path, seed_home=tmp_path)
    assert all(matches_any(p, on_itself) for p in OWN)
    assert not matches_any("modules/planner/planner.py", on_itself)
    elsewhere = _protected(tmp_path, seed_home=tmp_path / "seed")
    assert not any(matches_any(p, elsewhere) for p in OWN)
