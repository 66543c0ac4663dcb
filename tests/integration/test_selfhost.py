"""seed on its own repository: it improves its modules, reloads them, and cannot brick itself.

Each test works on a clone of this repository and runs the clone's own seed.py, so the
daemon improves the very code it is running. Marked selfhost: a daemon's own test run
(SEED_DEPTH set) deselects them, so they never recurse.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kernel.loop import corpus
from tests.support import AGENT, SEED_HOME, agent_io, git, records, seed_env, wait_for

pytestmark = [pytest.mark.selfhost, pytest.mark.slow]

QUALITY = '[quality]\ntools = ["ruff", "ruff-format", "pytest"]\npytest_args = ["tests/unit/test_domain.py", "modules/reports/tests"]\n'


def clone_of_seed(tmp_path: Path, corpus_cases: int | None = 4) -> Path:
    """A clone of seed's committed HEAD on `main`; with `corpus_cases`, its shipped fitness
    corpus cut to that many cases and committed (every change to its modules is replayed
    over the corpus twice: these tests are about loading and protecting modules, and the
    whole corpus is test_generations.py's and bench/generations.py's)."""
    clone = tmp_path / "seed"
    subprocess.run(["git", "clone", "-q", str(SEED_HOME), str(clone)], check=True, timeout=120)
    git(clone, "checkout", "-q", "-B", "main")
    if corpus_cases is not None:
        shipped = clone / corpus.SHIPPED.relative_to(SEED_HOME)
        whole = corpus.read(shipped, "shipped")
        assert len(whole.cases) > corpus_cases and not whole.problems
        cut = whole.cases[:corpus_cases]
        corpus.write(shipped, [(c, corpus.texts(c, whole.blobs)) for c in cut])
        git(clone, "commit", "-qam", f"the shipped fitness corpus cut to {corpus_cases} cases")
    return clone


def _configure(clone: Path, tmp_path: Path, scripts: list[list[dict[str, Any]]]) -> None:
    """seed.toml for the clone: the scripted agent runs the next script each time it is started."""
    paths = []
    io = agent_io(tmp_path)  # the sandboxed agent reads and pops its queue here
    for i, steps in enumerate(scripts):
        path = io / f"script-{i}.json"
        path.write_text(json.dumps({"steps": steps}))
        paths.append(str(path))
    queue = io / "queue.json"
    queue.write_text(json.dumps(paths))
    runner = io / "next_script.py"
    runner.write_text(
        "import json, os, sys\n"
        f"queue = json.load(open({str(queue)!r}))\n"
        "script = queue.pop(0)\n"
        f"json.dump(queue, open({str(queue)!r}, 'w'))\n"
        f"os.execv(sys.executable, [sys.executable, {str(AGENT)!r}, script])\n"
    )
    argv = json.dumps([sys.executable, str(runner)])
    (clone / "seed.toml").write_text(
        f'[agent]\nbackend = "command"\ncommand = {argv}\ntimeout_s = 300\nrepair_rounds = 0\n'
        f"{QUALITY}"
        # these tests are about modules reloaded, fallen back and kept from the kernel; the
        # scripted modules' tests import them without running every method (KEPT by default)
        '[landing]\nuncovered = "land"\n'
    )


def _task(clone: Path, name: str, title: str, allowed: list[str], priority: str = "high") -> None:
    inbox = clone / "inbox"
    inbox.mkdir(exist_ok=True)
    path = inbox / name
    path.write_text(
        f'+++\ntitle = "{title}"\npriority = "{priority}"\nallowed = {json.dumps(allowed)}\n+++\n{title}.\n'
    )
    os.utime(path, (0, 0))  # long since written: no quiet period


def _once(clone: Path) -> subprocess.CompletedProcess[str]:
    env = seed_env()
    return subprocess.run(
        [sys.executable, str(clone / "seed.py"), "--no-bootstrap", "once"],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
        cwd=clone,  # as the person runs it: seed works on the repository it is started in
        stdin=subprocess.DEVNULL,
        check=False,
    )


def _events(clone: Path) -> list[dict[str, Any]]:
    path = clone / "history" / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _reporter_wrapper(clone: Path, body_line: str, module: str) -> list[dict[str, Any]]:
    """Steps that route the registry's reporter through a new module wrapping the current one."""
    registry = (clone / "modules" / "registry.py").read_text()
    match = re.search(r'^REPORTER = "([\w.]+):(\w+)"$', registry, re.M)
    assert match, 'the registry names its reporter as REPORTER = "module:ATTR"'
    base_module, base_attr = match.groups()
    code = (
        '"""A reporter that adds a footer to every report."""\n\n'
        "from __future__ import annotations\n\n"
        "from typing import Any\n\n"
        "from domain import IterationRecord\n"
        f"from {base_module} import {base_attr} as _BASE\n\n"
        + (f"{body_line}\n" if body_line else "")
        + "\nclass FooterReporter:\n"
        '    """The registry\'s reporter with a footer."""\n\n'
        "    contract_version = _BASE.contract_version\n\n"
        "    def __getattr__(self, name: str) -> Any:\n"
        "        return getattr(_BASE, name)\n\n"
        "    def render_record(self, record: IterationRecord) -> str:\n"
        '        """The base report and the footer."""\n'
        '        return _BASE.render_record(record) + "\\n_footer by the improved reporter_\\n"\n\n\n'
        "REPORTER = FooterReporter()\n"
    )
    test = (
        f"from modules.reports.{module} import REPORTER\n\n\n"
        "def test_footer_reporter_keeps_the_contract() -> None:\n"
        "    assert REPORTER.contract_version == 1\n"
    )
    return [
        {"write": f"modules/reports/{module}.py", "text": code},
        {"write": f"modules/reports/tests/test_{module}.py", "text": test},
        {
            "replace": "modules/registry.py",
            "old": match.group(0),
            "new": f'REPORTER = "modules.reports.{module}:REPORTER"',
        },
    ]


def test_an_agent_improves_a_module_and_the_next_iteration_runs_it(tmp_path: Path) -> None:
    clone = clone_of_seed(tmp_path)
    later = [
        {
            "write": "modules/reports/tests/test_noop.py",
            "text": "def test_noop() -> None:\n    assert sum([1, 2]) == 3\n",
        }
    ]
    _configure(clone, tmp_path, [_reporter_wrapper(clone, "", "footer"), later])
    _task(
        clone,
        "improve-reporter.md",
        "Add a footer to reports",
        ["modules/reports/**", "modules/registry.py"],
    )
    first = _once(clone)
    assert first.returncode == 0, first.stderr[-4000:]
    assert "reloaded the module host" in first.stderr
    _task(clone, "second.md", "Add a trivial test", ["modules/reports/tests/**"])
    second = _once(clone)
    assert second.returncode == 0, second.stderr[-4000:]
    one, two = records(clone)
    assert one["outcome"] == two["outcome"] == "SUCCESS"
    # any change to the module server's code is measured, and each one landed is a generation
    assert [one["generation"]["number"], two["generation"]["number"]] == [1, 2]
    assert one["generation"]["fell"] == two["generation"]["fell"] == []
    assert (
        "improved reporter"
        not in (clone / "history" / one["iteration_id"] / "report.md").read_text()
    )
    assert (
        "_footer by the improved reporter_"
        in (clone / "history" / two["iteration_id"] / "report.md").read_text()
    )
    assert (
        git(clone, "rev-parse", "refs/seed/last-good").strip()
        == git(clone, "rev-parse", "HEAD").strip()
    )


def _apply(clone: Path, steps: list[dict[str, Any]]) -> None:
    """A person's own edit: the scripted agent's write and replace steps, done by hand."""
    for step in steps:
        path = clone / (step.get("write") or step["replace"])
        if "write" in step:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(step["text"])
        else:
            path.write_text(path.read_text().replace(step["old"], step["new"]))


def test_a_module_that_breaks_only_when_loaded_falls_back_and_is_repaired(tmp_path: Path) -> None:
    clone = clone_of_seed(tmp_path)
    # module code runs at one path in every run of it (the self-check, a fitness replay, the
    # daemon), so a change that breaks only where it is deployed no longer lands: here it is
    # a person's own commit, which the kernel never measured
    guard_line = 'if "pytest" not in __import__("sys").modules:\n    raise ImportError("works in the tests, breaks where it is deployed")\n'
    trivial = [
        {
            "write": "modules/reports/tests/test_noop.py",
            "text": "def test_noop() -> None:\n    assert sum([1, 2]) == 3\n",
        }
    ]
    regression = 'import importlib\n\n\ndef test_fragile_loads() -> None:\n    assert importlib.import_module("modules.reports.fragile").REPORTER\n'
    repair = [
        {"replace": "modules/reports/fragile.py", "old": guard_line + "\n", "new": ""},
        {"write": "modules/reports/tests/test_fragile_loads.py", "text": regression},
    ]
    _configure(clone, tmp_path, [trivial, repair])
    _task(clone, "noop.md", "Add a trivial test", ["modules/reports/tests/**"])
    first = _once(clone)
    assert first.returncode == 0, first.stderr[-4000:]
    good = git(clone, "rev-parse", "refs/seed/last-good").strip()
    assert good == git(clone, "rev-parse", "HEAD").strip()  # a generation: measured
    _apply(clone, _reporter_wrapper(clone, guard_line, "fragile"))
    git(clone, "add", "-A")
    git(clone, "commit", "-qm", "a footer for reports (the person's own)")
    second = _once(clone)  # the person's modules fail the self-check: the last good ones run
    fallbacks = [e for e in _events(clone) if e["kind"] == "module_fallback"]
    assert (
        fallbacks
        and good[:12] in fallbacks[-1]["message"]
        and "breaks where it is deployed" in fallbacks[-1]["message"]
    ), second.stderr[-4000:]
    tasks = (clone / "inbox").rglob("module-fallback-*.md")
    [item] = [t for t in tasks if not t.name.endswith(".result.md")]
    assert 'priority = "critical"' in item.read_text() and good in item.read_text()
    if item.parent == clone / "inbox":  # left for the next pass (younger than the quiet period)
        os.utime(item, (0, 0))
        third = _once(clone)  # the daemon still works: it repairs the breakage
        assert third.returncode == 0, third.stderr[-4000:]
    else:  # the same pass took the critical task at once: the daemon still works
        assert second.returncode == 0, second.stderr[-4000:]
    last = records(clone)[-1]
    assert last["outcome"] == "SUCCESS" and last["gap"]["key"] == f"inbox:{item.name}"
    assert (
        git(clone, "rev-parse", "refs/seed/last-good").strip()
        == git(clone, "rev-parse", "HEAD").strip()
    )
    assert (clone / "inbox" / "done" / item.name).exists()
    assert not (clone / ".git" / "seed" / "last-good").exists()
    ok = subprocess.run(
        [sys.executable, str(clone / "seed.py"), "--no-bootstrap", "selfcheck"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert ok.returncode == 0, ok.stdout


def test_a_module_that_patches_the_kernel_changes_nothing_the_kernel_checks(tmp_path: Path) -> None:
    clone = clone_of_seed(tmp_path)
    sneaky = (
        "\nimport kernel.judging.verify as _kernel_verify\n\n\n"
        "def _always_pass(*args: object, **kwargs: object) -> object:\n"
        '    return _kernel_verify.Verification(passed=True, reason="patched by a module")\n\n\n'
        'setattr(_kernel_verify, "ver" + "ify", _always_pass)\n'
    )
    patch = [
        {"append": "modules/__init__.py", "text": sneaky},
        {
            "write": "modules/reports/tests/test_sneaky.py",
            "text": 'import modules\n\n\ndef test_import() -> None:\n    assert modules.__name__ == "modules"\n',
        },
    ]
    breaks_a_test = [{"replace": "domain/plans.py", "old": "\\d{4,}", "new": "\\d{5,}"}]
    _configure(clone, tmp_path, [patch, breaks_a_test])
    _task(
        clone,
        "sneaky.md",
        "Patch the kernel from a module",
        ["modules/__init__.py", "modules/reports/tests/**"],
    )
    first = _once(clone)
    assert first.returncode == 0, first.stderr[-4000:]
    assert "setattr(_kernel_verify" in (clone / "modules" / "__init__.py").read_text()
    head = git(clone, "rev-parse", "HEAD").strip()
    _task(clone, "break.md", "Rename a category", ["domain/**"])
    second = _once(clone)
    # domain/ is protected on seed's own repository (every kernel process imports it)
    assert second.returncode == 3, second.stderr[-4000:]
    last = records(clone)[-1]
    assert last["outcome"] == "ROLLBACK" and last["failure_category"] == "SANDBOX_VIOLATION"
    assert git(clone, "rev-parse", "HEAD").strip() == head


def test_an_agent_that_edits_the_kernel_is_refused_and_the_daemon_halts(tmp_path: Path) -> None:
    clone = clone_of_seed(tmp_path)
    kernel_before = {p: p.read_bytes() for p in sorted((clone / "kernel").rglob("*.py"))}
    seed_before = (clone / "seed.py").read_bytes()
    edits = [
        {
            "replace": "kernel/judging/verify.py",
            "old": "def verify(",
            "new": "def verify_original(",
        },
        {"append": "seed.py", "text": "\n# taken over\n"},
        {
            "write": "modules/reports/tests/test_x.py",
            "text": "def test_x() -> None:\n    assert [1] == [1]\n",
        },
    ]
    _configure(clone, tmp_path, [edits])
    _task(clone, "takeover.md", "Improve the verifier", ["**"])
    head = git(clone, "rev-parse", "HEAD").strip()
    result = _once(clone)
    assert result.returncode == 3, result.stderr[-4000:]
    [record] = records(clone)
    assert record["outcome"] == "ROLLBACK" and record["failure_category"] == "SANDBOX_VIOLATION"
    halt = json.loads((clone / "history" / "halt.json").read_text())
    assert halt["halted"] and "SANDBOX_VIOLATION" in halt["reason"]
    assert git(clone, "rev-parse", "HEAD").strip() == head
    assert {p: p.read_bytes() for p in sorted((clone / "kernel").rglob("*.py"))} == kernel_before
    assert (clone / "seed.py").read_bytes() == seed_before


def test_a_second_daemon_on_the_same_repository_refuses(tmp_path: Path) -> None:
    clone = clone_of_seed(tmp_path)
    barrier = agent_io(tmp_path) / "agent-started"
    _configure(clone, tmp_path, [[{"touch": str(barrier)}, {"hang": True}]])
    _task(clone, "slow.md", "Take your time", ["modules/reports/**"])
    env = seed_env()
    first = subprocess.Popen(
        [sys.executable, str(clone / "seed.py"), "--no-bootstrap"],
        cwd=clone,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        wait_for(barrier.exists, 600, "the first daemon's agent to start", first)
        second = _once(clone)
        assert second.returncode == 2
        assert f"pid {first.pid}" in second.stderr and "another seed daemon" in second.stderr
    finally:
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=120)
    assert first.returncode == 0
    # the agent ran in the sandbox's PID namespace: nothing of it is left on the machine
    assert not any(str(barrier.parent) in cmd for cmd in _cmdlines())


def test_a_fresh_clone_with_no_agent_fixes_lint_plans_the_rest_once_and_idles(
    tmp_path: Path,
) -> None:
    clone = clone_of_seed(tmp_path)
    target = clone / "modules" / "registry.py"
    target.write_text(
        target.read_text().replace("import importlib\n", "import importlib\nimport os\n", 1)
    )
    git(clone, "commit", "-qam", "a lint finding for ruff-fix")
    # seed's own selection is the whole unit tier: measured again at each analysis and
    # verification it is most of this test's time, and none of what it checks
    config = (clone / "seed.toml").read_text()
    selection = re.search(r"^pytest_args = .*$", config, re.M)
    assert selection, "seed.toml names its test selection"
    small = 'pytest_args = ["tests/unit/test_domain.py", "modules/reports/tests"]'
    (clone / "seed.toml").write_text(
        config.replace(selection.group(0), small).replace("[daemon]", "")
        + "\n[daemon]\npoll_interval_s = 1\n"
    )
    env = seed_env()
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if "fakes" not in p)
    daemon = subprocess.Popen(
        [sys.executable, str(clone / "seed.py"), "--no-bootstrap"],
        cwd=clone,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    status = clone / "history" / "status.json"
    try:
        wait_for(
            lambda: status.exists() and json.loads(status.read_text()).get("phase") == "idle",
            900,
            "the daemon to idle",
        )
        settled = records(clone)
        wait_for(
            lambda: json.loads(status.read_text()).get("phase") == "analysing",
            60,
            "a timer re-analysis",
        )
        wait_for(
            lambda: json.loads(status.read_text()).get("phase") == "idle",
            300,
            "the daemon to idle again",
        )
        daemon.send_signal(signal.SIGTERM)
        _, stderr = daemon.communicate(timeout=120)
    finally:
        if daemon.poll() is None:
            daemon.kill()
    assert daemon.returncode == 0
    assert records(clone) == settled, "the idle daemon planned the same gaps again"
    landed = [r for r in settled if r["outcome"] == "SUCCESS"]
    assert [r["backend"] for r in landed] == ["ruff-fix"] and "import os" not in target.read_text()
    waiting = [r for r in settled if r["outcome"] == "WAITING"]
    roadmap = (clone / "ROADMAP.md").read_text().count("- [ ]")
    assert len([r for r in waiting if r["gap"]["source"] == "roadmap"]) == roadmap
    assert len({r["gap"]["key"] for r in waiting}) == len(waiting)
    assert "no agent installed" in stderr
    assert "error" not in stderr.lower() and "Traceback" not in stderr


def _cmdlines() -> list[str]:
    """The command line of every process on the machine."""
    found: list[str] = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                found.append(
                    Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                )
            except (OSError, UnicodeDecodeError):
                continue
    return found


def test_modules_that_misread_inbox_tasks_fail_the_self_check(tmp_path: Path) -> None:
    # the inbox reader is the modules' since issue 18: a landed change that breaks it must
    # fail the boot self-check (and so fall back), not every analysis after it
    clone = clone_of_seed(tmp_path)
    reader = clone / "modules" / "analyzers" / "inbox.py"
    text = reader.read_text()
    parse = 'front, body = _front_matter(task.text.lstrip("\\ufeff"), task)'
    assert parse in text
    reader.write_text(text.replace(parse, "front, body = {}, task.text"))
    result = subprocess.run(
        [sys.executable, str(clone / "seed.py"), "--no-bootstrap", "selfcheck"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode != 0, result.stdout
    assert "inbox" in result.stdout and "the fixture task was read as" in result.stdout
