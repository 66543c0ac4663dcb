"""Test weakening, read from syntax trees: what is refused and what a legitimate fix may do."""

from __future__ import annotations

import pytest

from kernel.judging.hygiene import assert_strength, pytest_config_changed, renamed, weakening

BASE = """\
import pytest
from calc import add, mul


def test_add():
    assert add(2, 3) == 5


def test_mul():
    result = mul(2, 3)
    assert result == 6
    assert isinstance(result, int)


class TestMore:
    def test_zero(self):
        assert mul(0, 9) == 0

    def test_raises(self):
        with pytest.raises(TypeError):
            add(1, "x")
"""


def _change(old: str, new: str) -> str:
    assert old in BASE, old
    return BASE.replace(old, new)


WEAKENED = {
    "a test function deleted": _change(
        "def test_add():\n    assert add(2, 3) == 5\n", "def helper():\n    pass\n"
    ),
    "a test method renamed away": _change("def test_zero(self)", "def zero(self)"),
    "a test class deleted": BASE.split("class TestMore")[0],
    "@pytest.mark.skip added": _change("def test_add():", "@pytest.mark.skip\ndef test_add():"),
    "@pytest.mark.skipif added": _change(
        "def test_add():", "@pytest.mark.skipif(True, reason='x')\ndef test_add():"
    ),
    "@pytest.mark.xfail on a class": _change(
        "class TestMore:", "@pytest.mark.xfail\nclass TestMore:"
    ),
    "a skip from an imported name": _change(
        "def test_add():", "from pytest import skip\n\n\n@skip\ndef test_add():"
    ),
    "pytest.skip() inside the test": _change(
        "    assert add(2, 3) == 5", "    pytest.skip('later')\n    assert add(2, 3) == 5"
    ),
    "pytestmark at module level": _change(
        "import pytest\n", "import pytest\n\npytestmark = pytest.mark.skip\n"
    ),
    "pytestmark inside a class": _change(
        "class TestMore:\n", "class TestMore:\n    pytestmark = pytest.mark.skip\n\n"
    ),
    "pytest.importorskip added": _change(
        "import pytest\n", "import pytest\n\nnp = pytest.importorskip('numpy')\n"
    ),
    "a skip mark in a parametrize": _change(
        "def test_add():",
        "@pytest.mark.parametrize('x', [pytest.param(1, marks=pytest.mark.skip)])\ndef test_add(x):",
    ),
    "an assert removed": _change("    assert isinstance(result, int)\n", ""),
    "an exact assert loosened to truthiness": _change("assert add(2, 3) == 5", "assert add(2, 3)"),
    "an exact assert loosened to is not None": _change(
        "assert result == 6", "assert result is not None"
    ),
    "an assert made constant": _change("assert add(2, 3) == 5", "assert True"),
    "an assert or-ed with True": _change("assert add(2, 3) == 5", "assert add(2, 3) == 5 or True"),
    "an assert compared with itself": _change(
        "assert add(2, 3) == 5", "assert add(2, 3) == add(2, 3)"
    ),
    "an early return before the asserts": _change(
        "    result = mul(2, 3)\n", "    return\n    result = mul(2, 3)\n"
    ),
    "asserts wrapped in a try that swallows them": _change(
        "    assert add(2, 3) == 5\n",
        "    try:\n        assert add(2, 3) == 5\n    except AssertionError:\n        pass\n",
    ),
    "a test renamed, an assert removed": _change(
        "def test_mul():\n    result = mul(2, 3)\n    assert result == 6\n    assert isinstance(result, int)\n",
        "def test_product():\n    result = mul(2, 3)\n    assert result == 6\n",
    ),
    "a test renamed with its body kept, then skipped": _change(
        "def test_add():", "@pytest.mark.skip\ndef test_addition():"
    ),
    "pytest.raises removed": _change(
        '        with pytest.raises(TypeError):\n            add(1, "x")\n', "        add(1, 1)\n"
    ),
}


@pytest.mark.parametrize("name", sorted(WEAKENED))
def test_weakening_is_found(name: str) -> None:
    assert weakening(BASE, WEAKENED[name]), name


def test_a_deleted_test_file_is_weakening_but_a_deleted_helper_is_not() -> None:
    assert weakening(BASE, None) == ["a test file was deleted"]
    assert weakening("def helper():\n    return 1\n", None) == []


LEGITIMATE = {
    "unchanged": BASE,
    "a new test added": BASE + "\n\ndef test_new():\n    assert add(1, 1) == 2\n",
    "an expected value corrected": _change("assert add(2, 3) == 5", "assert add(2, 3) == 6"),
    "an assert made stricter": _change(
        "assert add(2, 3) == 5", "assert add(2, 3) == 5 and add(3, 2) == 5"
    ),
    "an assert added": _change(
        "    assert result == 6\n", "    assert result == 6\n    assert result > 0\n"
    ),
    "setup code rewritten": _change("result = mul(2, 3)", "result = mul(3, 2)"),
    "a helper with a skip-free body added": BASE + "\n\ndef make():\n    return 1\n",
    "formatting only": BASE.replace("add(2, 3) == 5", "add(2,3)==5"),
    "a test renamed, its body kept": _change("def test_add():", "def test_addition():"),
    "a test moved into a class (self, a freeze_time decorator)": _change(
        "def test_add():\n    assert add(2, 3) == 5\n", ""
    ).replace(
        "class TestMore:\n",
        "class TestMore:\n    @freeze_time('2020-02-02')\n    def test_add(self):\n        assert add(2, 3) == 5\n\n",
    ),
    "a test file that does not parse (the verifier's job)": "def test_add(:\n",
}


@pytest.mark.parametrize("name", sorted(LEGITIMATE))
def test_legitimate_changes_pass(name: str) -> None:
    assert weakening(BASE, LEGITIMATE[name]) == [], name


def test_a_new_test_that_proves_nothing_is_refused() -> None:
    assert weakening(BASE, BASE + "\n\ndef test_new():\n    assert True\n")


@pytest.mark.parametrize(
    ("source", "strength"),
    [
        ("True", 0),
        ("1", 0),
        ("x or True", 0),
        ("x == x", 0),
        ("x", 1),
        ("x is not None", 1),
        ("isinstance(x, int)", 1),
        ("x or y", 1),
        ("x == 5", 2),
        ("x in y", 2),
        ("x < 3", 2),
        ("x is True", 2),
        ("x == 1 and y", 2),
        ("not x == 1", 2),
        ("not x", 1),
        ("not False", 0),
    ],
)
def test_assert_strength(source: str, strength: int) -> None:
    import ast

    expr = ast.parse(source, mode="eval").body
    assert assert_strength(expr) == strength


@pytest.mark.parametrize(
    ("path", "before", "after", "changed"),
    [
        ("conftest.py", None, "import os\n", True),
        ("tests/conftest.py", "x = 1\n", "x = 2\n", True),
        ("pytest.toml", None, "", True),
        (".pytest.ini", "[pytest]\n", None, True),
        ("pytest.ini", "[pytest]\n", "[pytest]\n", False),
        ("pyproject.toml", '[project]\nname = "a"\n', '[project]\nname = "b"\n', False),
        (
            "pyproject.toml",
            "[tool.pytest.ini_options]\naddopts = []\n",
            '[tool.pytest.ini_options]\naddopts = ["-k", "not slow"]\n',
            True,
        ),
        ("pyproject.toml", "", "[tool.pytest]\ntestpaths = []\n", True),
        ("setup.cfg", "[tool:pytest]\naddopts = -q\n", "[tool:pytest]\naddopts = -x\n", True),
        ("setup.cfg", "[flake8]\nx = 1\n", "[flake8]\nx = 2\n", False),
        ("tox.ini", "[pytest]\na = 1\n[tox]\n", "[pytest]\na = 1\n[tox]\nb = 2\n", False),
        ("calc.py", "a\n", "b\n", False),
    ],
)
def test_pytest_configuration_changes(
    path: str, before: str | None, after: str | None, changed: bool
) -> None:
    assert pytest_config_changed(path, before, after) is changed


def test_two_tests_of_one_body_renamed_into_one_lose_one() -> None:
    twice = "def test_a():\n    assert f() == 1\n\n\ndef test_b():\n    assert f() == 1\n"
    once = "def test_c():\n    assert f() == 1\n"
    assert weakening(twice, once) == ["test test_b was deleted or renamed away"]
    assert renamed(twice, once) == {"test_a": "test_c"}
