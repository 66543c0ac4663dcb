"""The base's tests judge: which files are the base's tests, the judged tree, the comparison."""

from __future__ import annotations

from pathlib import Path

from domain import Diagnostic, Measurement, Measurements, Tool
from kernel.isolation import gitops, trees
from kernel.judging import basetests
from kernel.judging.verify import BaseRun, lost_passes, verify
from kernel.measuring import testmap
from kernel.measuring.measure import passed_ids
from tests.support import SAMPLE, git, make_repo

FILES = {
    **SAMPLE,
    "calc_cases.py": "CASES = [(2, 3, 5)]\n",
    "tests/test_calc.py": "from calc import add\nfrom calc_cases import CASES\n\n\n"
    "def test_add():\n    for a, b, want in CASES:\n        assert add(a, b) == want\n",
    "tests/data/rows.json": "[1]\n",
}


def _tree(root: Path, store: trees.ObjectStore, changes: dict[str, str | None]) -> str:
    """The base's tree with some files written (or removed, None), in the store."""
    env = store.env()
    (store.path / "index").unlink(missing_ok=True)
    gitops.git(root, "read-tree", gitops.tree_of(root, "HEAD"), env=env)
    for path, text in changes.items():
        if text is None:
            gitops.git(root, "rm", "--cached", "-q", path, env=env)
            continue
        oid = (
            gitops.git(root, "hash-object", "-w", "--stdin", env=env, stdin=text.encode())
            .text()
            .strip()
        )
        gitops.git(root, "update-index", "--add", "--cacheinfo", f"100644,{oid},{path}", env=env)
    return gitops.git(root, "write-tree", env=env).text().strip()


def _files(root: Path, store: trees.ObjectStore, tree: str) -> dict[str, str]:
    return {
        p: gitops.git(root, "cat-file", "blob", o, env=store.env()).text()
        for _, o, p in trees.entries(root, tree, store.env())
    }


def test_the_base_test_files_include_conftests_config_data_and_the_data_module(
    tmp_path: Path,
) -> None:
    root = make_repo(tmp_path / "repo", {**FILES, "pkg/conftest.py": "", "pytest.ini": ""})
    tree = gitops.tree_of(root, "HEAD")
    found = basetests.base_test_files(root, tree, None, None)
    assert {"tests/test_calc.py", "tests/data/rows.json", "pkg/conftest.py", "pytest.ini"} <= found
    assert "calc_cases.py" in found  # only tests import it, and it defines no code
    assert "calc.py" not in found  # only tests import it too, but it is code under test
    mapped = testmap.TestMap(tree, {"tests/test_calc.py::test_add": frozenset({"calc.py"})})
    assert "calc.py" not in basetests.base_test_files(root, tree, None, mapped)
    ran_cases = testmap.TestMap(tree, {"t::x": frozenset({"calc.py", "calc_cases.py"})})
    assert "calc_cases.py" not in basetests.base_test_files(root, tree, None, ran_cases)
    # a map of an older tree never saw calc.py run: it must not make code under test data
    stale = testmap.TestMap("0" * 40, {"tests/test_calc.py::test_add": frozenset({"other.py"})})
    assert "calc.py" not in basetests.base_test_files(root, tree, None, stale)


def test_the_judged_tree_puts_base_tests_back_and_leaves_new_test_files_out(
    tmp_path: Path,
) -> None:
    root = make_repo(tmp_path / "repo", FILES)
    base = gitops.tree_of(root, "HEAD")
    store = trees.ObjectStore(tmp_path / "store", root / ".git" / "objects")
    candidate = _tree(
        root,
        store,
        {
            "calc.py": "def add(a, b):\n    return a - b\n",
            "calc_cases.py": "CASES = [(2, 3, -1)]\n",
            "tests/test_calc.py": "def test_add():\n    pass\n",
            "tests/data/rows.json": None,
            "conftest.py": "import evil\n",
            "test_new.py": "def test_x():\n    pass\n",
            "pytest.toml": "",
            "newcode.py": "X = 1\n",
        },
    )
    tests = basetests.base_test_files(root, base, None, None)
    judged = basetests.judged_tree(root, base, candidate, store, tests)
    files = _files(root, store, judged)
    assert files["calc.py"] == "def add(a, b):\n    return a - b\n"  # the candidate's code
    assert files["newcode.py"] == "X = 1\n"
    for path in ("calc_cases.py", "tests/test_calc.py", "tests/data/rows.json"):
        assert files[path] == FILES[path]
    assert not {"conftest.py", "test_new.py", "pytest.toml"} & set(files)
    # a candidate that touches no test file is judged on its own tree: one run serves both
    plain = _tree(root, store, {"calc.py": "def add(a, b):\n    return b + a\n"})
    assert basetests.judged_tree(root, base, plain, store, tests) == plain


def test_a_pytest_section_added_to_pyproject_is_put_back(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", FILES)
    base = gitops.tree_of(root, "HEAD")
    store = trees.ObjectStore(tmp_path / "store", root / ".git" / "objects")
    extra = SAMPLE["pyproject.toml"] + "\n[tool.pytest.ini_options]\naddopts = '-p evil'\n"
    candidate = _tree(root, store, {"pyproject.toml": extra})
    judged = basetests.judged_tree(root, base, candidate, store, set())
    assert _files(root, store, judged)["pyproject.toml"] == SAMPLE["pyproject.toml"]
    ruff_only = _tree(root, store, {"pyproject.toml": SAMPLE["pyproject.toml"] + "# note\n"})
    assert basetests.judged_tree(root, base, ruff_only, store, set()) == ruff_only
    git(root, "status")


def test_only_a_passed_call_counts_as_passed() -> None:
    records = [
        {"kind": "test", "nodeid": "a", "when": "call", "outcome": "passed"},
        {"kind": "test", "nodeid": "b", "when": "call", "outcome": "passed", "xfail": True},
        {"kind": "test", "nodeid": "c", "when": "setup", "outcome": "skipped"},
        {"kind": "test", "nodeid": "d", "when": "call", "outcome": "passed"},
    ]
    torn = Diagnostic(tool=Tool.PYTEST, node_id="d", rule="error", message="teardown")
    assert passed_ids(records, ["a", "b", "c", "d", "e"], [torn]) == ("a",)


def test_lost_passes_are_counted_per_test_function() -> None:
    assert lost_passes(["f::t[1]", "f::t[2]", "f::u"], ["f::t[1]", "f::t[2]"]) == ["f::u"]
    assert lost_passes(["f::t[a]", "f::t[b]"], ["f::t[c]", "f::t[d]"]) == []  # ids from a clock
    assert lost_passes(["f::t[a]", "f::t[b]"], ["f::t[c]"]) == ["f::t (2 passed, now 1)"]


def _m(passed: tuple[str, ...], failed: tuple[str, ...] = ()) -> Measurement:
    return Measurement(
        tool=Tool.PYTEST,
        ran=True,
        collected=(*passed, *failed),
        passed=passed,
        diagnostics=tuple(
            Diagnostic(tool=Tool.PYTEST, node_id=n, rule="failed", message="x") for n in failed
        ),
    )


def test_a_base_test_the_change_edits_goes_to_a_person_and_any_other_is_refused() -> None:
    from tests.unit.test_verify import _plan_for_test  # pyright: ignore[reportPrivateUsage]

    gap, mul, sub = "t/test_a.py::test_add", "t/test_a.py::test_mul", "t/test_b.py::test_sub"
    plan = _plan_for_test(gap)
    before = Measurements(items=(_m((mul, sub), (gap,)),))
    own = Measurements(items=(_m((gap, mul, sub)),))
    kept = verify(
        plan,
        before,
        own,
        ["c.py"],
        Path("."),
        base_run=BaseRun(_m((gap, sub), (mul,)), (gap,), frozenset({"t/test_a.py"})),
    )
    assert kept.passed and kept.changed_tests == [mul]
    refused = verify(
        plan,
        before,
        own,
        ["c.py"],
        Path("."),
        base_run=BaseRun(_m((gap, mul)), (gap,), frozenset()),
    )
    assert not refused.passed and any(sub in e and "not collected" in e for e in refused.evidence)
    skipped = verify(
        plan,
        before,
        own,
        ["c.py"],
        Path("."),
        base_run=BaseRun(_m((mul, sub)), (gap,), frozenset()),
    )
    assert not skipped.passed and any(gap in e for e in skipped.evidence)
