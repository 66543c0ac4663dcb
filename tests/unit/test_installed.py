"""A setup problem's advice is never wrong about what the target's environment has installed
(issue 41): read from a real virtualenv's files, never by running it."""

from __future__ import annotations

import venv
from pathlib import Path

from kernel.measuring.installed import cannot_import, where_installed


def _environment(at: Path) -> tuple[str, Path]:
    venv.EnvBuilder(with_pip=False, symlinks=True).create(at)
    [packages] = at.glob("lib/python3*/site-packages")
    return str(at / "bin" / "python"), packages


def test_an_editable_install_of_the_checkout_is_seeds_to_solve_not_the_persons(
    tmp_path: Path,
) -> None:
    root = tmp_path / "repo"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "pkg" / "__init__.py").write_text("", encoding="utf-8")
    python, packages = _environment(root / ".venv")
    assert where_installed(python, "pkg") == ("", "")
    said = cannot_import(python, root, "pkg", "src/pkg")
    assert said.startswith("setup: ") and "has no pkg installed" in said
    # pip's editable install through a path entry: the project's own command imports it
    (packages / "__editable__.pkg-1.0.pth").write_text(f"{root / 'src'}\n", encoding="utf-8")
    said = cannot_import(python, root, "pkg", "src/pkg")
    assert said.startswith("seed: ") and "seed's to solve, not your setup" in said
    assert "pip install" not in said
    # setuptools' editable finder, mapping the module to the checkout
    (packages / "__editable__.pkg-1.0.pth").unlink()
    (packages / "__editable___pkg_1_0_finder.py").write_text(
        f"import sys\nMAPPING: dict[str, str] = {{'pkg': '{root / 'src' / 'pkg'}'}}\n",
        encoding="utf-8",
    )
    assert where_installed(python, "pkg")[1] == str(root / "src" / "pkg")
    assert cannot_import(python, root, "pkg", "src/pkg").startswith("seed: ")
    # a module of another name is not installed by it
    assert where_installed(python, "other") == ("", "")
