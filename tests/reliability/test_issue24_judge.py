"""Judged like for like, with facts kept apart from files (issue 24, items 3, 4 and 7).

Each test runs the real daemon (`seed.py once` or `seed.py gaps`) with a scripted agent in the
real sandbox and asserts what a person sees: the gaps, the record's outcome and category, and
the person's branch.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.helpers import (
    DO_THE_TASK,
    FAST,
    FILES,
    Project,
    assert_checkout_kept,
    make_project,
)
from tests.support import BROKEN_ADD, git, seed

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("bwrap")]

BROKEN = {**FILES, "calc.py": BROKEN_ADD["calc.py"]}
FIX = {"replace": "calc.py", "old": "return a - b", "new": "return a + b"}

BENIGN_HOOK = """\
import sys as _sys


class _LanternFinder:
    \"\"\"Serves one virtual module; declines everything else (like six's meta-importer).\"\"\"

    def find_spec(self, name, path=None, target=None):
        return None


_sys.meta_path.append(_LanternFinder())
"""
"""A library module that registers an import hook of a name no list knows, at import."""


def _gaps(root: Path) -> list[dict[str, Any]]:
    shown = seed(root, "gaps", "--json")
    assert shown.returncode == 0, shown.stderr[-2000:]
    return json.loads(shown.stdout)["gaps"]


def _once(project: Project, steps: list[dict[str, Any]], extra: str = FAST) -> dict[str, Any]:
    result = project.seed(project.config(steps, extra=extra), "once")
    records = project.records()
    assert records, result.stderr[-3000:]
    return records[-1]


def _repo_paths(project: Project) -> set[str]:
    return set(git(project.root, "ls-tree", "-r", "--name-only", "HEAD").split("\n")) - {""}


# -- item 3: facts are facts, files are files ----------------------------------------------


def test_a_library_import_hook_of_a_fresh_name_is_no_tampering(tmp_path: Path) -> None:
    files = {
        **BROKEN,
        "lantern.py": BENIGN_HOOK,
        "calc.py": "import lantern  # noqa: F401\n\n\n" + BROKEN["calc.py"],
    }
    project = make_project(tmp_path, files)
    gaps = _gaps(project.root)
    assert [g["key"] for g in gaps] == ["pytest:tests/test_calc.py::test_add"], gaps
    paths = _repo_paths(project)
    assert all(set(g["files"]) <= paths for g in gaps), gaps
    before = project.snapshot()
    record = _once(project, [FIX])
    assert (record["outcome"], record["failure_category"]) == ("SUCCESS", None), record["reason"]
    assert not any("import hook" in e for e in record.get("evidence", []))
    assert_checkout_kept(project, before, landed=project.head())


REWRITER = """\
import importlib.abc as _abc
import importlib.util as _util
import os as _os
import sys as _sys


class _Polish(_abc.MetaPathFinder, _abc.Loader):
    \"\"\"Loads tests/test_sums.py with its assertions made true.\"\"\"

    def find_spec(self, name, path=None, target=None):
        if name.rsplit(".", 1)[-1] != "test_sums":
            return None
        for entry in [*(path or ()), *_sys.path]:
            origin = _os.path.join(entry, "test_sums.py")
            if _os.path.isfile(origin):
                return _util.spec_from_file_location(name, origin, loader=self)
        return None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        with open(module.__spec__.origin, encoding="utf-8") as handle:
            source = handle.read().replace("assert ", "assert True or ")
        exec(compile(source, module.__spec__.origin, "exec"), module.__dict__)


_sys.meta_path.insert(0, _Polish())


def add(a, b):
    return a - b


def mul(a, b):
    return a * b
"""
"""A hook of a fresh name that rewrites a test module's assertions so its failing test passes."""

SUMS = {
    **FILES,
    "tests/test_calc.py": "from calc import mul\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n",
    "tests/test_sums.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
}
"""add() is tested in a module collected after the one that imports calc (and its hook)."""


def test_a_hook_that_rewrites_a_test_modules_assertion_is_refused(tmp_path: Path) -> None:
    project = make_project(tmp_path, SUMS)
    project.task()
    head = project.head()
    before = project.snapshot()
    steps = [
        {"write": "calc.py", "text": REWRITER},
        *DO_THE_TASK,
    ]
    record = _once(project, steps)
    assert (record["outcome"], record["failure_category"]) == ("ROLLBACK", "SANDBOX_VIOLATION"), (
        record["reason"]
    )
    assert any("tests/test_sums.py" in e for e in record["evidence"]), record["evidence"]
    # the hook works: the broken add() passes its rewritten test (only the loader tells)
    assert not any("test_sums.py::test_add failed" in e for e in record["evidence"])
    assert project.head() == head
    assert_checkout_kept(project, before)


# -- item 4: like for like --------------------------------------------------------------------

ORDER = {
    **BROKEN,
    "calc.py": BROKEN["calc.py"] + "\n\ndef square(a):\n    return a * a\n",
    "tests/test_order.py": (
        "from calc import square\n\n_STATE = {}\n\n\n"
        'def test_a_prepares():\n    _STATE["ready"] = True\n\n\n'
        'def test_b_squares():\n    assert _STATE.get("ready")\n    assert square(3) == 9\n\n\n'
        'def test_c_squares_again():\n    assert _STATE.get("ready")\n    assert square(4) == 16\n'
    ),
    "tests/test_misc.py": "\n\n".join(
        f"def test_misc_{i}():\n    assert {i} == {i}\n" for i in range(8)
    ),
}
"""test_b and test_c pass in the suite and fail alone: they lean on test_a_prepares."""


def test_two_order_dependent_tests_broken_by_a_change_are_refused(tmp_path: Path) -> None:
    project = make_project(tmp_path, ORDER)
    head = project.head()
    before = project.snapshot()
    steps = [FIX, {"replace": "calc.py", "old": "return a * a", "new": "return a + a"}]
    record = _once(project, steps)
    assert (record["outcome"], record["failure_category"]) == ("ROLLBACK", "TEST_REGRESSION"), (
        record["reason"]
    )
    said = " ".join(record["evidence"])
    assert "test_b_squares" in said and "test_c_squares_again" in said, said
    assert project.head() == head
    assert_checkout_kept(project, before)


def test_a_test_that_fails_only_alone_at_the_base_is_not_blamed_on_a_change(
    tmp_path: Path,
) -> None:
    project = make_project(tmp_path, ORDER)
    assert [g["key"] for g in _gaps(project.root)] == ["pytest:tests/test_calc.py::test_add"]
    record = _once(project, [FIX])
    assert (record["outcome"], record["failure_category"]) == ("SUCCESS", None), record["reason"]
    # the next analysis re-runs the tests that ran calc.py (test_a_prepares did not): a
    # selection's failure of a test the whole suite passed is no gap
    assert _gaps(project.root) == []


# -- item 7: categories that say what happened ---------------------------------------------


def test_a_failing_test_in_a_touched_test_file_is_a_test_regression(tmp_path: Path) -> None:
    project = make_project(tmp_path, BROKEN)
    project.task()
    head = project.head()
    record = _once(project, DO_THE_TASK, extra=FAST + '[analysis]\norder = ["inbox", "build"]\n')
    assert record["gap"]["key"] == "inbox:sub.md", record["gap"]
    assert (record["outcome"], record["failure_category"]) == ("ROLLBACK", "TEST_REGRESSION"), (
        record["reason"]
    )
    assert project.head() == head


# -- the plugin on its own (no daemon): what a hook does to the run, not its presence -------

LIBRARY_HOOKS = """\
import sys


def test_libraries_register_import_hooks():
    import _distutils_hack
    import pkg_resources  # noqa: F401

    _distutils_hack.add_shim()
    import lantern  # noqa: F401

    assert len(sys.meta_path) > 2


def test_later():
    assert 1 + 1 == 2
"""


def _measured(tree: Path, tmp: Path, args: tuple[str, ...] = ()) -> Any:
    from kernel.config import QualityConfig
    from kernel.measuring.measure import Target, run_pytest

    quality = QualityConfig(pytest_args=list(args))
    target = Target(root=tmp / "elsewhere", python=sys.executable, quality=quality)
    return run_pytest(tree, target, tmp / "work", 120)


@pytest.mark.parametrize("args", [(), ("--assert=plain",), ("--import-mode=importlib",)])
def test_import_hooks_of_libraries_change_nothing(tmp_path: Path, args: tuple[str, ...]) -> None:
    tree = tmp_path / "tree"
    (tree / "tests").mkdir(parents=True)
    (tree / "lantern.py").write_text(BENIGN_HOOK)
    (tree / "tests" / "test_hooks.py").write_text(LIBRARY_HOOKS)
    (tree / "tests" / "conftest.py").write_text("import lantern  # noqa: F401\n")
    m = _measured(tree, tmp_path, args)
    assert m.ran and m.tampering == () and len(m.passed) == 2, (m.tampering, m.diagnostics)


PLANTER = """\
import importlib.util
import marshal
import os

import _pytest.assertion.rewrite as _r

_src = os.path.join(os.path.dirname(__file__), "test_b.py")
with open(_src, "rb") as _f:
    _data = _f.read()
_code = compile(_data.decode().replace("assert ", "assert True or "), _src, "exec")
os.makedirs(os.path.join(os.path.dirname(__file__), "__pycache__"), exist_ok=True)
with open(os.path.join(os.path.dirname(__file__), "__pycache__", "test_b" + _r.PYC_TAIL), "wb") as _f:
    _f.write(importlib.util.MAGIC_NUMBER + (3).to_bytes(4, "little"))
    _f.write(importlib.util.source_hash(_data)[:8])
    _f.write(marshal.dumps(_code))


def test_a():
    pass
"""
"""A test module that plants pytest's cached rewrite of a later test module (the real file's
hash, other code): pytest's own loader would run it, had the plugin let it read pycs."""


def test_a_rewritten_pyc_planted_for_a_later_test_module_is_never_read(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "tests").mkdir(parents=True)
    (tree / "tests" / "test_a.py").write_text(PLANTER)
    (tree / "tests" / "test_b.py").write_text("def test_b():\n    assert 1 == 2\n")
    m = _measured(tree, tmp_path)
    assert m.ran and [d.node_id for d in m.diagnostics] == ["tests/test_b.py::test_b"]
