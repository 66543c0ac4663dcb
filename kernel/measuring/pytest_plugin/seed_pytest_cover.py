"""Per-test line coverage for fault localisation, with coverage.py (one context per test).

Registered next to seed_pytest_plugin, only for the kernel's localisation run: the plugin's
`main` loads this file with coverage.py's folder on the path for the import only, and calls
`start` before pytest runs. The target's own coverage configuration is never read.
"""

from __future__ import annotations

from collections.abc import Generator

import coverage
import pytest

_cov: coverage.Coverage | None = None


def start(data_file: str, root: str) -> None:
    """Measure the files below root, into data_file, from now on."""
    global _cov
    cov = coverage.Coverage(data_file=data_file, source=[root], config_file=False, branch=False)
    cov.start()
    _cov = cov


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None]:
    # setup, call and teardown of one test count as that test's execution
    if _cov is not None:
        _cov.switch_context(item.nodeid)
    yield
    if _cov is not None:
        _cov.switch_context("")


def pytest_unconfigure() -> None:
    if _cov is not None:
        _cov.stop()
        _cov.save()
