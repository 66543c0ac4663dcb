"""Incremental measurement: what is re-checked after a change, and that it finds what a full run finds."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from domain import Measurements, Tool
from kernel.host.context import open_context
from kernel.isolation import gitops
from kernel.isolation.exports import Export
from kernel.measuring.baseline import measure_cached
from kernel.measuring.gate import freeze_gate
from kernel.measuring.incremental import (
    dependents,
    imported_names,
    module_names,
    plan_scope,
    tree_delta,
)
from kernel.measuring.measure import measure
from kernel.records.signature import identity
from tests.planted import target_for
from tests.support import git, make_repo

LAYERED = {
    "pyproject.toml": '[tool.ruff.lint]\nselect = ["E", "F", "I"]\n',
    "app/__init__.py": "",
    "app/core.py": "def double(x: int) -> int:\n    return x * 2\n",
    "app/mid.py": "from app.core import double\n\n\ndef quad(x: int) -> int:\n    return double(double(x))\n",
    "app/top.py": "from .mid import quad\n\nRESULT: int = quad(2)\n",
    "app/other.py": "import os\n\nVALUE: int = 1\n",  # F401, untouched by the change
    "app/gone.py": "NAME = 'gone'\n",
    "app/uses_gone.py": "from app.gone import NAME\n\nprint(NAME)\n",
    "tools/script.py": "import json\n\nprint(json.dumps({}))\n",
    **{f"lib/filler_{i}.py": f"N{i}: int = {i}\n" for i in range(12)},
}
"""A chain of imports (core <- mid <- top), a module with a finding, a module that goes away,
and enough unrelated files that a one-file change is worth measuring incrementally."""


def test_imported_names_cover_every_import_form() -> None:
    text = (
        "import os.path as p, sys\n"
        "from . import sibling\n"
        "from ..pkg.mod import (\n    a,\n    b as c,\n)\n"
        "from x.y import *\n"
        "def f():\n    import lazy.inner  # inside a function\n"
        "from cont import first, \\\n    second\n"
    )
    names = imported_names(text, "top/sub/here.py")
    assert {
        "os",
        "os.path",
        "sys",
        "top.sub",
        "top.sub.sibling",
        "top.pkg.mod",
        "top.pkg.mod.a",
    } <= names
    assert {"top.pkg.mod.b", "x.y", "lazy", "lazy.inner", "cont.first", "cont.second"} <= names
    assert module_names("src/app/core.py") == {"src.app.core", "app.core", "core"}
    assert module_names("app/__init__.py") == {"app"}


def test_dependents_are_transitive_importers(tmp_path: Path) -> None:
    for name, text in LAYERED.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    code = [n for n in LAYERED if n.endswith(".py")]
    assert len(code) > 15
    assert dependents(tmp_path, code, ["app/core.py"]) == {"app/mid.py", "app/top.py"}
    assert dependents(tmp_path, code, ["app/other.py"]) == set()
    assert dependents(tmp_path, code, ["app/gone.py"]) == {"app/uses_gone.py"}


def _commit(root: Path, files: dict[str, str | None]) -> str:
    for name, text in files.items():
        if text is None:
            (root / name).unlink()
        else:
            (root / name).write_text(text)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "change")
    return gitops.tree_of(root, "HEAD")


def _same(a: Measurements, b: Measurements, tool: Tool) -> bool:
    ma, mb = a.get(tool), b.get(tool)
    assert ma is not None and mb is not None
    return Counter(map(identity, ma.diagnostics)) == Counter(map(identity, mb.diagnostics))


def test_an_incremental_measurement_finds_what_a_full_one_finds(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", LAYERED)
    target = target_for(root, strict=(), tools=["ruff", "ruff-format", "pyright"])
    gate = freeze_gate(root, tmp_path / "gate", target.quality)
    before_tree = gitops.tree_of(root, "HEAD")
    before = measure(root, target, gate, tmp_path / "w", before_tree)
    # core's signature changes (a type error two imports away, in top.py), a lint error
    # and bad formatting appear in core.py, and a module that another imports is deleted
    after_tree = _commit(
        root,
        {
            "app/core.py": "import sys\n\n\ndef double(x: int) -> str:\n    return str(x *  2)\n",
            "app/gone.py": None,
        },
    )
    delta = tree_delta(root, before_tree, after_tree)
    assert delta is not None and set(delta.changed) == {"app/core.py"}
    assert delta.deleted == ("app/gone.py",)
    scope = plan_scope(root, root, after_tree, delta, gate)
    assert scope.pyright == ("app/core.py", "app/mid.py", "app/top.py", "app/uses_gone.py")
    assert scope.ruff == (
        "app/__init__.py",
        "app/core.py",
        "app/mid.py",
        "app/other.py",
        "app/top.py",
        "app/uses_gone.py",
    )

    partial = measure(root, target, gate, tmp_path / "w", after_tree, base=before, scope=scope)
    full = measure(root, target, gate, tmp_path / "w", after_tree)

    for tool in (Tool.RUFF, Tool.RUFF_FORMAT, Tool.PYRIGHT):
        assert _same(partial, full, tool), tool
        m = partial.get(tool)
        assert m is not None and m.incremental
    pyright = full.get(Tool.PYRIGHT)
    assert pyright is not None
    assert {d.file for d in pyright.diagnostics} >= {"app/mid.py", "app/uses_gone.py"}
    ruff = partial.get(Tool.RUFF)
    assert ruff is not None and {(d.file, d.rule) for d in ruff.diagnostics} >= {
        ("app/core.py", "F401"),
        ("app/other.py", "F401"),  # carried over from the earlier measurement
    }


def test_configuration_or_top_level_changes_mean_full_runs(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", LAYERED)
    gate = freeze_gate(root, tmp_path / "gate", target_for(root).quality)
    first = gitops.tree_of(root, "HEAD")
    second = _commit(root, {"pyproject.toml": '[tool.ruff.lint]\nselect = ["F"]\n'})
    delta = tree_delta(root, first, second)
    assert delta is not None and plan_scope(root, root, second, delta, gate).full
    (root / "newpkg").mkdir()
    third = _commit(root, {"newpkg/__init__.py": "X = 1\n"})
    delta = tree_delta(root, second, third)
    assert delta is not None
    scope = plan_scope(root, root, third, delta, gate)
    assert scope.ruff is None  # a new top-level name changes how imports sort everywhere
    assert scope.pyright == ("newpkg/__init__.py",)
    fourth = _commit(root, {"README.txt": "words\n"})
    delta = tree_delta(root, third, fourth)
    assert delta is not None
    quiet = plan_scope(root, root, fourth, delta, gate)
    assert (quiet.ruff, quiet.pyright) == ((), ())


def test_the_cache_measures_incrementally_with_a_full_run_every_n(tmp_path: Path) -> None:
    config = '[quality]\ntools = ["ruff"]\n\n[analysis]\nfull_every = 2\n'
    root = make_repo(tmp_path / "repo", LAYERED, config)
    ctx = open_context(root, quiet=True)
    gate = freeze_gate(root, tmp_path / "gate", ctx.config.quality)
    trees = [gitops.tree_of(root, "HEAD")]
    runs: list[bool] = []
    durations: list[float] = []
    for n in range(3):
        trees.append(_commit(root, {"app/other.py": f"import os\n\nVALUE: int = {n}\n"}))
        place = Export(root, tmp_path / "exports", trees[-1], "t")
        m, _ = measure_cached(ctx, place, trees[-1], gate, tmp_path / "w", related=(trees[-2],))
        place.close()
        ruff = m.get(Tool.RUFF)
        assert ruff is not None and [d.rule for d in ruff.diagnostics] == ["F401"]
        runs.append(ruff.incremental)
        durations.append(ruff.duration_s)
    # the first tree has no measured relative; then incremental, then full again (N = 2)
    assert runs == [False, True, False]
    again, _ = measure_cached(
        ctx, Export(root, tmp_path / "x", trees[-1], "t"), trees[-1], gate, tmp_path / "w"
    )
    ruff = again.get(Tool.RUFF)
    assert ruff is not None and ruff.duration_s == durations[-1]  # from the cache
