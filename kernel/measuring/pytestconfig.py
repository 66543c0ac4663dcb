"""The project's pytest configuration as pytest finds it, and the few options the kernel
overrides in it, each named in `status` as a difference from the project's own run.

The kernel runs the project's selection (`testpaths`, or what its `addopts` names) with its
rootdir, configuration file, markers and plugins. It drops only the options that would keep
it from seeing every test's own outcome in one process, and says so (`differences`).
"""

from __future__ import annotations

import configparser
import re
import shlex
import tomllib
from collections.abc import Callable, Sequence
from typing import Any, cast

Reader = Callable[[str], str | None]
"""A file of the tree's top by name (None: no such file)."""

_FLAGS: dict[str, str] = {
    "-x": "-x (stop at the first failure): every test runs",
    "--exitfirst": "-x (stop at the first failure): every test runs",
    "--lf": "--lf (last failed only): every test runs, no cache is read",
    "--last-failed": "--lf (last failed only): every test runs, no cache is read",
    "--ff": "--ff (failures first): the collection order, no cache is read",
    "--failed-first": "--ff (failures first): the collection order, no cache is read",
    "--nf": "--nf (new files first): the collection order, no cache is read",
    "--new-first": "--nf (new files first): the collection order, no cache is read",
    "--sw": "--sw (stepwise): every test runs, no cache is read",
    "--stepwise": "--sw (stepwise): every test runs, no cache is read",
    "--sw-skip": "--sw-skip (stepwise): every test runs, no cache is read",
    "--stepwise-skip": "--sw-skip (stepwise): every test runs, no cache is read",
    "--sw-reset": "--sw-reset (stepwise): no cache is read",
    "--stepwise-reset": "--sw-reset (stepwise): no cache is read",
    "--cache-clear": "--cache-clear: no cache at all",
}
"""Options without a value the kernel drops, and what it does instead."""

_VALUED: dict[str, str] = {
    "--maxfail": "--maxfail (stop after N failures): every test runs",
    "-n": "-n (pytest-xdist workers): one process, where the kernel's plugin sees each test",
    "--numprocesses": "-n (pytest-xdist workers): one process, where the kernel's plugin sees each test",
    "--maxprocesses": "--maxprocesses (pytest-xdist): one process",
    "--dist": "--dist (pytest-xdist): one process",
    "--lfnf": "--lfnf (last failed): no cache is read",
    "--last-failed-no-failures": "--lfnf (last failed): no cache is read",
}
"""Options with a value the kernel drops."""

ALWAYS: tuple[str, ...] = (
    "no .pytest_cache (-p no:cacheprovider): nothing is written into the tree, no earlier "
    "run's failures steer this one",
    "--continue-on-collection-errors: a module that cannot be imported does not hide the "
    "other tests' outcomes",
)
"""The kernel's overrides that hold for every project."""


def config_file(read: Reader) -> str:
    """The file pytest takes its configuration from at the tree's top, in pytest's order
    ("" when there is none)."""
    return _found(read)[0]


def addopts(read: Reader) -> list[str]:
    """The project's `addopts`, split as pytest splits them."""
    value = _found(read)[1].get("addopts")
    if isinstance(value, str):
        try:
            return shlex.split(value)
        except ValueError:
            return []
    if isinstance(value, list):
        return [str(v) for v in cast(list[Any], value)]
    return []


def kept(options: Sequence[str]) -> tuple[list[str], list[str]]:
    """The options the kernel keeps, and what it says about each one it drops."""
    keep: list[str] = []
    dropped: list[str] = []
    words = iter(options)
    for word in words:
        name, has_value, _ = word.partition("=")
        if word in _FLAGS:
            dropped.append(_FLAGS[word])
        elif name in _VALUED:
            dropped.append(_VALUED[name])
            if not has_value:
                next(words, None)
        elif word.startswith("-n") and word[2:].isalnum():
            dropped.append(_VALUED["-n"])  # -n4, -nauto
        elif _short_flags(word) and "x" in word:
            dropped.append(_FLAGS["-x"])
            rest = word.replace("x", "")
            if rest != "-":
                keep.append(rest)
        else:
            keep.append(word)
    return keep, list(dict.fromkeys(dropped))


def _short_flags(word: str) -> bool:
    """`-vx`: short options that take no value, run together."""
    return len(word) > 2 and word[0] == "-" and word[1] != "-" and set(word[1:]) <= set("vqslx")


def differences(read: Reader) -> tuple[str, ...]:
    """One line per way the kernel's pytest run differs from the project's own, for status."""
    dropped = kept(addopts(read))[1]
    where = config_file(read) or "no configuration file"
    lines = [f"pytest: configured by {where}; its testpaths, markers and plugins apply"]
    lines += [f"pytest: the project's addopts {d}" for d in dropped]
    lines += [f"pytest: {line}" for line in ALWAYS]
    return tuple(lines)


def tox_selection(read: Reader) -> tuple[str, ...]:
    """One line per tox testenv command that runs pytest with default posargs: a selection
    of the project's own (`{posargs:-m "not slow"}`) that seed does not make."""
    parser = _parser(read("tox.ini") or "")
    if parser is None:
        return ()
    lines: list[str] = []
    for section in parser.sections():
        if section != "testenv" and not section.startswith("testenv:"):
            continue
        for command in parser.get(section, "commands", fallback="").splitlines():
            found = _POSARGS.search(command)
            if "pytest" in command.split("{posargs", 1)[0] and found and found[1].strip():
                lines.append(
                    f"tox runs pytest with `{found[1].strip()}` by default "
                    f"(tox.ini [{section}]); seed runs every test"
                )
    return tuple(dict.fromkeys(lines))


_POSARGS = re.compile(r"\{posargs:([^{}]*)\}")
"""tox's posargs with a default, `{posargs:DEFAULT}` (no nested substitution)."""


def _found(read: Reader) -> tuple[str, dict[str, Any]]:
    """The configuration file and its pytest settings, as pytest looks for them."""
    for name in ("pytest.toml", ".pytest.toml"):
        data = toml_doc(read(name))
        if data is not None:
            return name, cast(dict[str, Any], data.get("pytest") or {})
    for name in ("pytest.ini", ".pytest.ini"):
        text = read(name)
        if text is not None:
            return name, _ini(text, "pytest")
    tool = cast(dict[str, Any], (toml_doc(read("pyproject.toml")) or {}).get("tool") or {})
    table = tool.get("pytest")
    if isinstance(table, dict):
        settings = cast(dict[str, Any], table)
        old = settings.get("ini_options")
        return "pyproject.toml", cast(dict[str, Any], old) if isinstance(old, dict) else settings
    for name, section in (("tox.ini", "pytest"), ("setup.cfg", "tool:pytest")):
        text = read(name)
        if text is None:
            continue
        parser = _parser(text)
        if parser is not None and parser.has_section(section):
            return name, dict(parser.items(section))
    return "", {}


def toml_doc(text: str | None) -> dict[str, Any] | None:
    """A TOML file's document, or None when it is absent or unreadable (as if absent)."""
    if text is None:
        return None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return None


def _parser(text: str) -> configparser.ConfigParser | None:
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text)
    except configparser.Error:
        return None
    return parser


def _ini(text: str, section: str) -> dict[str, Any]:
    parser = _parser(text)
    return dict(parser.items(section)) if parser is not None and parser.has_section(section) else {}
