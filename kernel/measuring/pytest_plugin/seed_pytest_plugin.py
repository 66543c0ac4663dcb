"""The kernel's pytest plugin: one JSON line per fact, sent down a pipe the kernel reads.

The kernel starts the target's interpreter from an empty folder with a few lines of
bootstrap (measure.BOOT) that read the run's configuration from stdin, load this file under a
neutral name and call `main`, before any project file can be imported. `main` then:
  - keeps the facts pipe it inherited as a private descriptor, closed on exec, and closes the
    inherited one, so no file, name or variable leads to it and the test process' children
    never hold it;
  - imports pytest's own plugins, then puts the tree first on sys.path, as `python -m pytest`
    in the tree does (pytest's `pythonpath` option and its default prepend import mode put
    their folders first too): a name resolves as in the project's own run (its `test/`
    package is its own), while every module imported before, the standard library's that
    the interpreter, pytest and this plugin hold, stays the one in sys.modules;
  - runs pytest in the tree with this module (and the coverage plugin, when asked) registered.
It must import nothing but the standard library and pytest. Configuration (JSON on stdin):
  fd      the write end of the facts pipe
  root    where the run sees the tree (the checkout's path when the sandbox puts it there)
  forbid  the user's checkout when the tree is not in its place ("" when it is): project
          code imported from there is an error, as is a module of the tree imported from
          anywhere else
  environment  the interpreter's installation where the person's side has it: inside the
          tree, only its site-packages name plugins
  files   record, per test, the project files whose code it ran (the test map): "monitor"
          only where sys.monitoring does it unseen (3.12+; else a "no_map" fact says so, and
          the run stays untraced: its outcomes are gaps), "trace" also with sys.settrace
          (a run of its own whose outcomes nobody reads), "" not at all
  lines   with "trace": project files (repository-relative) whose executed lines each test
          reports too (always by sys.settrace: a run of its own), [] for none
  cover   the coverage plugin's file, its data file and coverage.py's folder ("" for none)
  args    pytest's arguments
"""

from __future__ import annotations

import dis
import importlib.machinery
import importlib.metadata
import importlib.util
import inspect
import json
import os
import site
import sys
import sysconfig
import threading
from collections.abc import Generator
from pathlib import Path
from types import ModuleType
from typing import Any, cast

import _pytest.assertion.rewrite
import _pytest.config
import _pytest.python
import _pytest.reports
import _pytest.runner
import pytest

_fd = -1
"""The private descriptor of the facts pipe (-1 until main, or when it is gone)."""
_root = os.path.realpath(os.getcwd())
_forbid = ""
_MAX_TEXT = 4000
_SELF = os.path.realpath(__file__)
"""This plugin lives in the daemon's kernel/, inside the checkout when seed measures itself."""
_outside: list[str] = []
_env: list[str] = []
"""The interpreter's installation on the person's side (the kernel's `environment`)."""


# Loaded by the kernel's bootstrap before pytest starts and before the tree is on sys.path:
# what it sees now is pytest's own machinery, and a project module that replaces a piece of
# it while tests run (so failures pass) is reported as tampering.
def _static(owner: object, attr: str) -> object:
    # without the descriptor protocol: a classmethod is a new bound object at every getattr
    return inspect.getattr_static(owner, attr, None)


def _no_pyc(*_args: object, **_kwargs: object) -> None:
    """pytest's rewritten-code cache is never read: a pyc in the tree is what code under test
    could have written while earlier tests ran, for a test module not imported yet."""
    return None


if hasattr(_pytest.assertion.rewrite, "_read_pyc"):
    setattr(_pytest.assertion.rewrite, "_read_pyc", _no_pyc)  # noqa: B010

_WATCHED: dict[str, tuple[object, str]] = {
    "Function.runtest": (_pytest.python.Function, "runtest"),
    "Function.setup": (_pytest.python.Function, "setup"),
    "runner.runtestprotocol": (_pytest.runner, "runtestprotocol"),
    "runner.call_and_report": (_pytest.runner, "call_and_report"),
    "runner.call_runtest_hook": (_pytest.runner, "call_runtest_hook"),
    "CallInfo.from_call": (_pytest.runner.CallInfo, "from_call"),
    "TestReport.from_item_and_call": (_pytest.reports.TestReport, "from_item_and_call"),
    "json.dumps": (json, "dumps"),
    "AssertionRewritingHook.find_spec": (
        _pytest.assertion.rewrite.AssertionRewritingHook,
        "find_spec",
    ),
    "AssertionRewritingHook.exec_module": (
        _pytest.assertion.rewrite.AssertionRewritingHook,
        "exec_module",
    ),
    "rewrite.rewrite_asserts": (_pytest.assertion.rewrite, "rewrite_asserts"),
    "rewrite._rewrite_test": (_pytest.assertion.rewrite, "_rewrite_test"),
    "rewrite._read_pyc": (_pytest.assertion.rewrite, "_read_pyc"),
}
_ORIGINAL = {name: _static(owner, attr) for name, (owner, attr) in _WATCHED.items()}
_DUMPS = json.dumps
_rewrite_hook: object = None
"""pytest's own assertion rewriting hook, installed after this module's import (main)."""
_tampered: list[str] = []
_plugins: set[int] = set()
_loaded: set[int] = set()
"""Test modules and conftests whose loader was checked (by id)."""


# An import hook is evidence only: ordinary libraries register them (setuptools' vendor
# importers, six's meta-importer, typeguard). What counts is what a hook does to the run: a
# test module or conftest whose code is not its own file's as pytest's loader reads it.
def _own_loader(module: ModuleType, path: str) -> bool:
    """Whether a test module or conftest was loaded from its file by pytest's own loader (the
    assertion rewriter; the standard library's source loader when rewriting is off)."""
    spec = getattr(module, "__spec__", None)
    loader = getattr(spec, "loader", None) or getattr(module, "__loader__", None)
    origin = getattr(spec, "origin", None) or getattr(module, "__file__", None)
    if not origin or os.path.realpath(str(origin)) != os.path.realpath(path):
        return False
    if _rewrite_hook is not None:
        hook = cast(Any, _rewrite_hook)
        patched = any(name in vars(hook) for name in ("find_spec", "exec_module"))
        return loader is _rewrite_hook and not patched
    return type(loader) is importlib.machinery.SourceFileLoader


def _foreign_modules(session: pytest.Session) -> list[str]:
    """The collected test modules and the conftests not loaded by pytest's own loader."""
    found: list[tuple[ModuleType, str]] = []
    for item in session.items:
        collector = item.getparent(pytest.Module) if isinstance(item, pytest.Function) else None
        if collector is None:
            continue  # a doctest, or a plugin's own kind of test: no module of its own
        module = getattr(collector, "obj", None)
        path = getattr(collector, "path", None) or getattr(collector, "fspath", "")
        if isinstance(module, ModuleType):
            found.append((module, str(path)))
    for plugin in session.config.pluginmanager.get_plugins():
        file = getattr(plugin, "__file__", None)
        if isinstance(plugin, ModuleType) and file and os.path.basename(file) == "conftest.py":
            found.append((plugin, str(file)))
    foreign: list[str] = []
    for module, path in found:
        if id(module) in _loaded:
            continue
        _loaded.add(id(module))
        if not _own_loader(module, path):
            rel = _project_rel(path) or os.path.basename(path)
            foreign.append(f"{rel} was not loaded from its file by pytest's own loader")
    return foreign


def _check_tampering(session: pytest.Session | None = None, *, loaders: bool = False) -> None:
    """Report what changed the run (once each); `loaders`: the test modules' loaders too
    (after collection, when every test module and conftest is loaded)."""
    found = [
        f"{name} was replaced"
        for name, (owner, attr) in _WATCHED.items()
        if _static(owner, attr) is not _ORIGINAL[name]
    ]
    if globals().get("_emit") is not _EMIT:
        found.append("the plugin's _emit function was replaced")
    if session is not None and loaders:
        found += _foreign_modules(session)
    if session is not None and _plugins:
        found += [
            f"a pytest plugin was registered while tests ran: {getattr(plugin, '__name__', type(plugin).__name__)}"
            for plugin in session.config.pluginmanager.get_plugins()
            if id(plugin) not in _plugins
        ]
    for what in found:
        if what not in _tampered:
            _tampered.append(what)
            _send({"kind": "tampered", "what": what})


def _emit(record: dict[str, Any]) -> None:
    _send(record)


_EMIT = _emit


def _send(record: dict[str, Any]) -> None:
    """One fact down the pipe (a closed pipe: the kernel has stopped reading; facts are lost,
    and a run without its finish fact does not count)."""
    global _fd
    if _fd < 0:
        return
    data = (_DUMPS(record) + "\n").encode("utf-8")
    try:
        while data:
            data = data[os.write(_fd, data) :]
    except OSError:
        _fd = -1


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root + os.sep)


def _third_party(path: str) -> bool:
    parts = Path(path).parts
    return "site-packages" in parts or "dist-packages" in parts


def _project_rel(path: str) -> str:
    real = os.path.realpath(path)
    if _inside(real, _root) and not _third_party(real):
        return os.path.relpath(real, _root).replace(os.sep, "/")
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


def _in_tree(name: str) -> bool:
    """Whether the tree holds a module of this name, at its top or under src/."""
    rel = name.replace(".", os.sep)
    return any(
        os.path.isfile(os.path.join(_root, top, rel + end))
        for top in ("", "src")
        for end in (".py", os.sep + "__init__.py")
    )


def _check_imports() -> None:
    """Project code imported from outside the tree under test: from the person's checkout
    (`forbid`, where the tree is not in its place), or a module the tree holds imported from
    another copy (an installed one, another folder on the path). In the checkout's place, the
    tree is all there is of the checkout: only the second can happen."""
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if not file or name in _outside:
            continue
        real = os.path.realpath(file)
        if real == _SELF or (_inside(real, _root) and not _third_party(real)) or _is_stdlib(real):
            continue
        checkout = bool(_forbid) and _inside(real, _forbid) and not _third_party(real)
        if checkout or _in_tree(name):
            _outside.append(name)
            _emit({"kind": "outside_import", "module": name, "file": real})


_JUMPS: dict[Any, dict[int, tuple[int, str, int]]] = {}


def _jumps(code: Any) -> dict[int, tuple[int, str, int]]:
    """A code object's conditional jumps by offset: (line, where, the jump's target offset);
    `where` names the jump for a person (its function, column and instruction)."""
    found = _JUMPS.get(code)
    if found is None:
        found = {}
        line = code.co_firstlineno
        for ins in dis.get_instructions(code):
            line = ins.positions.lineno if ins.positions and ins.positions.lineno else line
            if ins.opname.startswith(("POP_JUMP", "JUMP_IF")) and isinstance(ins.argval, int):
                col = ins.positions.col_offset if ins.positions else None
                where = f"{code.co_name}, column {col}, {ins.opname}"
                found[ins.offset] = (line, where, ins.argval)
        _JUMPS[code] = found
    return found


_SPANS: dict[Any, tuple[int, int]] = {}


def _spans_any(code: Any, lines: list[int]) -> bool:
    """Whether one of the lines lies within a code object's first and last line (nested code
    included: an outer function spans its inner ones)."""
    span = _SPANS.get(code)
    if span is None:
        numbers = [n for _, _, n in code.co_lines() if n is not None]
        span = _SPANS[code] = (code.co_firstlineno, max(numbers, default=code.co_firstlineno))
    return any(span[0] <= n <= span[1] for n in lines)


class _Files:
    """Which files' code runs during one test: a code object counts once per test.

    On Python 3.12+ sys.monitoring reports each code object's first start and is then told to
    be quiet about it (nearly free, and invisible to the tests); before 3.12 a global trace
    function sees every call and turns line tracing off at once (the cost of one Python call
    per call, and a test sees it: sys.gettrace(), a frame more near the recursion limit), so
    only a run of its own may use it.
    """

    def __init__(
        self, watch: frozenset[str] = frozenset(), near: dict[str, list[int]] | None = None
    ) -> None:
        self.seen: set[str] = set()
        self.rel: dict[str, str] = {}
        self.blind = False
        self.watch = watch
        """Files whose executed lines are kept too (by sys.settrace only)."""
        self.near = near or {}
        """Per watched file, the lines that matter (the changed ones): a code object that
        spans none of them is not traced line by line (a file absent here is traced whole)."""
        self._decided: dict[Any, bool] = {}
        self.lines: dict[str, set[int]] = {}
        self.known: dict[str, set[tuple[int, str, int]]] = {}
        self.taken: dict[str, set[tuple[tuple[int, str, int], bool]]] = {}
        self._mon: Any = None if watch else getattr(sys, "monitoring", None)
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

    def untraceable(self) -> bool:
        """Whether only sys.settrace, which the tests can see, could make the map."""
        return self._mon is None

    def _started(self, code: Any, offset: int) -> Any:
        self.seen.add(code.co_filename)
        return self._mon.DISABLE

    def _traced(self, code: Any) -> bool:
        """Whether a code object's lines and jumps are followed: it is of a watched file and
        spans a line that matters (decided once per code object: this runs on every call)."""
        traced = self._decided.get(code)
        if traced is None:
            rel = self._rel(code.co_filename)
            near = self.near.get(rel)
            traced = bool(self.watch) and rel in self.watch
            traced = self._decided[code] = traced and (near is None or _spans_any(code, near))
        return traced

    def _trace(self, frame: Any, event: str, arg: Any) -> Any:
        name = frame.f_code.co_filename
        self.seen.add(name)
        if not self._traced(frame.f_code):
            return None  # not watched, or no line that matters lies in it
        lines = self.lines.setdefault(name, set())
        # opcode events in the watched files only: a line holds both sides of `x if c else y`,
        # and only the instruction after a conditional jump tells which side ran
        frame.f_trace_opcodes = True
        jumps = _jumps(frame.f_code)
        self.known.setdefault(name, set()).update(jumps.values())
        taken = self.taken.setdefault(name, set())
        last = [-1]

        def step(frame: Any, event: str, arg: Any) -> Any:
            if event == "line":
                lines.add(frame.f_lineno)
            elif event == "opcode":
                branch = jumps.get(last[0])
                if branch is not None:
                    taken.add((branch, frame.f_lasti == branch[2]))
                last[0] = frame.f_lasti
            return step

        return step

    def ran_branches(self) -> dict[str, list[list[Any]]]:
        """Per watched file, each conditional jump's two sides in the code the test ran:
        [line, where, side, taken] (side True: the jump taken)."""
        found: dict[str, list[list[Any]]] = {}
        for name, known in self.known.items():
            rel = self._rel(name)
            taken = self.taken.get(name, set())
            found[rel] = [
                [b[0], b[1], side, (b, side) in taken]
                for b in sorted(known)
                for side in (True, False)
            ]
        return found

    def _rel(self, name: str) -> str:
        rel = self.rel.get(name)
        if rel is None:
            real = name and not name.startswith("<") and os.path.realpath(name) != _SELF
            rel = self.rel[name] = _project_rel(name) if real else ""
        return rel

    def ran_lines(self) -> dict[str, list[int]]:
        """The watched files' lines the test ran."""
        found: dict[str, set[int]] = {}
        for name in self.seen:  # code of the file ran in this test: 0, which is no line of it
            if self._rel(name) in self.watch:
                found.setdefault(self._rel(name), set()).add(0)
        for name, lines in self.lines.items():
            rel = self._rel(name)
            if rel in self.watch:
                found.setdefault(rel, set()).update(lines)
        return {rel: sorted(lines) for rel, lines in found.items()}

    def start(self) -> None:
        self.seen = set()
        self.lines = {}
        self.known, self.taken = {}, {}
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
        return sorted({rel for rel in map(self._rel, self.seen) if rel})


_files: _Files | None = None


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
        fact: dict[str, Any] = {"kind": "files", "nodeid": item.nodeid, "files": _files.stop()}
        if _files.watch:
            fact["lines"] = _files.ran_lines()
            fact["branches"] = _files.ran_branches()
        _emit(fact)


_excinfo: dict[tuple[str, str], Any] = {}
"""The exception of the phase being reported, kept from makereport until its logreport."""


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, Any, None]:
    # an old-style wrapper, so targets on older pytest versions work too
    yield
    _check_tampering(item.session)
    if call.excinfo is not None:
        _excinfo[(item.nodeid, call.when)] = call.excinfo


@pytest.hookimpl(trylast=True)
def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # the report as pytest counts it: every makereport wrapper of the project (one that turns
    # a failure into an xfail, say) has finished with it, and the session has counted it
    excinfo = _excinfo.pop((report.nodeid, report.when), None)
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
    elif report.skipped and isinstance(report.longrepr, tuple):
        # (path, line, "Skipped: reason"): the reason says what the run lacked
        record["reason"] = str(report.longrepr[-1]).removeprefix("Skipped: ")[:_MAX_TEXT]
    if report.failed:
        text = str(report.longreprtext)
        if excinfo is not None:
            record.update(_describe(excinfo))
        else:  # failed by a plugin's verdict (a strict xpass), not by an exception
            record["message"] = (text.strip().splitlines() or [""])[-1][:_MAX_TEXT]
        record["trace_head"] = text[-_MAX_TEXT:]
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
    if _files is not None and _files.watch:
        # what ran on import (conftests, test modules importing the code): module and class
        # bodies a test only reads from still ran
        _files.stop()
        _emit(
            {
                "kind": "import_lines",
                "lines": _files.ran_lines(),
                "branches": _files.ran_branches(),
            }
        )
    _emit({"kind": "collected", "nodeids": [item.nodeid for item in session.items]})
    _check_imports()
    _check_tampering(session, loaders=True)
    # conftests and their plugins are registered by now; one registered later came from code
    # under test
    _plugins.update(id(plugin) for plugin in session.config.pluginmanager.get_plugins())


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _check_imports()
    _check_tampering(session, loaders=True)
    if _outside:
        session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
    _emit({"kind": "finish", "exitstatus": int(exitstatus), "outside_imports": _outside})


# -- the start: the facts pipe kept private, the tree first on sys.path ---------------------

_STDLIB = tuple(
    os.path.realpath(p) for p in {sysconfig.get_path("stdlib"), sysconfig.get_path("platstdlib")}
)


def _is_stdlib(entry: str) -> bool:
    real = os.path.realpath(entry or ".")
    if _third_party(real):
        return False
    name = os.path.basename(real)
    zipped = name.startswith("python") and name.endswith(".zip")
    return zipped or any(_inside(real, folder) for folder in _STDLIB)


def _pytest_first() -> None:
    """pytest's own plugins imported before the tree is on sys.path: every module they
    import at their top (difflib, unittest, xml.etree) is the standard library's, as is
    whatever the interpreter, pytest and this plugin hold already."""
    for name in _pytest.config.default_plugins:
        importlib.import_module(f"_pytest.{name}")


def _tree_on_path(root: str) -> None:
    """The tree first on sys.path, as `python -m pytest` run in the tree has it: its root
    packages (a `test/` package too) are the project's. A module imported before this
    stays the one sys.modules holds, whatever the tree holds of its name."""
    _pytest_first()
    sys.path.insert(0, root)


@pytest.hookimpl
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    # after pytest's own path handling (tryfirst) and before the conftests load (trylast)
    global _rewrite_hook
    _rewrite_hook = next(
        (f for f in sys.meta_path if type(f) is _pytest.assertion.rewrite.AssertionRewritingHook),
        None,
    )


def _load(name: str, path: str) -> ModuleType:
    """A plugin module from its file, under a neutral name, not entered in sys.modules."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cover(cover: dict[str, Any]) -> ModuleType:
    """The coverage plugin, with coverage.py imported from the kernel's folder for it only."""
    sys.path.insert(0, str(cover["shim"]))
    try:
        module = _load("cover", str(cover["plugin"]))
    finally:
        sys.path.remove(str(cover["shim"]))
    module.start(str(cover["data"]), _root)
    return module


_SITE = [os.path.realpath(p) for p in site.getsitepackages() if os.path.isdir(p)]
"""The target interpreter's own site-packages, read before the tree is on sys.path."""


def _installed_plugins() -> None:
    """With pytest's autoload off, its `pytest11` entry points from the interpreter's own
    site-packages only (a *.dist-info in the tree never names a plugin), where pytest would
    load them: after `-p`, honouring `-p no:NAME`, known to `required_plugins`. `-p NAME`
    loads a NAME entry point from there too. Inside the tree, only the person's environment
    counts (`environment`: a `.venv` in the checkout, which the sandbox shows read-only over
    the export's files at its place); anything else there is the tree's."""
    manager = _pytest.config.PytestPluginManager
    load, consider_env = manager.load_setuptools_entrypoints, manager.consider_env

    def installed(self: Any, group: str, name: str | None = None) -> int:
        found = importlib.metadata.distributions
        where = [p for p in _SITE if not _inside(p, _root) or any(_inside(p, e) for e in _env)]

        def site_only(**_: object) -> Any:
            return found(path=where)

        setattr(importlib.metadata, "distributions", site_only)  # noqa: B010
        try:
            return load(self, group, name)
        finally:
            setattr(importlib.metadata, "distributions", found)  # noqa: B010

    def loading(self: Any) -> None:
        self.load_setuptools_entrypoints("pytest11")
        consider_env(self)

    setattr(manager, "load_setuptools_entrypoints", installed)  # noqa: B010
    setattr(manager, "consider_env", loading)  # noqa: B010


def main(plugin: ModuleType, config: dict[str, Any]) -> None:
    """Run pytest in the tree with this plugin: the kernel's bootstrap calls this first."""
    global _fd, _root, _forbid, _files, _env
    inherited = int(config["fd"])
    _fd = os.dup(inherited)  # not inheritable: closed in anything the tests exec
    os.close(inherited)
    quiet = os.open(os.devnull, os.O_RDONLY)
    os.dup2(quiet, 0)  # the configuration came on stdin; the tests get nothing there
    os.close(quiet)
    _root = os.path.realpath(str(config["root"]))
    _forbid = os.path.realpath(str(config["forbid"])) if config.get("forbid") else ""
    _env = [os.path.realpath(str(e)) for e in cast(list[Any], config.get("environment") or [])]
    watch = frozenset(str(f) for f in cast(list[Any], config.get("lines") or []))
    near = {
        str(f): [int(n) for n in cast(list[Any], lines)]
        for f, lines in cast(dict[Any, Any], config.get("near") or {}).items()
    }
    _files = (
        _Files(watch if config.get("files") == "trace" else frozenset(), near)
        if config.get("files")
        else None
    )
    if _files is not None and _files.untraceable() and config.get("files") != "trace":
        _files = None  # tracing would change the outcomes this run reports
        _emit({"kind": "no_map"})
    if _files is not None and _files.watch:
        _files.start()  # until collection ends (pytest_collection_finish)
    plugins: list[object] = [plugin]
    if config.get("cover"):
        plugins.append(_cover(cast(dict[str, Any], config["cover"])))
    _installed_plugins()
    _tree_on_path(_root)
    os.chdir(_root)
    args = [str(a) for a in cast(list[Any], config["args"])]
    sys.argv = [os.path.join(os.path.dirname(pytest.__file__), "__main__.py"), *args]
    code = pytest.main(args, plugins=plugins)
    sys.stdout.flush()
    raise SystemExit(int(code))
