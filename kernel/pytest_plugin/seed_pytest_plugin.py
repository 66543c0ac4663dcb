"""The kernel's pytest plugin: one JSON line per fact, so partial results survive a crash.

Loaded into the target's own interpreter with `-p seed_pytest_plugin`; it must import
nothing but the standard library and pytest. Environment:
  SEED_PYTEST_OUT     file to append JSON lines to
  SEED_PYTEST_ROOT    the tree under test (the worktree)
  SEED_PYTEST_FORBID  the user's checkout: project code imported from there is an error
  SEED_PYTEST_FILES   "1": record, per test, the project files whose code it ran (the test map)
"""

from __future__ import annotations

import inspect
import json
import os
import sys
import threading
from collections.abc import Generator
from pathlib import Path
from typing import Any, cast

import _pytest.python
import _pytest.reports
import _pytest.runner
import pytest

_OUT = os.environ.get("SEED_PYTEST_OUT", "")
_ROOT = os.path.realpath(os.environ.get("SEED_PYTEST_ROOT", os.getcwd()))
_FORBID = (
    os.path.realpath(os.environ["SEED_PYTEST_FORBID"])
    if os.environ.get("SEED_PYTEST_FORBID")
    else ""
)
_MAX_TEXT = 4000
_SELF = os.path.realpath(__file__)
"""This plugin lives in the daemon's kernel/, inside the checkout when seed measures itself."""
_outside: list[str] = []
_TRACE = os.environ.get("SEED_PYTEST_FILES") == "1"


# Loaded with -p, this module is imported before any conftest or project module: what it
# sees now is pytest's own machinery, and a project module that replaces a piece of it
# while tests run (so failures pass) is reported as tampering.
def _static(owner: object, attr: str) -> object:
    # without the descriptor protocol: a classmethod is a new bound object at every getattr
    return inspect.getattr_static(owner, attr, None)


_WATCHED: dict[str, tuple[object, str]] = {
    "Function.runtest": (_pytest.python.Function, "runtest"),
    "Function.setup": (_pytest.python.Function, "setup"),
    "runner.runtestprotocol": (_pytest.runner, "runtestprotocol"),
    "runner.call_and_report": (_pytest.runner, "call_and_report"),
    "runner.call_runtest_hook": (_pytest.runner, "call_runtest_hook"),
    "CallInfo.from_call": (_pytest.runner.CallInfo, "from_call"),
    "TestReport.from_item_and_call": (_pytest.reports.TestReport, "from_item_and_call"),
    "json.dumps": (json, "dumps"),
}
_ORIGINAL = {name: _static(owner, attr) for name, (owner, attr) in _WATCHED.items()}
_META_PATH = list(sys.meta_path)
_tampered: list[str] = []
_plugins: set[int] = set()


def _check_tampering(session: pytest.Session | None = None) -> None:
    found = [
        f"{name} was replaced"
        for name, (owner, attr) in _WATCHED.items()
        if _static(owner, attr) is not _ORIGINAL[name]
    ]
    found += [
        f"an import hook was added: {type(finder).__module__}.{type(finder).__qualname__}"
        for finder in sys.meta_path
        if not any(finder is known for known in _META_PATH)
    ]
    if session is not None and _plugins:
        found += [
            f"a pytest plugin was registered while tests ran: {getattr(plugin, '__name__', type(plugin).__name__)}"
            for plugin in session.config.pluginmanager.get_plugins()
            if id(plugin) not in _plugins
        ]
    for what in found:
        if what not in _tampered:
            _tampered.append(what)
            _emit({"kind": "tampered", "what": what})


def _emit(record: dict[str, Any]) -> None:
    if not _OUT:
        return
    with open(_OUT, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(record) + "\n")
        handle.flush()


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root + os.sep)


def _third_party(path: str) -> bool:
    parts = Path(path).parts
    return "site-packages" in parts or "dist-packages" in parts


def _project_rel(path: str) -> str:
    real = os.path.realpath(path)
    if _inside(real, _ROOT) and not _third_party(real):
        return os.path.relpath(real, _ROOT).replace(os.sep, "/")
    return ""


def _frames(excinfo: Any) -> list[tuple[str, int]]:
    frames: list[tuple[str, int]] = []
    try:
        entries = list(excinfo.traceback)
    except Exception:
        return frames
    for entry in entries:
        rel = _project_rel(str(entry.path))
        if rel:
            frames.append((rel, int(entry.lineno) + 1))
    return frames


def _describe(excinfo: Any) -> dict[str, Any]:
    try:
        exc_type = excinfo.typename
        message = str(excinfo.value).strip().splitlines()
        headline = message[0] if message else exc_type
    except Exception:
        exc_type, headline = "", ""
    frames = _frames(excinfo)
    crash = frames[-1] if frames else ("", 0)
    return {
        "exc_type": exc_type,
        "message": headline[:_MAX_TEXT],
        "frame_file": crash[0],
        "frame_line": crash[1],
        "frames": frames[:20],
    }


def _check_imports() -> None:
    if not _FORBID:
        return
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if not file:
            continue
        real = os.path.realpath(file)
        if real == _SELF:
            continue
        outside = _inside(real, _FORBID) and not _inside(real, _ROOT) and not _third_party(real)
        if outside and name not in _outside:
            _outside.append(name)
            _emit({"kind": "outside_import", "module": name, "file": real})


class _Files:
    """Which files' code runs during one test: a code object counts once per test.

    On Python 3.12+ sys.monitoring reports each code object's first start and is then told to
    be quiet about it (nearly free); before 3.12 a global trace function sees every call and
    turns line tracing off at once (the cost of one Python call per call).
    """

    def __init__(self) -> None:
        self.seen: set[str] = set()
        self.rel: dict[str, str] = {}
        self.blind = False
        self._mon: Any = getattr(sys, "monitoring", None)
        self._tool = 0
        if self._mon is not None:
            for tool in (5, 4, 3):  # ids the coverage/debugger/profiler conventions leave free
                try:
                    self._mon.use_tool_id(tool, "seed-test-map")
                except ValueError:
                    continue
                self._tool = tool
                self._mon.register_callback(tool, self._mon.events.PY_START, self._started)
                break
            else:
                self._mon = None

    def _started(self, code: Any, offset: int) -> Any:
        self.seen.add(code.co_filename)
        return self._mon.DISABLE

    def _trace(self, frame: Any, event: str, arg: Any) -> None:
        self.seen.add(frame.f_code.co_filename)

    def start(self) -> None:
        self.seen = set()
        self.blind = False
        if self._mon is not None:
            self._mon.restart_events()
            self._mon.set_events(self._tool, self._mon.events.PY_START)
        elif sys.gettrace() is not None:
            # someone else traces (the target's own coverage, a debugger): never displace it;
            # the map then says this test may run anything
            self.blind = True
        else:
            sys.settrace(self._trace)
            threading.settrace(self._trace)  # threads the test starts

    def stop(self) -> list[str]:
        if self._mon is not None:
            self._mon.set_events(self._tool, 0)
        elif self.blind:
            return ["*"]
        else:
            if sys.gettrace() == self._trace:
                sys.settrace(None)
            threading.settrace(None)  # type: ignore[arg-type]
        found: set[str] = set()
        for name in self.seen:
            rel = self.rel.get(name)
            if rel is None:
                real = name and not name.startswith("<") and os.path.realpath(name) != _SELF
                rel = self.rel[name] = _project_rel(name) if real else ""
            if rel:
                found.add(rel)
        return sorted(found)


_files = _Files() if _TRACE else None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, Any, None]:
    # setup, call and teardown count as the test's own execution
    if _files is None:
        yield
        return
    _files.start()
    try:
        yield
    finally:
        _emit({"kind": "files", "nodeid": item.nodeid, "files": _files.stop()})


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, Any, None]:
    # an old-style wrapper, so targets on older pytest versions work too
    outcome = yield
    _check_tampering(item.session)
    report = cast(pytest.TestReport, outcome.get_result())
    if report.passed and report.when != "call":
        return
    record: dict[str, Any] = {
        "kind": "test",
        "nodeid": report.nodeid,
        "when": report.when,
        "outcome": report.outcome,
        "duration": round(float(report.duration), 4),
    }
    if hasattr(report, "wasxfail"):
        record["xfail"] = True
    if call.excinfo is not None and report.failed:
        record.update(_describe(call.excinfo))
        record["trace_head"] = str(report.longreprtext)[-_MAX_TEXT:]
    _emit(record)


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if not report.failed:
        return
    longrepr = str(report.longrepr).strip()
    errors = [line[2:].strip() for line in longrepr.splitlines() if line.startswith("E ")]
    tail = longrepr.splitlines()[-1] if longrepr else "collection failed"
    message = errors[-1] if errors else tail
    exc_type = message.split(":", 1)[0] if ":" in message else ""
    _emit(
        {
            "kind": "collect_error",
            "nodeid": report.nodeid,
            "message": str(message)[:_MAX_TEXT],
            "exc_type": exc_type,
            "trace_head": longrepr[-_MAX_TEXT:],
        }
    )


def pytest_collection_finish(session: pytest.Session) -> None:
    _emit({"kind": "collected", "nodeids": [item.nodeid for item in session.items]})
    _check_imports()
    _check_tampering()
    # conftests and their plugins are registered by now; one registered later came from code
    # under test
    _plugins.update(id(plugin) for plugin in session.config.pluginmanager.get_plugins())


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _check_imports()
    _check_tampering(session)
    if _outside:
        session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
    _emit({"kind": "finish", "exitstatus": int(exitstatus), "outside_imports": _outside})
