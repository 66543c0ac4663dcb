"""Tests are the specification: frozen gap tests and assertions that cannot fail."""

from __future__ import annotations

from kernel.judging.frozen import empty_assertions, frozen_changes, frozen_names

TEST = """import pytest

from calc import add


def test_add():
    assert add(2, 3) == 5


@pytest.mark.parametrize("a, b, out", [(1, 2, 3), (2, 2, 4)])
def test_cases(a, b, out):
    assert add(a, b) == out


class TestMore:
    def test_zero(self):
        assert add(0, 0) == 0
"""
NODES = [
    "tests/test_calc.py::test_add",
    "tests/test_calc.py::test_cases[1-2-3]",
    "tests/test_calc.py::TestMore::test_zero",
]
FROZEN = frozen_names(NODES)["tests/test_calc.py"]


def _changes(after: str | None) -> list[str]:
    return frozen_changes("tests/test_calc.py", TEST, after, FROZEN)


def test_node_ids_name_functions_and_methods_without_their_cases() -> None:
    assert frozen_names([*NODES, "tests/test_calc.py", "conftest.py::x"]) == {
        "tests/test_calc.py": {("test_add",), ("test_cases",), ("TestMore", "test_zero")},
        "conftest.py": {("x",)},
    }


def test_the_expected_value_changed_to_match_the_bug_is_refused() -> None:
    [message] = _changes(TEST.replace("== 5", "== -1"))
    assert "tests/test_calc.py::test_add" in message and "frozen" in message


def test_a_parametrize_case_changed_or_added_is_refused() -> None:
    assert _changes(TEST.replace("(2, 2, 4)", "(2, 2, 0)"))
    assert _changes(TEST.replace("(2, 2, 4)]", "(2, 2, 4), (0, 0, 0)]"))


def test_a_method_and_its_class_decorators_are_frozen() -> None:
    assert _changes(TEST.replace("add(0, 0) == 0", "add(0, 0) == add(0, 0) or True"))
    marked = TEST.replace("class TestMore:", "@pytest.mark.skip\nclass TestMore:")
    assert any("TestMore::test_zero" in m for m in _changes(marked))


def test_deleting_and_recreating_under_the_same_name_is_refused() -> None:
    recreated = (
        TEST.replace("def test_add():\n    assert add(2, 3) == 5\n", "")
        + "\n\ndef test_add():\n    assert add(2, 3) == add(2, 3)\n"
    )
    assert any("test_add" in m for m in _changes(recreated))
    assert any("removed" in m for m in _changes(TEST.replace("def test_add", "def helper_add")))
    assert _changes(None)  # the whole file deleted


def test_moving_reformatting_and_new_tests_are_fine() -> None:
    moved = TEST.replace("def test_add():\n    assert add(2, 3) == 5\n", "") + (
        "\n\ndef test_add( ):\n    assert add(2,  3) == (5)\n\n\ndef test_new():\n    assert add(1, 1) == 2\n"
    )
    assert _changes(moved) == []
    assert _changes(TEST) == []


def test_assertions_that_compare_a_thing_with_itself_are_refused_when_new() -> None:
    path = "tests/test_x.py"
    for assertion in (
        "assert add(2, 3) == add(2, 3)",
        "assert x is x",
        "assert 1 < f(1) == f(1)",
        "assert not (x != x)",
        "self.assertEqual(f(1), f(1))",
        "assert True",
    ):
        after = f"def test_it(self, x):\n    {assertion}\n"
        [message] = empty_assertions(path, "", after)
        assert "proves nothing" in message and path in message
    honest = "def test_it():\n    assert add(2, 3) == 5\n    assert f(1) == f(2)\n"
    assert empty_assertions(path, "", honest) == []
    legacy = "def test_it(x):\n    assert x == x\n"
    assert (
        empty_assertions(path, legacy, legacy + "\n\ndef test_b():\n    assert 1 + 1 == 2\n") == []
    )
