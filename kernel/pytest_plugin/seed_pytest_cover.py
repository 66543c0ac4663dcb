"""Per-test line coverage for fault localisation, with coverage.py (one context per test).

Loaded with `-p seed_pytest_cover` next to seed_pytest_plugin, only for the kernel's
localisation run. coverage.py comes from a folder the kernel puts on the path; the target's
own coverage configuration is never read. Environment:
  SEED_COVER_DATA   the data file to write
  SEED_PYTEST_ROOT  the tree under test: only files below it are measured
"""

from __future__ import annotations

import os
from collections.abc import Generator

import coverage
import pytest

_cov = coverage.Coverage(
    data_file=os.environ["SEED_COVER_DATA"],
    source=[os.environ.get("SEED_PYTEST_ROOT", os.getcwd())],
    config_file=False,
    branch=False,
)
_cov.start()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None]:
    # setup, call and teardown of one test count as that test's execution
    _cov.switch_context(item.nodeid)
    yield
    _cov.switch_context("")


def pytest_unconfigure() -> None:
    _cov.stop()
    _cov.save()
