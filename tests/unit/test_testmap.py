"""The test map: which tests a change selects, how their results merge, and that it is sealed."""

from __future__ import annotations

import json
from pathlib import Path

from domain import Diagnostic, Measurement, Tool
from kernel.measuring import testmap
from kernel.measuring.incremental import merge_tests
from kernel.measuring.measure import failed_ids
from kernel.measuring.testmap import ANY_FILE, Selection

MAP = testmap.TestMap(
    "t1",
    {
        "tests/test_a.py::test_one": frozenset({"app/a.py", "tests/test_a.py"}),
        "tests/test_a.py::test_two[x]": frozenset({"app/a.py", "app/b.py", "tests/test_a.py"}),
        "tests/test_b.py::test_b": frozenset({"app/b.py", "tests/test_b.py"}),
        "tests/test_c.py::test_c": frozenset({"tests/test_c.py"}),
        "tests/test_d.py::test_d": frozenset({"tests/test_d.py"}),
        "tests/test_e.py::test_everything": frozenset({ANY_FILE}),
    },
)


def test_a_change_selects_the_tests_that_ran_it_and_changed_test_files_whole() -> None:
    found = testmap.select(MAP, ["app/b.py", "tests/test_new.py"], [], strict=True)
    assert found is not None
    assert found.nodes == (
        "tests/test_a.py::test_two[x]",
        "tests/test_b.py::test_b",
        "tests/test_e.py::test_everything",
    )
    assert found.files == ("tests/test_new.py",)
    assert found.argv()[0] == "tests/test_new.py"
    assert found.covers("tests/test_new.py::test_anything") and not found.covers(
        "tests/test_c.py::test_c"
    )
    # a test that ran more files than the map names is selected by any change
    other = testmap.select(MAP, ["docs/other.py"], [], strict=True)
    assert other is not None and other.argv() == ["tests/test_e.py::test_everything"]
    small = testmap.TestMap("t1", {n: f for n, f in MAP.tests.items() if ANY_FILE not in f})
    nothing = testmap.select(small, ["docs/other.py"], [], strict=True)
    assert nothing is not None and nothing.argv() == []


def test_what_the_map_cannot_see_means_the_whole_suite() -> None:
    assert testmap.select(MAP, ["tests/conftest.py"], [], strict=False) is None
    assert testmap.select(MAP, ["app/data.json"], [], strict=True) is None
    lenient = testmap.select(MAP, ["app/data.json", "app/b.py"], [], strict=False)
    assert lenient is not None and "tests/test_b.py::test_b" in lenient.nodes
    # more than half the tests: no cheaper than the suite
    assert testmap.select(MAP, ["app/a.py", "app/b.py"], [], strict=True) is None


def test_tests_of_a_deleted_file_are_not_selected() -> None:
    found = testmap.select(MAP, [], ["tests/test_b.py", "app/b.py"], strict=True)
    assert found is not None
    assert "tests/test_b.py::test_b" not in found.nodes
    assert "tests/test_a.py::test_two[x]" in found.nodes


def _failed(node: str) -> Diagnostic:
    return Diagnostic(tool=Tool.PYTEST, file=node.split("::")[0], rule="failed", node_id=node)


def test_merged_results_keep_what_did_not_re_run_and_drop_deleted_files() -> None:
    previous = Measurement(
        tool=Tool.PYTEST,
        ran=True,
        exit_code=1,
        collected=("a.py::t1", "a.py::t2", "b.py::t3", "gone.py::t4"),
        diagnostics=(_failed("a.py::t1"), _failed("b.py::t3"), _failed("gone.py::t4")),
    )
    fresh = Measurement(tool=Tool.PYTEST, ran=True, exit_code=0, collected=("b.py::t3", "b.py::t5"))
    merged = merge_tests(previous, fresh, Selection(("b.py::t3",), ("b.py",), ""), ["gone.py"])
    assert failed_ids(merged) == {"a.py::t1"}
    assert sorted(merged.collected) == ["a.py::t1", "a.py::t2", "b.py::t3", "b.py::t5"]
    assert merged.incremental and merged.exit_code == 1
    nothing = merge_tests(previous, None, Selection((), (), ""), ["gone.py"])
    assert failed_ids(nothing) == {"a.py::t1", "b.py::t3"}
    broken = fresh.model_copy(update={"ran": False, "error": "conftest exploded"})
    assert merge_tests(previous, broken, Selection(("b.py::t3",), (), ""), []) == broken


def test_a_map_not_sealed_by_this_kernel_is_not_read(tmp_path: Path) -> None:
    testmap.save(tmp_path, "k", MAP)
    assert testmap.load(tmp_path, "k") == MAP
    path = tmp_path / "testmap" / "k.json"
    sealed = json.loads(path.read_text())
    body = json.loads(sealed["body"])
    body["tests"] = {"tests/test_c.py::test_c": [0]}  # a forged, smaller map
    sealed["body"] = json.dumps(body)
    path.write_text(json.dumps(sealed))
    assert testmap.load(tmp_path, "k") is None
    path.write_text("{not json")
    assert testmap.load(tmp_path, "k") is None
