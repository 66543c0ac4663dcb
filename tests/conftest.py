"""Test tiers: unit, integration, reliability. `selfhost` tests never run inside a daemon."""

from __future__ import annotations

import os

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not os.environ.get("SEED_DEPTH"):
        return
    # a daemon running its own test suite must not start daemons on copies of itself
    deselected = [item for item in items if "selfhost" in item.keywords]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = [item for item in items if "selfhost" not in item.keywords]


@pytest.fixture
def bwrap() -> None:
    """The real sandbox: a test that needs it fails under CI (SEED_REQUIRE_BWRAP=1) when
    bubblewrap cannot run, and is skipped elsewhere."""
    from kernel.isolation import sandbox

    found = sandbox.available()
    if found.ok:
        return
    if os.environ.get("SEED_REQUIRE_BWRAP"):
        pytest.fail(f"the sandbox is required here: {found.reason}")
    pytest.skip(found.reason)
