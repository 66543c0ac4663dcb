"""What the target's environment has installed of a module, read from its files without
running it: a setup problem's advice (install the project) is never wrong about it."""

from __future__ import annotations

import ast
import contextlib
import importlib.metadata
import os
import re
import site
import sys
from pathlib import Path

_FINDER_MAPPING = re.compile(r"^MAPPING\s*(?::[^=\n]*)?=\s*(\{.*?\})\s*$", re.M | re.S)
"""setuptools' editable finder (`__editable___NAME_finder.py`): the modules it maps."""


def site_dirs(python: str) -> list[Path]:
    """The target environment's site-packages folders (a virtualenv's, or an installed
    interpreter's by its prefix), found by their place, never by running the interpreter."""
    if os.path.realpath(python) == os.path.realpath(sys.executable):
        return [Path(p) for p in site.getsitepackages() if os.path.isdir(p)]
    prefix = Path(python).parent.parent  # not resolved: a virtualenv's python links out of it
    found: list[Path] = []
    for pattern in ("lib*/python3*/site-packages", "lib*/python3*/dist-packages"):
        found += sorted(p for p in prefix.glob(pattern) if p.is_dir())
    return found


def _holds(folder: Path, name: str) -> bool:
    return (
        (folder / name).is_dir()
        or (folder / f"{name}.py").is_file()
        or any(folder.glob(f"{name}.*.so"))
    )


def _path_entries(packages: Path) -> list[Path]:
    """The folders `.pth` files add to sys.path (their `import` lines are not read)."""
    entries: list[Path] = []
    for pth in sorted(packages.glob("*.pth")):
        with contextlib.suppress(OSError, UnicodeDecodeError):
            for line in pth.read_text(encoding="utf-8").splitlines():
                line = line.strip()
                if line and not line.startswith(("#", "import ", "import\t")):
                    entries.append(packages / line)
    return [e for e in entries if e.is_dir()]


def _finder_maps(packages: Path, name: str) -> str:
    """Where setuptools' editable finder maps the module ('' when none does)."""
    for finder in sorted(packages.glob("__editable___*_finder.py")):
        with contextlib.suppress(OSError, UnicodeDecodeError, ValueError, SyntaxError):
            found = _FINDER_MAPPING.search(finder.read_text(encoding="utf-8"))
            mapping: object = ast.literal_eval(found.group(1)) if found else {}
            if isinstance(mapping, dict) and name in mapping:
                return str(mapping[name])  # pyright: ignore[reportUnknownArgumentType]
    return ""


def _distribution(packages: Path, name: str) -> str:
    """The installed distribution whose top-level modules include the module ('')."""
    for dist in importlib.metadata.distributions(path=[str(packages)]):
        with contextlib.suppress(OSError, ValueError):
            tops = (dist.read_text("top_level.txt") or "").split()
            tops += [f.parts[0].removesuffix(".py") for f in dist.files or () if f.parts]
            if name in tops:
                return f"{dist.metadata['Name']} {dist.version}"
    return ""


def where_installed(python: str, name: str) -> tuple[str, str]:
    """Where the target's environment imports a top-level module from outside the tree under
    test: said for a person, and the place itself (both '' when it has no such module)."""
    for packages in site_dirs(python):
        mapped = _finder_maps(packages, name)
        if mapped:
            return f"{mapped}, installed editable", mapped
        if _holds(packages, name):
            dist = _distribution(packages, name)
            return f"{packages / name}" + (f" ({dist})" if dist else ""), str(packages / name)
        for entry in _path_entries(packages):
            if _holds(entry, name):
                return f"{entry / name}, a path entry of a .pth file in {packages}", str(entry)
    return "", ""


def from_checkout(place: str, root: Path) -> bool:
    """Whether an installed place is the person's checkout's own code (an editable install
    of it), not a copy in an environment that happens to live there (`.venv`)."""
    real, top = os.path.realpath(place), os.path.realpath(root)
    inside = real == top or real.startswith(top + os.sep)
    return inside and not {"site-packages", "dist-packages"} & set(Path(real).parts)


def cannot_import(python: str, root: Path, name: str, held: str) -> str:
    """The line for a module the repository holds (`held`) that seed's test run could not
    import: the person's setup only when their environment cannot import it either."""
    where, place = where_installed(python, name)
    if where and from_checkout(place, root):
        return (
            f"seed: the tests could not import {name} in seed's run, though the test "
            f"environment ({python}) has it from this checkout ({where}): your own command "
            "can import it, so this is seed's to solve, not your setup; until then its test "
            "results are not gaps"
        )
    if where:
        return (
            f"setup: the test environment ({python}) imports {name} from {where}, not from "
            f"this repository ({held}), and cannot import what the repository holds: install "
            f"the project editable (`{python} -m pip install -e .` in {root}), or set `python` "
            "under [quality] in seed.toml to an interpreter that has it installed so; until "
            "then its test results are not gaps"
        )
    return (
        f"setup: the test environment ({python}) cannot import {name}, which this "
        f"repository holds ({held}), and has no {name} installed: install the project into "
        f"it (`{python} -m pip install -e .` in {root}), or set `python` under [quality] in "
        "seed.toml to an interpreter that has it installed; until then its test results are "
        "not gaps"
    )
