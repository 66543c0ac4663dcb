"""The boot self-check: a tree's modules load, meet their contracts, and do their jobs on fixtures.

It starts a module host from the tree under test, so the kernel never imports that code.
The fixture repository is measured by the kernel itself (its gaps are known), then every
module kind is exercised and every answer validated against the domain.
"""

from __future__ import annotations

import re
import sys
import tempfile
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from domain import (
    AgentContext,
    AnalysisInput,
    GapCategory,
    GapRef,
    GapReport,
    InboxItem,
    IterationOutcome,
    IterationPlan,
    IterationRecord,
    Measurements,
    Priority,
    ProjectState,
)
from kernel.config import QualityConfig
from kernel.contracts import CONTRACT_VERSIONS
from kernel.errors import HostError
from kernel.fsutil import remove_any
from kernel.host.host import ModuleHost, frozen_code
from kernel.isolation import trees
from kernel.isolation.jails import ModuleJail
from kernel.isolation.paths import Paths
from kernel.measuring.gate import freeze_gate
from kernel.measuring.measure import Target, ruff_binary, run_pytest, run_ruff
from kernel.records.inbox import task_text

MODULE_FOLDERS: dict[str, tuple[str, ...]] = {
    "analyzers": ("analyzer", "ranker"),
    "planner": ("planner",),
    "agents": ("agent",),
    "reports": ("reporter",),
}
"""Each module folder and the contracts its CONTRACT.md declares."""

_FIXTURE_FILES = {
    "mod.py": "import os\n\n\ndef half(x):\n    return x / 2\n",
    "tests/test_mod.py": "from mod import half\n\n\ndef test_half():\n    assert half(4) == 2\n\n\ndef test_fails():\n    assert half(3) == 1\n",
    "ROADMAP.md": "# Next\n- [ ] add a double function\n",
}
_NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
_fixture_lock = threading.Lock()
_fixture: Measurements | None = None


@dataclass(frozen=True)
class Check:
    """One part of the self-check."""

    name: str
    ok: bool
    detail: str

    def __str__(self) -> str:
        return f"{'ok  ' if self.ok else 'FAIL'} {self.name}: {self.detail}"


def fixture_measurements() -> Measurements:
    """The kernel's measurements of the fixture repository (made once per process)."""
    global _fixture
    with _fixture_lock:
        if _fixture is not None:
            return _fixture
        with tempfile.TemporaryDirectory(prefix="seed-selfcheck-") as raw:
            tree = Path(raw) / "fixture"
            for name, text in _FIXTURE_FILES.items():
                (tree / name).parent.mkdir(parents=True, exist_ok=True)
                (tree / name).write_text(text, encoding="utf-8")
            quality = QualityConfig(tools=["ruff", "pytest"])
            gate = freeze_gate(tree, Path(raw) / "gate", quality)
            target = Target(root=Path(raw) / "elsewhere", python=sys.executable, quality=quality)
            items = (run_ruff(tree, gate, 120), run_pytest(tree, target, Path(raw) / "work", 300))
            _fixture = Measurements(tree="fixture", items=items)
        return _fixture


def contract_documents(tree: Path) -> list[Check]:
    """Every module folder has a CONTRACT.md and a SPEC.md, and the CONTRACT names the kernel's version."""
    checks: list[Check] = []
    for folder, kinds in MODULE_FOLDERS.items():
        base = tree / "modules" / folder
        contract, spec = base / "CONTRACT.md", base / "SPEC.md"
        if not contract.is_file() or not spec.is_file():
            missing = [p.name for p in (contract, spec) if not p.is_file()]
            checks.append(
                Check(f"docs:{folder}", False, f"modules/{folder} lacks {', '.join(missing)}")
            )
            continue
        found = re.search(
            r"(?i)version\D{0,3}(\d+)", contract.read_text(encoding="utf-8", errors="replace")
        )
        want = {CONTRACT_VERSIONS[k] for k in kinds}
        if found is None or int(found.group(1)) not in want:
            said = found.group(1) if found else "no version"
            checks.append(
                Check(
                    f"docs:{folder}",
                    False,
                    f"CONTRACT.md declares {said}; the kernel speaks {sorted(want)}",
                )
            )
        else:
            checks.append(
                Check(
                    f"docs:{folder}",
                    True,
                    f"CONTRACT.md and SPEC.md present, version {found.group(1)}",
                )
            )
    return checks


def _exercise(host: ModuleHost) -> list[Check]:
    agents, _ = host.agents()
    checks = [Check("agents", True, f"{len(agents)} backends load: {', '.join(sorted(agents))}")]
    backend = host.choose_backend("auto", "seed.toml", agents)
    checks.append(Check("backend", True, f"auto chooses {backend.name}"))
    inbox, read = _inbox_reader(host)
    checks.append(read)
    if inbox is None:
        return checks
    report, analysed = _analyzers(host, inbox)
    checks.append(analysed)
    if not analysed.ok:
        return checks
    plan, planned = _planner(host, report)
    checks.append(planned)
    if plan is None:
        return checks
    context = AgentContext(
        worktree="/nonexistent",
        seed_home=str(host.place),
        python=sys.executable,
        ruff=ruff_binary(),
        command=("true",),
    )
    for name in sorted(agents):
        spec = host.agent_spec(name, plan, context)
        checks.append(
            Check(f"agent:{name}", True, "run spec" if spec else "plans only for this gap")
        )
    checks.append(_reporter(host, plan))
    return checks


_FIXTURE_TASK = '+++\npriority = "low"\ntitle = "Write a README"\n+++\nDescribe the module.\n'


def _inbox_reader(host: ModuleHost) -> tuple[InboxItem | None, Check]:
    """The fixture task as the modules read it: its front matter taken, its body kept."""
    task = task_text("selfcheck.md", _FIXTURE_TASK, _NOW)
    read = host.read_inbox([task])[0]
    if isinstance(read, str):
        return None, Check("inbox", False, f"the fixture task was refused: {read}")
    expected = ("Write a README", Priority.LOW, "Describe the module.")
    if (read.title, read.priority, read.body.strip()) != expected:
        return None, Check(
            "inbox", False, f"the fixture task was read as {read.title!r}, {read.priority}"
        )
    return read, Check("inbox", True, "the fixture task's front matter is read")


def _analyzers(host: ModuleHost, inbox: InboxItem) -> tuple[GapReport, Check]:
    """The fixture's report: the F401 finding, the failing test (ranked first), inbox and roadmap."""
    report = host.analyze(
        AnalysisInput(
            measurements=fixture_measurements(),
            inbox=(inbox,),
            roadmap=_FIXTURE_FILES["ROADMAP.md"],
            now=_NOW,
        )
    )
    lint = next(
        (
            i
            for i, g in enumerate(report.gaps)
            if any(d.rule == "F401" and d.file == "mod.py" for d in g.evidence)
        ),
        None,
    )
    failing = next(
        (
            i
            for i, g in enumerate(report.gaps)
            if any(d.node_id == "tests/test_mod.py::test_fails" for d in g.evidence)
        ),
        None,
    )
    sources = {g.source for g in report.gaps}
    if lint is None or failing is None or not {"inbox", "roadmap"} <= sources:
        what = [
            n
            for n, found in (("the F401 finding", lint), ("the failing test", failing))
            if found is None
        ]
        what += sorted({"inbox", "roadmap"} - sources)
        return report, Check("analyzers", False, f"the fixture report lacks {', '.join(what)}")
    if failing > lint:
        return report, Check("analyzers", False, "a failing test must rank before a lint finding")
    return report, Check(
        "analyzers", True, f"{len(report.gaps)} gaps found on the fixture, the failing test first"
    )


def _planner(host: ModuleHost, report: GapReport) -> tuple[IterationPlan | None, Check]:
    """The plan for the fixture's report (None when it is not a valid one)."""
    state = ProjectState(now=_NOW, next_sequence=1, worktree="", backend="none")
    plan = host.plan(report, [], state)
    if (
        plan is None
        or plan.iteration_id != "iter-0001-20260101-120000"
        or plan.gap.key not in [g.key for g in report.gaps]
        or not plan.criteria
    ):
        return None, Check(
            "planner",
            False,
            f"no valid plan for the fixture report ({plan.iteration_id if plan else 'None'})",
        )
    return plan, Check(
        "planner", True, f"planned {plan.gap.key} with {len(plan.criteria)} criteria"
    )


def _reporter(host: ModuleHost, plan: IterationPlan) -> Check:
    """report.md for a record of the plan names its iteration."""
    record = IterationRecord(
        iteration_id=plan.iteration_id,
        started_at=_NOW,
        ended_at=_NOW,
        outcome=IterationOutcome.SUCCESS,
        gap=GapRef(key=plan.gap.key, category=GapCategory.QUALITY, source=plan.gap.source),
        plan=plan,
    )
    text = host.render_record(record)
    ok = plan.iteration_id in text
    return Check(
        "reporter",
        ok,
        "report.md names the iteration" if ok else "report.md does not name the iteration",
    )


def run_selfcheck(tree: Path, log: Path, jail: ModuleJail | None = None) -> list[Check]:
    """Every check of the boot self-check for the modules in tree (sandboxed with a jail)."""
    checks = contract_documents(tree)
    host = ModuleHost(tree, log, timeout_s=120, jail=jail)
    try:
        hello = host.start()
        checks.append(
            Check(
                "boot",
                True,
                f"module host pid {hello.get('pid')} loaded every module and its contract",
            )
        )
        checks += _exercise(host)
    except HostError as exc:
        checks.append(Check("boot" if not host.hello else "modules", False, str(exc)[:600]))
    finally:
        host.stop()
    return checks


def selfcheck_of(
    paths: Paths, tree: str, store: trees.ObjectStore | None, jail: ModuleJail | None
) -> tuple[bool, str]:
    """The self-check of a tree's modules (a candidate's), copied as the module server runs them."""
    code = frozen_code(paths, tree, store)
    try:
        return selfcheck(code, paths.state / "selfcheck.log", jail)
    finally:
        remove_any(code)


def selfcheck(tree: Path, log: Path, jail: ModuleJail | None = None) -> tuple[bool, str]:
    """Run the self-check; (passed, a summary naming what failed)."""
    checks = run_selfcheck(tree, log, jail)
    failed = [c for c in checks if not c.ok]
    if failed:
        return False, "; ".join(f"{c.name}: {c.detail}" for c in failed)[:1000]
    return (
        True,
        f"{len(checks)} checks passed: modules boot, meet their contracts and handle the fixtures",
    )
