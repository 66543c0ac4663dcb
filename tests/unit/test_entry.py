"""seed.py bootstraps what the command needs: on itself, the daemon measures its own tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.support import SEED_HOME


def _entry() -> ModuleType:
    spec = importlib.util.spec_from_file_location("seed_entry", SEED_HOME / "seed.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("argv", "tests"),
    [
        ([], True),  # `python seed.py`: the daemon on this repository
        (["once"], True),
        (["--root", str(SEED_HOME), "gaps"], True),
        ([f"--root={SEED_HOME}", "plan"], True),
        (["--root", "/elsewhere", "run"], False),
        (["status"], False),
        (["test"], True),
        (["--root", "/elsewhere", "test"], True),
    ],
)
def test_the_test_extras_are_bootstrapped_when_the_daemon_measures_itself(
    monkeypatch: pytest.MonkeyPatch, argv: list[str], tests: bool
) -> None:
    entry = _entry()
    asked: list[bool] = []
    rays: list[bool] = []

    def ensure(_argv: list[str], *, tests: bool, allowed: bool, ray: bool = False) -> None:
        asked.append(tests)
        rays.append(ray)

    import kernel.shell.bootstrap
    import kernel.shell.cli

    # main() imports ensure from the bootstrap when it runs (after `_own_path`)
    monkeypatch.setattr(kernel.shell.bootstrap, "ensure", ensure)
    monkeypatch.setattr(sys, "argv", ["seed.py", *argv])

    monkeypatch.setattr(kernel.shell.cli, "main", lambda _argv: 0)
    assert entry.main() == 0
    assert asked == [tests]
    # the Ray extra: always for the test command, else only when seed.toml asks for it
    assert rays == [argv[-1:] == ["test"]]
    assert Path(str(entry.__file__)).parent == SEED_HOME


@pytest.mark.parametrize(("where", "tests"), [("elsewhere", False), ("kernel", True)])
def test_without_root_the_current_directory_says_whether_it_measures_itself(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, where: str, tests: bool
) -> None:
    entry = _entry()
    monkeypatch.chdir(tmp_path if where == "elsewhere" else SEED_HOME / where)
    assert entry._on_itself(["once"]) is tests
