"""Real projects measured by their own tools beside `seed.py gaps --json`.

    python bench/fidelity.py [--source DIR] [--only NAME,...] [--work DIR] [--json]

For each project of PROJECTS (pinned by commit): a clone of the git mirror at
DIR/<owner>+<name>/repo (the layout the `fetch` tool gives), a `.venv` with the project
installed editable and its test dependencies as its contributing docs say (set up once and
reused while the clone stays at the pinned commit), then side by side:

- the project's own `ruff check` (the version it pins, else seed's), `ruff format --check`
  where it adopted ruff format, pyright where it configures it, and its own test command
  (`.venv/bin/python -m pytest ...` or `-m unittest ...`, with the venv active), each parsed
  to the keys seed gives its gaps (`ruff:FILE:RULE`, `ruff-format:FILE`, `pyright:FILE:RULE`,
  `pytest:NODE_ID`, `pytest:collect:FILE`, `pytest:run`);
- `seed.py --root CLONE gaps --json` (empty measurement cache).

Per project and tool: false gaps (seed reports, the project's tools do not), missed gaps (the
project's tools report, seed does not), and both sides' wall time, with the load average.
Nothing here is asserted; tests/unit/test_fidelity_bench.py checks the comparison.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

SEED = Path(__file__).resolve().parent.parent
TOOLS: tuple[str, ...] = ("ruff", "ruff-format", "pyright", "mypy", "pytest")
DEFAULT_SOURCE = Path(os.environ.get("SEED_FIDELITY_SOURCE", "/work/.mirror"))
DEFAULT_WORK = Path(os.environ.get("SEED_FIDELITY_WORK", "/tmp/seed-fidelity"))


@dataclass(frozen=True)
class Project:
    """One project as its contributing docs set it up and check it."""

    name: str
    repo: str
    """upstream owner/name"""
    commit: str
    layout: str
    """src, flat, single module, namespace; the build backend; where the configuration lives"""
    install: tuple[str, ...]
    """pip arguments after `-e .`; `group:NAME` is a PEP 735 (or pdm dev) group, expanded here"""
    test: tuple[str, ...]
    """the test command's arguments to the venv's python"""
    ruff: str | None = None
    """None: the project does not lint with ruff; "": unpinned (seed's ruff); else the pin"""
    ruff_paths: tuple[str, ...] = (".",)
    format: bool = False
    """the project checks `ruff format`"""
    pyright: bool = False
    """the project configures pyright ([tool.pyright] or pyrightconfig.json)"""
    mypy: tuple[str, ...] | None = None
    """the arguments of the project's mypy command (its tox env), run with the venv's python;
    None: the project does not check with mypy"""
    extras: str = ""
    """`-e .[extras]`"""
    prebuild: tuple[str, ...] = ()
    """installed first, then the project built without build isolation (a build backend
    plugin that needs the network left out)"""
    note: str = ""


PROJECTS: tuple[Project, ...] = (
    Project(
        "six", "benjaminp/six", "c8e394065cd541a16c040515dc0afb85cf22a7c3",
        "single module; setuptools setup.py + setup.cfg; flake8 in setup.cfg, pytest in tox.ini",
        ("pytest",), ("-m", "pytest", "-rfsxX"),
        note="lints with flake8 (tox.ini), not ruff; registers a meta-path importer",
    ),
    Project(
        "click", "pallets/click", "2c8cd3ac958a7eb316d67f2d316c27086c4c0369",
        "src; flit; pyproject (ruff, pyright, pytest)",
        ("group:tests",), ("-m", "pytest"), ruff="0.15.9", format=True, pyright=True,
    ),
    Project(
        "attrs", "python-attrs/attrs", "c1dc5dcba16ed827aa6dcad896b41a3afedb4e32",
        "src, two packages; hatch + hatch-vcs; pyproject",
        ("group:tests",), ("-m", "pytest", "-n", "auto"), ruff="", pyright=True,
        note="lint group: ruff>=0.16 (unpinned); tox runs `pytest -n auto`",
    ),
    Project(
        "boltons", "mahmoud/boltons", "967864f89791509f9eb36b22b4579d36b72a6df2",
        "flat; flit; pytest in pyproject, tox.ini",
        ("group:dev",), ("-m", "pytest", "--doctest-modules", "boltons", "tests"),
        note="tox: pytest --doctest-modules <boltons> tests",
    ),
    Project(
        "markupsafe", "pallets/markupsafe", "1251593f6b0e3b45f2cc8aba662622bc22d6a5e2",
        "src; setuptools setup.py with a C extension; pyproject",
        ("group:tests",), ("-m", "pytest"), ruff="0.11.11", format=True, pyright=True,
    ),
    Project(
        "itsdangerous", "pallets/itsdangerous", "672971d66a2ef9f85151e53283113f33d642dabd",
        "src; flit; pyproject",
        ("group:tests",), ("-m", "pytest"), ruff="0.11.11", format=True, pyright=True,
    ),
    Project(
        "pluggy", "pytest-dev/pluggy", "e382e72789f8d791991c489d4322aa04e660b952",
        "src; setuptools + setuptools-scm; ruff in pyproject, pytest in tox.ini",
        ("group:testing",), ("-m", "pytest"), ruff="0.16.3", format=True,
    ),
    Project(
        "iniconfig", "pytest-dev/iniconfig", "71901257f6cbf660e77b1077e00f11a0f440be1e",
        "src; hatch + hatch-vcs; pyproject (testpaths = testing)",
        ("pytest",), ("-m", "pytest"),
        note="formats with black, no ruff",
    ),
    Project(
        "structlog", "hynek/structlog", "025edaf799c6d6d511ab672d14c2ba8e885c4c36",
        "src; hatch + hatch-vcs; pyproject (ruff select ALL), tox.ini",
        ("group:tests",), ("-m", "pytest"), ruff="0.15.16", format=True,
        note="pytest-randomly: a random test order",
    ),
    Project(
        "jaraco.functools", "jaraco/jaraco.functools", "9f4e0e2849659969577f40be40cabe026dd5fb0f",
        "namespace package (jaraco/); setuptools + setuptools-scm; ruff.toml, pytest.ini",
        (), ("-m", "pytest"), ruff="0.9.9", format=True, extras="test",
        prebuild=("setuptools>=77", "setuptools_scm[toml]>=3.4.1"),
        note="tox also installs extras check,cover,enabler,type (pytest-ruff, -mypy, -cov): left"
        " out; built without isolation, without coherent.licensed (fetches the licence text)",
    ),
    Project(
        "humanize", "python-humanize/humanize", "c3a124cdeb272d7f63bc0aa66f79c6fbafd2fc6d",
        "src; hatch + hatch-vcs; pyproject (ruff, mypy strict), tox.ini",
        ("-r", "requirements-mypy.txt"), ("-m", "pytest"), ruff="0.15.20", extras="tests",
        mypy=(".",),
        note="tox [testenv:mypy]: mypy . (strict, requirements-mypy.txt); formats with black",
    ),
    Project(
        "tenacity", "jd/tenacity", "c650fb45204635f07910948d5fc59a8c551ffdda",
        "flat; hatch + hatch-vcs (_version.py generated); pyproject",
        (), ("-m", "pytest"), ruff="", format=True, extras="test",
        note="poe lint: ruff check . + ruff format --check . (ruff unpinned)",
    ),
    Project(
        "marko", "frostming/marko", "0fa0b29b670feca15558652f327bc20c3baee91b",
        "flat; pdm-backend; pdm dev group, flake8 in setup.cfg",
        ("group:dev",), ("-m", "pytest", "tests/"), extras="toc,codehilite,repr",
        note="nox: pdm install -d; pytest tests/; lints with flake8 + black",
    ),
    Project(
        "tomlkit", "python-poetry/tomlkit", "d8ed1e3cdb024dfc2c6f12b45a0dfd4d4d91f727",
        "flat; poetry-core; pyproject, tox.ini",
        ("pytest", "PyYAML"), ("-m", "pytest", "tests/"), ruff="0.15.21", format=True,
        note="tests/toml-test is a git submodule (absent from the mirror)",
    ),
    Project(
        "pathspec", "cpburnz/python-pathspec", "6568072c2703c72796cd02467feb924540157c92",
        "flat; flit (setup.py, setup.cfg kept); benchmarks/ has its own pytest.ini",
        ("group:dev",), ("-m", "unittest", "discover", "-t", ".", "-s", "tests/"),
        note="tox.toml runs unittest; no ruff",
    ),
    Project(
        "pyupgrade", "asottile/pyupgrade", "1915f5dfa65063de58d3df821312e9a582ef5cea",
        "flat; setuptools setup.cfg; tox.ini",
        ("-r", "requirements-dev.txt"), ("-m", "pytest", "tests"),
        note="flake8 + autopep8 in pre-commit, no ruff",
    ),
    Project(
        "more-itertools", "more-itertools/more-itertools", "2fe1b2eeb9d75f994113fe3ac76d14b6bcd6fb10",
        "flat; flit; pyproject ([tool.ruff.format]), requirements/",
        ("-r", "requirements/testing.txt"), ("-m", "unittest"), ruff="",
        ruff_paths=("more_itertools", "tests"), format=True,
        note="Makefile: ruff format --check .; ruff check more_itertools tests; python -m unittest",
    ),
    Project(
        "pdoc", "mitmproxy/pdoc", "00e18eb12ae2f06f3c245f796bfe7f6224db033a",
        "flat; setuptools; pyproject (ruff, mypy, pytest); the tests are a package named `test/`",
        ("pytest", "pytest-timeout", "hypothesis"), ("-m", "pytest"), ruff="0.14.2",
        note="tox: pytest -m 'not slow' (CI passes -vvv: every test); ruff pinned in uv.lock;"
        " the stdlib has a `test` package too; dev group's tox, mypy, pydantic, pyo3 sample left out",
    ),
)  # fmt: skip


# ---- parsing: each tool's output to the keys seed's gaps carry -----------------------------


def _rel(path: str, root: Path) -> str:
    candidate = Path(path)
    if candidate.is_absolute():
        try:
            return candidate.resolve().relative_to(root.resolve()).as_posix()
        except ValueError:
            return candidate.as_posix()
    return candidate.as_posix().removeprefix("./")


def ruff_keys(text: str, root: Path) -> set[str]:
    """`ruff check --output-format json`: ruff:FILE:RULE."""
    items: list[dict[str, Any]] = json.loads(text or "[]")
    return {f"ruff:{_rel(i['filename'], root)}:{i.get('code') or 'invalid-syntax'}" for i in items}


_REFORMAT = re.compile(r"^Would reformat: (.+)$", re.M)


def format_keys(text: str, root: Path) -> set[str]:
    """`ruff format --check` (text output, which every ruff version prints): ruff-format:FILE."""
    return {f"ruff-format:{_rel(m.group(1).strip(), root)}" for m in _REFORMAT.finditer(text)}


def pyright_keys(text: str, root: Path) -> set[str]:
    """`pyright --outputjson`: pyright:FILE:RULE for errors (warnings are not enforced)."""
    data: dict[str, Any] = json.loads(text or "{}")
    return {
        f"pyright:{_rel(d.get('file', ''), root)}:{d.get('rule') or 'syntax'}"
        for d in data.get("generalDiagnostics", [])
        if d.get("severity", "error") == "error"
    }


_MYPY_ERROR = re.compile(r"^(.+?):\d+(?::\d+)?: error: .*?(?:  \[([a-z0-9_-]+)\])?$", re.M)


def mypy_keys(text: str, root: Path) -> set[str]:
    """mypy's one-line errors (`--no-pretty --show-error-codes`): mypy:FILE:CODE."""
    return {
        f"mypy:{_rel(m.group(1).strip(), root)}:{m.group(2) or 'misc'}"
        for m in _MYPY_ERROR.finditer(text)
    }


_SUMMARY = re.compile(r"^(FAILED|ERROR) (\S+?(?:\[.*\])?)(?: - .*)?$", re.M)


def pytest_keys(text: str, exit_code: int) -> set[str]:
    """The `-rfE` short summary: pytest:NODE_ID, pytest:collect:FILE; pytest:run when pytest
    itself failed (exit 2 without a collection error, 3 internal error, 4 usage) or timed out."""
    keys: set[str] = set()
    for match in _SUMMARY.finditer(text):
        node = match.group(2)
        keys.add(f"pytest:{node}" if "::" in node else f"pytest:collect:{node}")
    if exit_code in (3, 4, 124) or (exit_code == 2 and not keys):
        keys.add("pytest:run")
    return keys


_UNITTEST = re.compile(r"^(?:FAIL|ERROR): (\w+) \(([\w.]+)\)", re.M)


def unittest_keys(text: str, exit_code: int, root: Path) -> set[str]:
    """`python -m unittest` failure headers, as pytest would name the same tests."""
    keys: set[str] = set()
    for match in _UNITTEST.finditer(text):
        method, dotted = match.group(1), match.group(2)
        parts = dotted.split(".")
        if parts[-1] == method:  # 3.11 names the test in full: module.Class.method
            parts = parts[:-1]
        for cut in range(len(parts), 0, -1):
            path = "/".join(parts[:cut]) + ".py"
            if (root / path).is_file():
                keys.add("pytest:" + "::".join([path, *parts[cut:], method]))
                break
        else:
            keys.add(f"pytest:{dotted}::{method}")
    if exit_code not in (0, 1) or (exit_code == 1 and not keys):
        keys.add("pytest:run")
    return keys


def seed_keys(report: dict[str, Any]) -> dict[str, set[str]]:
    """seed's gap keys by tool (inbox and roadmap gaps are not the tools')."""
    keys: dict[str, set[str]] = {tool: set() for tool in TOOLS}
    for gap in report.get("gaps", []):
        if gap.get("source") in keys:
            keys[gap["source"]].add(gap["key"])
    return keys


@dataclass
class ToolResult:
    """One tool's comparison on one project."""

    tool: str
    project: int
    seed: int
    false: list[str]
    missed: list[str]


def compare(project: dict[str, set[str]], seed: dict[str, set[str]]) -> list[ToolResult]:
    """False gaps (seed only) and missed gaps (project only), per tool."""
    results: list[ToolResult] = []
    for tool in TOOLS:
        ours, theirs = seed.get(tool, set()), project.get(tool, set())
        results.append(
            ToolResult(tool, len(theirs), len(ours), sorted(ours - theirs), sorted(theirs - ours))
        )
    return results


@dataclass
class ProjectResult:
    """Everything measured on one project."""

    name: str
    commit: str
    layout: str
    tools: list[ToolResult] = field(default_factory=list[ToolResult])
    project_s: dict[str, float] = field(default_factory=dict[str, float])
    seed_s: float = 0.0
    error: str = ""
    seed_errors: list[str] = field(default_factory=list[str])


def table(results: list[ProjectResult], load: tuple[float, ...] = ()) -> str:
    """The text table: a row per project and tool, totals last."""
    lines = [
        "| project | tool | project's | seed's | false | missed | sample false | sample missed |",
        "|---|---|---:|---:|---:|---:|---|---|",
    ]
    false_total = missed_total = exact = 0
    for result in results:
        if result.error:
            lines.append(f"| {result.name} | (error) | | | | | {result.error[:120]} | |")
            continue
        wrong = 0
        for t in result.tools:
            false_total += len(t.false)
            missed_total += len(t.missed)
            wrong += len(t.false) + len(t.missed)
            sample_false = t.false[0] if t.false else ""
            sample_missed = t.missed[0] if t.missed else ""
            lines.append(
                f"| {result.name} | {t.tool} | {t.project} | {t.seed} | {len(t.false)} |"
                f" {len(t.missed)} | {sample_false} | {sample_missed} |"
            )
        exact += wrong == 0
        times = ", ".join(f"{k} {v:.1f}" for k, v in result.project_s.items())
        lines.append(
            f"| {result.name} | wall s | {sum(result.project_s.values()):.1f} | {result.seed_s:.1f}"
            f" | | | {times} | |"
        )
    measured = sum(1 for r in results if not r.error)
    lines.append(
        f"\n{measured} projects measured, {exact} exact; false {false_total}, missed {missed_total}"
        + (f"; load average {' '.join(f'{x:.2f}' for x in load)}" if load else "")
    )
    return "\n".join(lines)


# ---- running --------------------------------------------------------------------------------


def _run(
    argv: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 900
) -> tuple[int, str, float]:
    """exit code, stdout + stderr, wall seconds; exit 124 on a timeout."""
    started = time.monotonic()
    try:
        done = subprocess.run(
            argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
        )
        code, out = done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        code = 124
    return code, out, time.monotonic() - started


def _keep(work: Path, name: str, what: str, text: str) -> str:
    """Keep a tool's whole output under WORK/logs for reading the causes; return it."""
    logs = work / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    (logs / f"{name}.{what}.txt").write_text(text, encoding="utf-8")
    return text


def _groups(pyproject: Path, name: str) -> list[str]:
    """A PEP 735 dependency group (or a pdm dev group), include-groups expanded."""
    data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    groups: dict[str, list[Any]] = data.get("dependency-groups") or data.get("tool", {}).get(
        "pdm", {}
    ).get("dev-dependencies", {})
    out: list[str] = []
    for item in groups.get(name, []):
        out += _groups(pyproject, item["include-group"]) if isinstance(item, dict) else [item]
    return out


def _venv_env(clone: Path) -> dict[str, str]:
    """The project's virtualenv active, as tox, nox or `uv run` have it."""
    env = dict(os.environ)
    env["VIRTUAL_ENV"] = str(clone / ".venv")
    env["PATH"] = f"{clone / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env.pop("PYTHONPATH", None)
    return env


def setup(project: Project, source: Path, work: Path, log: list[str]) -> Path:
    """The clone at the pinned commit with its `.venv` (reused when already set up)."""
    clone = work / project.name
    mirror = source / project.repo.replace("/", "+") / "repo"
    ready = clone / ".venv" / ".fidelity-ready"
    if ready.is_file() and ready.read_text().strip() == project.commit:
        return clone
    shutil.rmtree(clone, ignore_errors=True)
    subprocess.run(["git", "clone", "-q", str(mirror), str(clone)], check=True)
    subprocess.run(["git", "-C", str(clone), "checkout", "-q", project.commit], check=True)
    subprocess.run([sys.executable, "-m", "venv", str(clone / ".venv")], check=True)
    python = str(clone / ".venv" / "bin" / "python")
    items: list[str] = []
    for item in project.install:
        items += (
            _groups(clone / "pyproject.toml", item[6:]) if item.startswith("group:") else [item]
        )
    editable = f".[{project.extras}]" if project.extras else "."
    pip = [python, "-m", "pip", "install", "-q", "-U", "pip", *project.prebuild]
    isolation = ["--no-build-isolation"] if project.prebuild else []
    for argv in (pip, [python, "-m", "pip", "install", "-q", *isolation, "-e", editable, *items]):
        code, out, _ = _run(argv, clone, _venv_env(clone), timeout=1800)
        log.append(out)
        if code:
            raise RuntimeError(f"setup failed: {' '.join(argv[3:])}: {out[-400:]}")
    ready.write_text(project.commit)
    return clone


def _ruff(version: str, work: Path) -> str:
    """The ruff binary of a pinned version (installed once under work/tools), or seed's."""
    if not version:
        return shutil.which("ruff", path=str(Path(sys.executable).parent)) or "ruff"
    target = work / "tools" / f"ruff-{version}"
    binary = target / "bin" / "ruff"
    if not binary.is_file():
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--target", str(target),
             f"ruff=={version}"],
            check=True,
        )  # fmt: skip
    return str(binary)


def project_side(
    project: Project, clone: Path, work: Path, timeout: float
) -> tuple[dict[str, set[str]], dict[str, float]]:
    """The project's own tools: keys per tool and wall seconds per tool."""
    keys: dict[str, set[str]] = {tool: set() for tool in TOOLS}
    seconds: dict[str, float] = {}
    env = _venv_env(clone)
    if project.ruff is not None:
        ruff = _ruff(project.ruff, work)
        argv = [ruff, "check", "--no-cache", "--output-format", "json", *project.ruff_paths]
        _, out, seconds["ruff"] = _run(argv, clone, env)
        keys["ruff"] = ruff_keys(out[out.find("[") :] if "[" in out else "[]", clone)
        if project.format:
            _, out, seconds["ruff-format"] = _run(
                [ruff, "format", "--check", "--no-cache"], clone, env
            )
            keys["ruff-format"] = format_keys(out, clone)
    if project.pyright:
        python = str(clone / ".venv" / "bin" / "python")
        argv = [sys.executable, "-m", "pyright", "--outputjson", "--pythonpath", python]
        _, out, seconds["pyright"] = _run(argv, clone, env)
        keys["pyright"] = pyright_keys(out[out.find("{") :] if "{" in out else "{}", clone)
    python = str(clone / ".venv" / "bin" / "python")
    if project.mypy is not None:
        flags = ["--no-pretty", "--show-error-codes", "--no-error-summary", "--no-color-output"]
        argv = [python, "-m", "mypy", *flags, "--cache-dir", os.devnull, *project.mypy]
        _, out, seconds["mypy"] = _run(argv, clone, env)
        keys["mypy"] = mypy_keys(out, clone)
    if project.test[:2] == ("-m", "unittest"):
        code, out, seconds["tests"] = _run(
            ["timeout", str(timeout), python, *project.test], clone, env, timeout + 30
        )
        keys["pytest"] = unittest_keys(_keep(work, project.name, "tests", out), code, clone)
    else:
        # a collection error stops the project's run before its tests (seed's run goes on):
        # go on too, or every failure behind it would read as a false gap
        more = ["-rfE", "--tb=no", "--continue-on-collection-errors"]
        argv = ["timeout", str(timeout), python, *project.test, *more]
        code, out, seconds["tests"] = _run(argv, clone, env, timeout + 30)
        keys["pytest"] = pytest_keys(_keep(work, project.name, "tests", out), code)
    return keys, seconds


def seed_side(clone: Path, work: Path, timeout: float) -> tuple[dict[str, Any], float]:
    """`seed.py --root CLONE gaps --json` with an empty measurement cache."""
    shutil.rmtree(clone / ".git" / "seed", ignore_errors=True)
    env = dict(os.environ, XDG_CACHE_HOME=str(work / "xdg"))
    argv = [sys.executable, str(SEED / "seed.py"), "--no-bootstrap", "--quiet",
            "--root", str(clone), "gaps", "--json"]  # fmt: skip
    code, out, seconds = _run(["timeout", str(timeout), *argv], clone, env, timeout + 30)
    _keep(work, clone.name, "seed", out)
    start = out.find("{")
    try:
        return json.loads(out[start : out.rfind("}") + 1]), seconds
    except ValueError:
        return {"gaps": [], "errors": [f"seed exit {code}: {out[-400:]}"]}, seconds


def measure(
    project: Project, source: Path, work: Path, timeout: float
) -> tuple[ProjectResult, dict[str, Any]]:
    """Set up one project, run both sides, compare; the raw keys beside for the JSON."""
    result = ProjectResult(project.name, project.commit[:7], project.layout)
    raw: dict[str, Any] = {}
    log: list[str] = []
    try:
        clone = setup(project, source, work, log)
        theirs, result.project_s = project_side(project, clone, work, timeout)
        report, result.seed_s = seed_side(clone, work, timeout * 2)
    except (RuntimeError, subprocess.CalledProcessError, OSError) as exc:
        result.error = str(exc)
        return result, raw
    ours = seed_keys(report)
    result.seed_errors = [str(e) for e in report.get("errors", [])]
    result.tools = compare(theirs, ours)
    raw = {
        "project": {t: sorted(k) for t, k in theirs.items()},
        "seed": {t: sorted(k) for t, k in ours.items()},
    }
    return result, raw


def _load(path: Path) -> tuple[list[ProjectResult], tuple[float, ...]]:
    """The results of a saved `--json` run."""
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    results: list[ProjectResult] = []
    for item in data["results"]:
        tools = [ToolResult(**t) for t in item.pop("tools")]
        results.append(ProjectResult(**item, tools=tools))
    return results, tuple(data["load"])


def main(argv: list[str] | None = None) -> int:
    """Measure the chosen projects and print the table (or JSON)."""
    parser = argparse.ArgumentParser(
        description="Real projects measured by their own tools beside seed."
    )
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="git mirrors")
    parser.add_argument("--only", default="", help="project names, comma-separated")
    parser.add_argument("--work", type=Path, default=DEFAULT_WORK, help="clones and venvs")
    parser.add_argument("--timeout", type=float, default=900, help="each test command, s")
    parser.add_argument("--json", action="store_true", help="print JSON, not the table")
    parser.add_argument(
        "--from", dest="saved", type=Path, nargs="+", help="print the table of --json runs"
    )
    args = parser.parse_args(argv)
    if args.saved:
        loaded = [_load(path) for path in args.saved]
        print(table([r for rs, _ in loaded for r in rs], loaded[-1][1]))
        return 0
    chosen = {n for n in args.only.split(",") if n}
    unknown = chosen - {p.name for p in PROJECTS}
    if unknown:
        parser.error(f"unknown projects: {', '.join(sorted(unknown))}")
    args.work.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()
    results: list[ProjectResult] = []
    raw: dict[str, Any] = {}
    for project in PROJECTS:
        if chosen and project.name not in chosen:
            continue
        print(f"bench.fidelity: {project.name} ...", file=sys.stderr, flush=True)
        result, raw[project.name] = measure(project, args.source, args.work, args.timeout)
        results.append(result)
    load = (*load_before, *os.getloadavg())
    if args.json:
        print(
            json.dumps(
                {"load": load, "results": [asdict(r) for r in results], "keys": raw}, indent=2
            )
        )
    else:
        print(table(results, load))
        for r in results:
            if r.seed_errors:
                print(f"{r.name}: seed's errors: {'; '.join(r.seed_errors)[:300]}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(SEED))
    raise SystemExit(main())
