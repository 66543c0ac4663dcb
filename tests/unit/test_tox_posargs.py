"""tox's default posargs, read from tox.ini's testenv commands that run pytest."""

from __future__ import annotations

from kernel.measuring.pytestconfig import tox_selection


def _read(text: str):  # type: ignore[no-untyped-def]
    return lambda name: text if name == "tox.ini" else None  # type: ignore[no-untyped-def]


def test_the_default_of_each_pytest_command_is_named() -> None:
    text = (
        "[testenv]\ncommands =\n    python -m pytest {posargs:tests}\n"
        "[testenv:lint]\ncommands = ruff check {posargs:.}\n"
        '[testenv:fast]\ncommands = pytest {posargs:-m "not slow"} --tb=short\n'
    )
    assert tox_selection(_read(text)) == (
        "tox runs pytest with `tests` by default (tox.ini [testenv]); seed runs every test",
        'tox runs pytest with `-m "not slow"` by default (tox.ini [testenv:fast]); '
        "seed runs every test",
    )


def test_no_tox_ini_or_no_default_says_nothing() -> None:
    assert tox_selection(lambda name: None) == ()
    assert tox_selection(_read("[testenv]\ncommands = pytest {posargs}\n")) == ()
    assert tox_selection(_read("not an ini [")) == ()
