"""`python seed.py test`: the suite spread over three processes, unless the person chooses."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.support import seed

_PROBE = """
def test_where(request):
    print("WORKER=" + getattr(request.config, "workerinput", {}).get("workerid", "none"))
"""
"""Prints the xdist worker it ran on (not from the environment: a worker's children inherit it)."""


def _workers(tmp: Path, *args: str) -> tuple[set[str], str]:
    """The workers the tests of a two-test file ran on under `seed.py test FILE ARGS`, and its output."""
    probe = tmp / "test_probe.py"
    probe.write_text(_PROBE + _PROBE.replace("test_where", "test_there"))
    # -rA: each passed test's output in the summary (a worker's -s output never shows)
    result = seed(tmp, "test", str(probe), "-rA", *args, python=sys.executable)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "2 passed" in result.stdout, result.stdout[-3000:]
    found = {line.split("=", 1)[1] for line in result.stdout.split() if line.startswith("WORKER=")}
    return found, result.stdout


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((), None),  # three workers, unless the person chooses
        (("-x",), None),  # other arguments keep them
        (("-n", "0"), {"none"}),
        (("-p", "no:xdist"), {"none"}),
        (("-n", "1"), {"gw0"}),
    ],
)
def test_the_persons_arguments_choose_the_schedule(
    tmp_path: Path, args: tuple[str, ...], expected: set[str] | None
) -> None:
    found, out = _workers(tmp_path, *args)
    if expected is None:
        assert "3 workers [2 items]" in out, out[-3000:]
        assert found and found <= {"gw0", "gw1", "gw2"}, found
    else:
        assert found == expected


_SHARED = """
import pytest


@pytest.fixture(scope="module")
def shared(request):
    return getattr(request.config, "workerinput", {}).get("workerid", "none")


def test_one(shared):
    print("WORKER=" + shared)


def test_two(shared):
    print("WORKER=" + shared)


def test_three(shared):
    print("WORKER=" + shared)


def test_four(shared):
    print("WORKER=" + shared)
"""


def test_the_tests_of_one_file_run_on_one_worker(tmp_path: Path) -> None:
    # a file's shared fixture (one daemon run, one browser) is made once, not once per worker
    probe = tmp_path / "test_shared.py"
    probe.write_text(_SHARED)
    result = seed(tmp_path, "test", str(probe), "-rA", python=sys.executable)
    assert "4 passed" in result.stdout, result.stdout[-3000:] + result.stderr[-3000:]
    found = [line.split("=", 1)[1] for line in result.stdout.split() if line.startswith("WORKER=")]
    assert len(found) == 4 and len(set(found)) == 1 and found[0].startswith("gw"), found


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_test_help_prints_its_usage_without_the_test_extras(tmp_path: Path, flag: str) -> None:
    # seed's runtime interpreter alone (no hypothesis, no Ray): nothing to install for a usage
    result = seed(tmp_path, "test", flag)
    assert result.returncode == 0, result.stderr
    assert "usage:" in result.stdout and "test" in result.stdout, result.stdout
    assert "lacks" not in result.stderr and "installing" not in result.stderr, result.stderr
