"""The plain run: the target's interpreter running `python -m pytest` as the project runs it
(its configuration, its addopts, its default import mode, its plugins found the usual way),
with nothing of seed's, sandboxed like every test run, on an export of HEAD with the
git-ignored files seed's runs are shown. Its outcomes are compared with seed's own run of
the same tree, and what differs is said in `differences`, never in `errors`.

It runs at the first analysis and again only when the test configuration (the pytest
configuration files, every conftest.py) or the shown ignored files change: what it says is
kept in the state folder under that key, so an analysis with the key unchanged costs a
hash of a few git object ids and file sizes.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import tempfile
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from domain import Measurement
from kernel.bounds import printable
from kernel.fsutil import atomic_write_text
from kernel.isolation import gitops, ignored, procs, sandbox, trees
from kernel.isolation.jails import Jailed
from kernel.measuring.measure import Target, failed_ids, scm_env, tool_env, venv_env

STATE_FILE = "plainrun.json"
"""What the latest plain run said, and its key, in the kernel's state folder."""
CONFIG_FILES = (
    "pyproject.toml",
    "pytest.ini",
    ".pytest.ini",
    "pytest.toml",
    ".pytest.toml",
    "setup.cfg",
    "tox.ini",
)
"""The files pytest reads its configuration from at the tree's top."""
_MAX_JUNIT = 64 * 1024 * 1024
"""Bytes of the run's junit XML read at most."""
_SHOWN_IDS = 5
"""Node ids named per line at most."""
_ID_CHARS = 200
"""Characters of one node id named at most (the run's code wrote the XML)."""
_VERSION = "1"
"""Part of the key: a new way of comparing runs the plain run again."""


@dataclass(frozen=True)
class PlainResult:
    """The outcomes of one plain run, by node id, or why there are none."""

    tests: tuple[str, ...] = ()
    failed: frozenset[str] = frozenset()
    skipped: frozenset[str] = frozenset()
    broken: frozenset[str] = frozenset()
    """Modules that could not be collected."""
    why_not: str = ""
    """Why the run gave no outcomes ('' when it did)."""


def config_key(root: Path, head: str, target: Target, shown: Sequence[Path]) -> str:
    """What the plain run's outcome depends on besides the code: the interpreter, the sandbox
    and seed.toml's selection, the test configuration's git objects at head, and each shown
    ignored file's path, size and time."""
    jailed = (str(target.jail is None), str(target.test_jail is None))
    how = "\0".join([_VERSION, target.python, *jailed, *target.quality.pytest_args])
    digest = hashlib.sha256(how.encode("utf-8", errors="surrogateescape"))
    tree = gitops.tree_of(root, head)
    for _, oid, path in trees.entries(root, tree):
        if path in CONFIG_FILES or path == "conftest.py" or path.endswith("/conftest.py"):
            digest.update(f"\0{path}\0{oid}".encode("utf-8", errors="surrogateescape"))
    for file in shown:
        with contextlib.suppress(OSError):
            stat = file.stat()
            digest.update(f"\1{file}\0{stat.st_size}\0{stat.st_mtime_ns}".encode(errors="replace"))
    return digest.hexdigest()


def said(
    state: Path,
    root: Path,
    head: str,
    target: Target,
    sandboxed: bool,
    seed_run: Measurement,
    export: Callable[[], Path],
) -> tuple[str, ...]:
    """The differences the plain run finds: kept from the latest plain run when its key is
    unchanged, else from a new plain run of `export()` (HEAD's files) compared with seed's
    run of the same tree."""
    shown = ignored.ignored_files(root).files if sandboxed else ()
    key = config_key(root, head, target, shown)
    kept = read_state(state)
    if kept.get("key") == key:
        return kept_lines(state)
    plain = run_plain(export(), target)
    lines = compare(plain, seed_run, gitops.out(root, "rev-parse", "--short", head))
    # whether the project's own run imported every test module it found (analysis.py reads it)
    clean = not plain.why_not and bool(plain.tests) and not plain.broken
    with contextlib.suppress(OSError):
        state.mkdir(parents=True, exist_ok=True)
        text = json.dumps({"key": key, "lines": list(lines), "clean": clean})
        atomic_write_text(state / STATE_FILE, text)
    return lines


def collected_all(state: Path) -> bool:
    """Whether the latest plain run ran tests and could import every test module it found."""
    return read_state(state).get("clean") is True


def read_state(state: Path) -> dict[str, Any]:
    """The latest plain run's key and lines ({} when there is none or it is unreadable)."""
    with contextlib.suppress(OSError, ValueError):
        found = json.loads((state / STATE_FILE).read_text(encoding="utf-8"))
        if isinstance(found, dict):
            return cast(dict[str, Any], found)
    return {}


def kept_lines(state: Path) -> tuple[str, ...]:
    """What the latest plain run said (for `status`)."""
    lines = read_state(state).get("lines")
    listed = cast(list[Any], lines)[:10] if isinstance(lines, list) else []
    return tuple(str(line)[:2000] for line in listed)


def run_plain(tree: Path, target: Target) -> PlainResult:
    """`python -m pytest` on the tree (with seed.toml's `pytest_args`, that selection),
    sandboxed like seed's test runs, its junit XML written to a folder of its own outside
    the tree."""
    out_dir = Path(tempfile.mkdtemp(prefix="seed-plain-"))
    junit = out_dir / "junit.xml"
    # seed.toml's `pytest_args` are the person's selection for seed's runs: the same here
    argv = [target.python, "-m", "pytest", *target.quality.pytest_args, f"--junitxml={junit}"]
    jailed = Jailed(argv, tree)
    jail = target.test_jail or target.jail
    if jail is not None:
        jailed = jail(argv, tree, (out_dir,))
    timeout_s = target.quality.tool_timeout_s
    try:
        # started where the run sees the tree, as a person starts it in their checkout
        result = procs.run(
            jailed.argv,
            cwd=jailed.seen,
            timeout_s=timeout_s,
            env=_env(target),
            merge_stderr=True,
            max_bytes=1024 * 1024,
        )
        if result.timed_out:
            return PlainResult(why_not=f"it did not finish in {timeout_s:.0f}s")
        if not junit.is_file() or junit.stat().st_size > _MAX_JUNIT:
            tail = result.text().strip().splitlines()[-1:] or [f"exit {result.exit_code}"]
            return PlainResult(why_not=f"it wrote no results ({printable(tail[0], 300)})")
        return read_junit(junit.read_bytes(), tree)
    finally:
        sandbox.settle(jailed.made)
        shutil.rmtree(out_dir, ignore_errors=True)


def _env(target: Target) -> dict[str, str]:
    """The measurement's environment with the target's virtualenv active and the base
    commit's version for setuptools-scm, as seed's runs have it; pytest finds its plugins
    its own way."""
    env = tool_env()
    return {**env, **venv_env(target.python, env.get("PATH", "")), **scm_env(target.root)}


def read_junit(data: bytes, tree: Path) -> PlainResult:
    """The node ids of a pytest junit XML's test cases, by outcome (an xfail is no skip)."""
    try:
        top = ElementTree.fromstring(data)
    except ElementTree.ParseError as exc:
        return PlainResult(why_not=f"its results could not be read ({exc})")
    tests: dict[str, None] = {}
    failed: set[str] = set()
    skipped: set[str] = set()
    broken: set[str] = set()
    for case in top.iter("testcase"):
        found = node_id(case.get("classname", ""), case.get("name", ""), tree)
        node = printable(found, _ID_CHARS)
        bad = case.find("failure") is not None or case.find("error") is not None
        if "::" not in node:  # a module that could not be collected
            broken.add(node)
            continue
        tests[node] = None
        skip = case.find("skipped")
        if bad:
            failed.add(node)
        elif skip is not None and skip.get("type") != "pytest.xfail":
            skipped.add(node)
    return PlainResult(tuple(tests), frozenset(failed), frozenset(skipped), frozenset(broken))


def node_id(classname: str, name: str, tree: Path) -> str:
    """pytest's node id from junit's dotted classname and name: the longest leading part of
    the classname that is a file of the tree is the module, the rest are classes."""
    parts = [p for p in classname.split(".") if p] if classname else name.split(".")
    rest = [name] if classname else []
    for cut in range(len(parts), 0, -1):
        path = "/".join(parts[:cut]) + ".py"
        if (tree / path).is_file():
            return "::".join([path, *parts[cut:], *rest])
    return "::".join([classname, name]) if classname else name


def compare(plain: PlainResult, seed_run: Measurement, commit: str) -> tuple[str, ...]:
    """The lines saying how the plain run's outcomes differ from seed's run (none when
    they agree)."""
    what = f"the project's own pytest run (`python -m pytest`, at {commit})"
    if plain.why_not:
        return (f"{what} gave nothing to compare: {plain.why_not}",)
    seed_failed = failed_ids(seed_run)
    seed_broken = {d.file for d in seed_run.diagnostics if d.rule == "collection-error"}
    lines: list[str] = []
    if plain.broken - seed_broken:
        broken = _listed(sorted(plain.broken - seed_broken))
        lines.append(f"{what}: collection errors in {broken}, which seed's run collects")
    if plain.broken and not plain.tests:
        # pytest stops at collection errors where seed's run goes on (`tools:` says so)
        return tuple(lines)
    only_plain = sorted(plain.failed - seed_failed)
    only_seed = sorted(seed_failed & set(seed_run.collected) - plain.failed)
    if len(plain.tests) != len(seed_run.collected) or only_plain or only_seed:
        notes = [_named(only_plain, "only in the project's own run")]
        notes += [_named(only_seed, "only in seed's run")]
        tail = "; ".join(n for n in notes if n)
        lines.append(
            f"{what}: {_counted(len(plain.tests), len(plain.failed))}; seed's run: "
            f"{_counted(len(seed_run.collected), len(seed_failed))}"
            + (f" ({tail})" if tail else "")
        )
    seed_skipped = set(seed_run.collected) - set(seed_run.passed) - seed_failed
    plain_passed = set(plain.tests) - plain.failed - plain.skipped
    lines += _skip_lines(
        sorted(seed_skipped & plain_passed), sorted(plain.skipped & set(seed_run.passed))
    )
    return tuple(lines)


def _skip_lines(only_seed: list[str], only_plain: list[str]) -> list[str]:
    """The tests that skip in one run and pass in the other."""
    lines: list[str] = []
    if only_seed:
        lines.append(
            f"{_tests(len(only_seed))} in seed's runs but not in the project's own: "
            f"{_listed(only_seed)}"
        )
    if only_plain:
        lines.append(
            f"{_tests(len(only_plain))} in the project's own run but not in seed's: "
            f"{_listed(only_plain)}"
        )
    return lines


def _tests(n: int) -> str:
    return f"{n} test skips" if n == 1 else f"{n} tests skip"


def _counted(tests: int, failed: int) -> str:
    fails = "none fail" if not failed else f"{failed} fails" if failed == 1 else f"{failed} fail"
    return f"{tests} test{'' if tests == 1 else 's'}, {fails}"


def _named(ids: list[str], where: str) -> str:
    if not ids:
        return ""
    verb = "fails" if len(ids) == 1 else "fail"
    return f"{len(ids)} {verb} {where}: {_listed(ids)}"


def _listed(ids: list[str]) -> str:
    shown = ", ".join(ids[:_SHOWN_IDS])
    return shown + (f" and {len(ids) - _SHOWN_IDS} more" if len(ids) > _SHOWN_IDS else "")
