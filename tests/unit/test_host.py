"""The module host: contracts checked at load, refused with a named error; answers validated."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kernel.errors import HostError
from kernel.host.host import ModuleHost
from modules.server import ContractError, check_contract
from tests.support import SEED_HOME


class _GoodAgent:
    name = "x"
    contract_version = 1
    executable = ""
    sources = ("*",)

    def run_spec(self, plan: object, context: object) -> None:
        return None

    def parse(self, plan: object, result: object) -> None:
        return None


def test_a_module_that_fits_its_contract_is_accepted() -> None:
    check_contract("agent", "tests:_GoodAgent", _GoodAgent())


def test_missing_member_wrong_version_or_arity_are_refused_by_name() -> None:
    class NoParse(_GoodAgent):
        parse = None  # type: ignore[assignment]

    class OldVersion(_GoodAgent):
        contract_version = 0

    class TooManyArgs(_GoodAgent):
        def run_spec(self, plan: object, context: object, extra: object) -> None:  # type: ignore[override]
            return None

    del NoParse.parse
    with pytest.raises(ContractError, match="missing parse"):
        check_contract(
            "agent",
            "modules.agents.broken:AGENT",
            type(
                "Bare",
                (),
                {
                    "name": "b",
                    "contract_version": 1,
                    "executable": "",
                    "sources": (),
                    "run_spec": _GoodAgent.run_spec,
                },
            )(),
        )
    with pytest.raises(ContractError, match="version 0"):
        check_contract("agent", "modules.agents.old:AGENT", OldVersion())
    with pytest.raises(ContractError, match="run_spec takes 3 arguments"):
        check_contract("agent", "modules.agents.wide:AGENT", TooManyArgs())


def _copy_code(tmp_path: Path) -> Path:
    code = tmp_path / "code"
    for name in ("modules", "domain"):
        shutil.copytree(
            SEED_HOME / name, code / name, ignore=shutil.ignore_patterns("__pycache__", "tests")
        )
    (code / "kernel").mkdir(parents=True)
    for name in ("__init__.py", "contracts.py"):
        shutil.copy(SEED_HOME / "kernel" / name, code / "kernel" / name)
    return code


def test_host_boots_real_modules_and_answers(tmp_path: Path) -> None:
    host = ModuleHost(_copy_code(tmp_path), tmp_path / "host.log")
    try:
        hello = host.start()
        assert hello["analyzers"] == ["quality", "inbox", "roadmap"]
        agents, _ = host.agents()
        assert {"command", "ruff-fix", "none"} <= set(agents)
    finally:
        host.stop()
    assert not host.running


def test_nothing_at_the_code_folders_root_stands_in_for_what_the_server_imports(
    tmp_path: Path,
) -> None:
    # a tree's root is the agent's to write (seed's own repository protects kernel/ only):
    # were it on the server's path, a `json.py` there would change every answer it gives
    code = _copy_code(tmp_path)
    bomb = "raise SystemExit('imported from the code folder root')\n"
    for name in (
        "json.py",
        "pydantic.py",
        "typing_extensions.py",
        "sitecustomize.py",
        "usercustomize.py",
    ):
        (code / name).write_text(bomb)
    host = ModuleHost(code, tmp_path / "host.log")
    try:
        assert host.start()["analyzers"] == ["quality", "inbox", "roadmap"]
        assert "command" in host.agents()[0]
    finally:
        host.stop()
    assert "code folder root" not in (tmp_path / "host.log").read_text()


def test_host_refuses_a_module_that_breaks_its_contract(tmp_path: Path) -> None:
    code = _copy_code(tmp_path)
    planner = code / "modules" / "planner" / "planner.py"
    planner.write_text(
        planner.read_text().replace("    contract_version = 1\n", "    contract_version = 99\n")
    )
    host = ModuleHost(code, tmp_path / "host.log")
    with pytest.raises(HostError, match="planner contract version 99"):
        host.start()
    assert not host.running


def test_host_that_cannot_import_is_a_host_error(tmp_path: Path) -> None:
    code = _copy_code(tmp_path)
    (code / "modules" / "analyzers" / "quality.py").write_text(
        "raise RuntimeError('boom at import')\n"
    )
    host = ModuleHost(code, tmp_path / "host.log")
    with pytest.raises(HostError, match="boom at import"):
        host.start()


def test_calls_from_threads_never_interleave_and_a_cut_short_answer_is_dropped(
    tmp_path: Path,
) -> None:
    import threading

    host = ModuleHost(_copy_code(tmp_path), tmp_path / "host.log")
    host.start()
    failures: list[str] = []

    def ask() -> None:
        for _ in range(25):
            try:
                host.agents()
            except HostError as exc:
                failures.append(str(exc))

    try:
        threads = [threading.Thread(target=ask) for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert failures == []
        # a request whose caller stopped waiting (Ctrl-C) leaves its answer in the pipe
        proc = host._proc  # pyright: ignore[reportPrivateUsage]
        assert proc is not None and proc.stdin is not None
        proc.stdin.write(b'{"id": %d, "method": "agents", "params": {}}\n' % host._next_id)  # pyright: ignore[reportPrivateUsage]
        proc.stdin.flush()
        host._next_id += 1  # pyright: ignore[reportPrivateUsage]
        agents, _ = host.agents()
        assert "command" in agents
    finally:
        host.stop()
