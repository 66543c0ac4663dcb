"""The verifier: acceptance criteria from the fixed catalogue, and the ratchet against the baseline.

Quality findings are counted per (tool, file, rule), and failing tests per node id: a finding
is new only when its count grows, so one that moved, or whose message quotes a name the fix
renamed, is not new, and a pre-existing one is never blamed on the agent. Collected tests are
compared by what is stable between two runs: the number of cases of each test function.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from domain import (
    AcceptanceCriterion,
    CheckName,
    CriterionVerdict,
    Diagnostic,
    FailureCategory,
    GapCategory,
    IterationPlan,
    Measurement,
    Measurements,
    TaskKind,
    Tool,
)
from kernel.isolation import readback
from kernel.judging.guard import is_test_path
from kernel.measuring.measure import TYPE_CHECKS, TYPE_TOOLS, failed_ids, skip_jump
from kernel.measuring.suppressions import unsuppressed
from kernel.records.signature import identity

Rerun = Callable[[Sequence[str]], tuple[set[str], set[str]]]
"""The suite the suspects failed in, run again the same way (the whole suite, the same order):
on the changed tree, then on the base for those that failed again. Returns the suspects that
did not pass again on the changed tree, and those of them that did not pass on the base."""


_LIKENESS: tuple[Callable[[Diagnostic], Hashable], ...] = (
    lambda d: (d.message, d.line),
    lambda d: d.message,
)
"""How a finding after the change is paired with one before, closest first (then by line)."""
MAX_COMPILED_BYTES = 64 * 1024 * 1024
"""A touched file larger than this is not read for the compile check."""
_PAIRING_LIMIT = 250_000
"""Pairs weighed by line distance at most; beyond it, what is left pairs in order."""


def _unpaired(before: Sequence[Diagnostic], after: Sequence[Diagnostic]) -> list[int]:
    """Indexes of `after` left over when each is paired with one of `before`, closest first."""
    pending, spare = list(range(len(after))), list(before)
    for likeness in _LIKENESS:
        pool: defaultdict[Hashable, list[int]] = defaultdict(list)
        for i, d in enumerate(spare):
            pool[likeness(d)].append(i)
        used: set[int] = set()
        rest: list[int] = []
        for i in pending:
            free = pool.get(likeness(after[i]))
            if free:
                used.add(free.pop())
            else:
                rest.append(i)
        pending, spare = rest, [d for i, d in enumerate(spare) if i not in used]
    if len(pending) * len(spare) > _PAIRING_LIMIT:
        return pending[len(spare) :]
    paired: set[int] = set()
    taken: set[int] = set()
    weighed = sorted(
        (abs(after[i].line - d.line), i, j) for i in pending for j, d in enumerate(spare)
    )
    for _, i, j in weighed:
        if i not in paired and j not in taken:
            paired.add(i)
            taken.add(j)
    return [i for i in pending if i not in paired]


def new_findings(before: Measurement | None, after: Measurement | None) -> list[Diagnostic]:
    """Findings in `after` beyond the count of their kind in `before`.

    Which ones are named is only a matter of evidence: those that look least like any before
    (the same message and line, then the same message, then the nearest line).
    """
    if after is None:
        return []
    old: defaultdict[tuple[str, str, str], list[Diagnostic]] = defaultdict(list)
    for d in before.diagnostics if before else ():
        old[identity(d)].append(d)
    now: defaultdict[tuple[str, str, str], list[int]] = defaultdict(list)
    for i, d in enumerate(after.diagnostics):
        now[identity(d)].append(i)
    fresh: set[int] = set()
    for key, where in now.items():
        if len(where) > len(old[key]):
            found = [after.diagnostics[i] for i in where]
            fresh.update(where[j] for j in _unpaired(old[key], found))
    return [d for i, d in enumerate(after.diagnostics) if i in fresh]


def _test_function(node_id: str) -> str:
    """A node id without its parameters: `f.py::test_x[1-a]` is `f.py::test_x`."""
    path, sep, rest = node_id.partition("::")
    return path + sep + rest.split("[", 1)[0]


@dataclass(frozen=True)
class LostTests:
    """Tests collected on the baseline that the changed tree no longer collects."""

    count: int = 0
    """Cases gone: for each test function, how many fewer it has."""
    names: tuple[str, ...] = ()
    """The node ids gone, or `function (N cases, now M)` where its ids changed too."""
    unstable: tuple[str, ...] = ()
    """Test functions whose case ids changed though their number did not (ids from a clock...)."""


def lost_tests(before: Sequence[str], after: Sequence[str]) -> LostTests:
    """Compare two collections by what is stable between runs: the cases of each test function."""
    cases: defaultdict[str, list[str]] = defaultdict(list)
    for node in before:
        cases[_test_function(node)].append(node)
    now = Counter(_test_function(node) for node in after)
    present = set(after)
    count = 0
    names: list[str] = []
    unstable: list[str] = []
    for function, ids in sorted(cases.items()):
        gone = [n for n in ids if n not in present]
        short = len(ids) - now[function]
        if short > 0:
            count += short
            if len(gone) == short:
                names += gone
            else:
                names.append(f"{function} ({len(ids)} cases, now {now[function]})")
        elif gone:
            unstable.append(function)
    return LostTests(count, tuple(names), tuple(unstable))


def new_tampering(before: Measurement | None, after: Measurement | None) -> list[str]:
    """What changed a run's results in `after` and not in `before` (evidence, not findings)."""
    known = {t.what for t in before.tampering} if before is not None else set[str]()
    return [t.what for t in after.tampering if t.what not in known] if after is not None else []


def _tampered(judged: _Judged, before: Measurement | None, after: Measurement) -> None:
    """A run whose results something changed: refused as a sandbox violation, whatever it says."""
    found = [t for t in new_tampering(before, after) if t not in judged.result.evidence]
    if found:
        judged.categories.append(FailureCategory.SANDBOX_VIOLATION)
        judged.result.evidence += found


def _category(d: Diagnostic) -> FailureCategory:
    """What a new finding means."""
    if d.tool == Tool.PYTEST and d.rule in ("collection-error", "outside-import"):
        return FailureCategory.IMPORT_ERROR
    if d.tool in (Tool.RUFF, Tool.RUFF_FORMAT) and d.rule == "invalid-syntax":
        return FailureCategory.COMPILATION_ERROR
    return _TOOL_CATEGORY.get(d.tool, FailureCategory.UNKNOWN)


_PRIORITY = (
    FailureCategory.SANDBOX_VIOLATION,
    FailureCategory.COMPILATION_ERROR,
    FailureCategory.IMPORT_ERROR,
    FailureCategory.TEST_TIMEOUT,
    FailureCategory.TEST_REGRESSION,
    FailureCategory.FLAKY_TEST,
    FailureCategory.TYPE_ERROR,
    FailureCategory.LINT_ERROR,
    FailureCategory.HYGIENE_VIOLATION,
    FailureCategory.GAP_NOT_CLOSED,
    FailureCategory.AGENT_ERROR,
    FailureCategory.UNKNOWN,
)


def _open(category: FailureCategory) -> FailureCategory:
    """A gap's own failing test that still fails is no regression: the gap is not closed."""
    regression = category == FailureCategory.TEST_REGRESSION
    return FailureCategory.GAP_NOT_CLOSED if regression else category


def _reason(category: FailureCategory, evidence: Sequence[str]) -> str:
    """The refusal in one line: the first evidence, said as a gap left open where it is one."""
    prefix = "the gap's tests still fail: " if category == FailureCategory.GAP_NOT_CLOSED else ""
    return prefix + (evidence[0] if evidence else category.value)


def _not_running_category(m: Measurement) -> FailureCategory:
    """Why a tool that ran on the baseline no longer runs (a conftest that cannot be imported...)."""
    if m.timed_out:
        return FailureCategory.TEST_TIMEOUT
    if m.tool != Tool.PYTEST:
        return _TOOL_CATEGORY.get(m.tool, FailureCategory.UNKNOWN)
    if any(word in m.error for word in ("ImportError", "ModuleNotFoundError")):
        return FailureCategory.IMPORT_ERROR
    if "SyntaxError" in m.error:
        return FailureCategory.COMPILATION_ERROR
    return FailureCategory.TEST_REGRESSION


_TOOL_CATEGORY = {
    Tool.RUFF: FailureCategory.LINT_ERROR,
    Tool.RUFF_FORMAT: FailureCategory.LINT_ERROR,
    **dict.fromkeys(TYPE_TOOLS, FailureCategory.TYPE_ERROR),
    Tool.PYTEST: FailureCategory.TEST_REGRESSION,
    Tool.PY_COMPILE: FailureCategory.COMPILATION_ERROR,
    Tool.SELFCHECK: FailureCategory.IMPORT_ERROR,
}
"""What it means that a tool finds something new, or stops running, after the change."""


def describe(d: Diagnostic) -> str:
    """One line for people: where, what."""
    if d.node_id:
        return f"{d.node_id} {d.rule}: {d.exc_type + ': ' if d.exc_type else ''}{d.message}"[:300]
    where = f"{d.file}:{d.line}" if d.line else d.file
    return f"{d.tool.value} {where} {d.rule}: {d.message}"[:300]


@dataclass
class Verification:
    """The verifier's answer."""

    passed: bool
    category: FailureCategory | None = None
    reason: str = ""
    verdicts: list[CriterionVerdict] = field(default_factory=list[CriterionVerdict])
    failures: list[Diagnostic] = field(default_factory=list[Diagnostic])
    evidence: list[str] = field(default_factory=list[str])
    changed_tests: list[str] = field(default_factory=list[str])
    """Base tests the change edits that no longer pass against the base's test files: the
    change passed everything else and goes to a person (KEPT), never lands by itself."""
    uncovered: list[str] = field(default_factory=list[str])
    """Changed places no passing test ran (`path:line`), judged on the passed candidate."""


def _closed(
    plan: IterationPlan, base: Measurement | None, after: Measurements, touched: Sequence[str]
) -> tuple[bool, str, FailureCategory]:
    """Whether the plan's gap is gone from the changed tree, and the category of a gap left
    open: what happened, by cause."""
    gap, task_kind = plan.gap, plan.task_kind
    if gap.category == GapCategory.QUALITY:
        if gap.key == "pytest:run":
            pytest = after.get(Tool.PYTEST)
            if pytest and pytest.ran:
                return True, "the test suite runs", FailureCategory.TEST_REGRESSION
            category = _not_running_category(pytest) if pytest else FailureCategory.TEST_REGRESSION
            return False, "the test suite still does not run", category
        remaining = Counter(identity(d) for m in after.items for d in m.diagnostics)
        still = [d for d in gap.evidence if remaining[identity(d)] > 0]
        if still:
            more = f" (+{len(still) - 1} more)" if len(still) > 1 else ""
            category = _open(_category(still[0]))
            return False, f"still present: {describe(still[0])}{more}", category
        for d in gap.evidence:
            if d.node_id and d.rule in ("failed", "error"):
                pytest = after.get(Tool.PYTEST)
                if pytest is None or not pytest.ran or d.node_id not in pytest.collected:
                    return (
                        False,
                        f"{d.node_id} did not run in the changed tree",
                        FailureCategory.GAP_NOT_CLOSED,
                    )
        return True, "every finding of the gap is gone", FailureCategory.TEST_REGRESSION
    if not touched:
        return False, "nothing was changed", FailureCategory.AGENT_ERROR
    if task_kind == TaskKind.DOCS:
        # the guard has refused any code change (kernel/judging/taskkind.py): nothing a test could check
        return True, "a documentation change that changes no code", FailureCategory.TEST_REGRESSION
    if task_kind == TaskKind.FEATURE:
        return _feature(after.get(Tool.PYTEST), base, touched)
    return True, "the change is inside the allowlist", FailureCategory.TEST_REGRESSION


def _feature(
    pytest: Measurement | None, base: Measurement | None, touched: Sequence[str]
) -> tuple[bool, str, FailureCategory]:
    """A feature's verdict: a test of the touched test files ran, none fails, one passed."""
    test_files = {t for t in touched if is_test_path(t)}
    ran = [n for n in (pytest.collected if pytest else ()) if n.split("::")[0] in test_files]
    if not ran:
        return (
            False,
            "a feature needs at least one new or changed test, and none ran",
            FailureCategory.HYGIENE_VIOLATION,
        )
    if failed_ids(pytest) & set(ran):
        # a test in a touched file that fails is broken by the change, touched or not
        return False, "a new or changed test fails", FailureCategory.TEST_REGRESSION
    passed = set(ran) & set(pytest.passed if pytest else ())
    if not passed:
        return (
            False,
            "no new or changed test passed (skipped or xfailed tests do not count)",
            FailureCategory.HYGIENE_VIOLATION,
        )
    new = passed - set(base.collected if base else ())
    said = f"{len(new)} new test(s) pass, and {len(passed - new)} more in the touched test files"
    return True, said, FailureCategory.TEST_REGRESSION


def _python_files(args: Sequence[str], touched: Sequence[str]) -> list[str]:
    return [f for f in (args or touched) if f.endswith(".py")]


_TOOL_OF_CHECK = {
    CheckName.RUFF: Tool.RUFF,
    CheckName.RUFF_FORMAT: Tool.RUFF_FORMAT,
    **{check: Tool(check.value) for check in TYPE_CHECKS},
}
_CATEGORY_OF_CHECK = {
    CheckName.SELFCHECK: FailureCategory.IMPORT_ERROR,
    CheckName.RUFF: FailureCategory.LINT_ERROR,
    CheckName.RUFF_FORMAT: FailureCategory.LINT_ERROR,
    **dict.fromkeys(TYPE_CHECKS, FailureCategory.TYPE_ERROR),
    CheckName.PY_COMPILE: FailureCategory.COMPILATION_ERROR,
    CheckName.PYTEST: FailureCategory.TEST_REGRESSION,
    CheckName.PYTEST_ALL: FailureCategory.TEST_REGRESSION,
}
"""The category of a failed criterion (a gap-closed criterion's depends on the gap)."""


def _tool_check(
    tool: Tool, files: set[str], baseline: Measurements, after: Measurements
) -> tuple[bool, str]:
    before_m, after_m = baseline.get(tool), after.get(tool)
    if after_m is None:
        return False, f"{tool.value} was not measured"
    if not after_m.ran and before_m is not None and not before_m.ran:
        # the base's own configuration and version (the lint view): nothing the change did
        return True, f"{tool.value} could not run at the base either: {before_m.error[:200]}"
    if not after_m.ran:
        return False, f"{tool.value} could not run: {after_m.error[:200]}"
    fresh = [d for d in new_findings(before_m, after_m) if d.file in files]
    if fresh:
        return False, describe(fresh[0]) + (f" (+{len(fresh) - 1} more)" if len(fresh) > 1 else "")
    return True, f"no new {tool.value} finding in {len(files)} file(s)"


def _pytest_check(nodes: Sequence[str], pytest: Measurement | None) -> tuple[bool, str]:
    if pytest is None or not pytest.ran:
        return False, "pytest did not run" + (f": {pytest.error[:200]}" if pytest else "")
    failing = failed_ids(pytest)
    for node in nodes:
        if node not in pytest.collected:
            return False, f"{node} was not collected"
        if node in failing:
            return False, next((describe(d) for d in pytest.diagnostics if d.node_id == node), node)
        if node not in pytest.passed:
            return False, f"{node} did not pass (skipped, xfailed or xpassed)"
    return True, f"{len(nodes)} test(s) pass"


def _suite_check(
    before: Measurement | None, pytest: Measurement | None, excused: frozenset[str]
) -> tuple[bool, str]:
    if pytest is None or not pytest.ran:
        return False, "pytest did not run" + (f": {pytest.error[:200]}" if pytest else "")
    fresh = [d for d in new_findings(before, pytest) if d.node_id not in excused]
    if fresh:
        return False, describe(fresh[0])
    return True, f"{len(pytest.collected)} tests collected, no new failure"


def _compile_check(names: Sequence[str], tree: Path) -> tuple[bool, str]:
    for name in names:
        # test runs wrote in this folder: never through a link, never blocking on a FIFO
        found = readback.read(Path(name), MAX_COMPILED_BYTES, within=tree)
        if found.missing or "link" in found.problem:
            continue
        if not found.ok:
            return False, f"{name}: {found.problem}"
        try:
            compile(found.data, name, "exec", dont_inherit=True)
        except (SyntaxError, ValueError) as exc:
            return False, f"{name}: {exc}"
    return True, "touched files compile"


def check_criterion(
    criterion: AcceptanceCriterion,
    plan: IterationPlan,
    baseline: Measurements,
    after: Measurements,
    touched: Sequence[str],
    tree: Path,
    selfcheck: Callable[[], tuple[bool, str]] | None,
    excused: frozenset[str] = frozenset(),
) -> CriterionVerdict:
    """The verdict on one criterion, from measurements the kernel made itself."""
    verdict, _ = _criterion(criterion, plan, baseline, after, touched, tree, selfcheck, excused)
    return verdict


def _criterion(
    criterion: AcceptanceCriterion,
    plan: IterationPlan,
    baseline: Measurements,
    after: Measurements,
    touched: Sequence[str],
    tree: Path,
    selfcheck: Callable[[], tuple[bool, str]] | None,
    excused: frozenset[str],
) -> tuple[CriterionVerdict, FailureCategory]:
    """check_criterion's verdict, and the category of its failure."""
    check = criterion.check
    category = _CATEGORY_OF_CHECK.get(check, FailureCategory.UNKNOWN)
    if check in _TOOL_OF_CHECK:
        files = set(_python_files(criterion.args, touched))
        passed, evidence = _tool_check(_TOOL_OF_CHECK[check], files, baseline, after)
    elif check == CheckName.PYTEST:
        passed, evidence = _pytest_check(criterion.args, after.get(Tool.PYTEST))
        if failed_ids(baseline.get(Tool.PYTEST)) & set(criterion.args):
            category = _open(category)  # its tests failed at the base too: no regression
    elif check == CheckName.PYTEST_ALL:
        passed, evidence = _suite_check(baseline.get(Tool.PYTEST), after.get(Tool.PYTEST), excused)
    elif check == CheckName.PY_COMPILE:
        passed, evidence = _compile_check(_python_files(criterion.args, touched), tree)
    elif check == CheckName.SELFCHECK:
        passed, evidence = (
            (False, "the boot self-check is not available for this target")
            if selfcheck is None
            else selfcheck()
        )
    else:
        passed, evidence, category = _closed(plan, baseline.get(Tool.PYTEST), after, touched)
    verdict = CriterionVerdict(
        check=check, args=criterion.args, text=criterion.text, passed=passed, evidence=evidence
    )
    return verdict, category


@dataclass
class _Judged:
    """What verification found so far: categories, evidence, and notes said last."""

    result: Verification = field(default_factory=lambda: Verification(passed=True))
    categories: list[FailureCategory] = field(default_factory=list[FailureCategory])
    notes: list[str] = field(default_factory=list[str])
    """Said after everything else, so a note never becomes the reason."""
    excused: set[str] = field(default_factory=set[str])
    """Flaky or pre-existing tests: judged by the re-run, not a second time as regressions."""
    flaky: set[str] = field(default_factory=set[str])
    """Tests that failed in the suite and passed in the same suite run again (FLAKY_TEST)."""
    changed: list[str] = field(default_factory=list[str])
    """Base tests the change edits that no longer pass against the base's test files."""


def _rerun_suspects(
    judged: _Judged, fresh: list[Diagnostic], rerun: Rerun, gap: frozenset[str]
) -> list[Diagnostic]:
    """New test failures, and the gap's tests that failed, judged like for like: the same
    run order again on the same tree decides flakiness (it passes now: FLAKY_TEST), and on
    the base whether a new failure is the change's (it fails there too: pre-existing).

    A test run alone decides nothing here: one that leans on an earlier test's leftovers
    fails alone on the base too, and passed there in the suite.
    """
    failed = {d.node_id for d in fresh if d.rule in ("failed", "error") and d.node_id}
    suspects = sorted(failed | gap)
    if not suspects:
        return fresh
    again, on_base = rerun(suspects)
    flaky = {n for n in suspects if n not in again}
    earlier = {n for n in failed if n in again and n in on_base}
    judged.excused |= flaky | earlier  # judged here: not a second time as regressions
    judged.flaky |= flaky
    if flaky:
        judged.categories.append(FailureCategory.FLAKY_TEST)
        judged.result.evidence += [
            f"flaky: {n} (failed in the whole suite, then passed in it on the same tree)"
            for n in sorted(flaky)
        ]
    judged.notes += [
        f"pre-existing: {n} fails in the base's whole suite too, run the same way"
        for n in sorted(earlier)
    ]
    return [d for d in fresh if d.node_id not in flaky | earlier]


def _lost(
    judged: _Judged, before: Measurement, after: Measurement, renamed: frozenset[str]
) -> None:
    """Tests collected on the baseline that are gone after the change (not those renamed
    with their bodies kept: their old names still pass against the base's own test files)."""
    kept = [n for n in before.collected if _test_function(n) not in renamed]
    lost = lost_tests(kept, after.collected)
    if lost.count:
        judged.categories.append(FailureCategory.HYGIENE_VIOLATION)
        judged.result.evidence.append(
            f"{lost.count} test(s) collected on the baseline are gone: " + ", ".join(lost.names[:5])
        )
    if lost.unstable:
        judged.notes.append(
            "test ids that change between runs, compared by their number of cases: "
            + ", ".join(lost.unstable[:5])
            + (f" (+{len(lost.unstable) - 5} more)" if len(lost.unstable) > 5 else "")
        )


def _ratchet(
    judged: _Judged,
    baseline: Measurements,
    after: Measurements,
    rerun: Rerun | None,
    base_run: BaseRun | None = None,
) -> None:
    """Nothing that ran stops running, nothing new is found, no test is lost (the base run's
    gap and renamed tests aside)."""
    result = judged.result
    gap, renamed = (base_run.gap, base_run.renamed) if base_run else ((), frozenset[str]())
    for m in after.items:
        before = baseline.get(m.tool)
        if before is not None and before.ran and not m.ran:
            judged.categories.append(_not_running_category(m))
            result.evidence.append(
                f"{m.tool.value} ran on the baseline but not after the change: {m.error[:300]}"
            )
        fresh = new_findings(before, m)
        if m.tool == Tool.PYTEST:
            _tampered(judged, before, m)
        if m.tool == Tool.PYTEST and rerun is not None and m.ran:
            failing = frozenset(n for n in gap if n in failed_ids(m))
            fresh = _rerun_suspects(judged, fresh, rerun, failing)
        for d in fresh:
            judged.categories.append(_category(d))
            result.failures.append(d)
            result.evidence.append(describe(d))
        if m.tool == Tool.PYTEST and before is not None and before.ran and m.ran:
            _lost(judged, before, m, renamed)


def lost_passes(before: Sequence[str], after: Sequence[str]) -> list[str]:
    """Tests that passed before and do not pass after, counted per test function (so ids
    that change between runs are compared by their number of passing cases)."""
    cases: defaultdict[str, list[str]] = defaultdict(list)
    for node in before:
        cases[_test_function(node)].append(node)
    now = Counter(_test_function(node) for node in after)
    present = set(after)
    lost: list[str] = []
    for function, ids in sorted(cases.items()):
        short = len(ids) - now[function]
        if short <= 0:
            continue
        gone = [n for n in ids if n not in present]
        lost += (
            gone if len(gone) == short else [f"{function} ({len(ids)} passed, now {now[function]})"]
        )
    return lost


@dataclass(frozen=True)
class BaseRun:
    """The candidate's code run against the base's own test files (same selection, same order)."""

    measurement: Measurement
    gap: tuple[str, ...] = ()
    """The gap's failing tests (the kernel's gap): each must pass here."""
    edited: frozenset[str] = frozenset()
    """Base test files the candidate changed: their lost tests go to a person (KEPT)."""
    renamed: frozenset[str] = frozenset()
    """Base test functions the change renamed, their bodies kept: not lost (hygiene.renamed)."""
    doctests: frozenset[str] = frozenset()
    """The base's doctests whose docstring the change edited: changed tests, for a person."""


def _how(node: str, m: Measurement) -> str:
    if node in failed_ids(m):
        return "failed"
    if node in m.collected:
        return "was skipped, xfailed or xpassed"
    return "was not collected"


def _base_tests(judged: _Judged, before: Measurement | None, run: BaseRun) -> None:
    """The gap's tests pass, and every test that passed at the base still passes, against
    the base's own test files; only a "passed" outcome counts."""
    m, result = run.measurement, judged.result
    _tampered(judged, before, m)
    if not m.ran:
        if before is not None and before.ran:
            judged.categories.append(_not_running_category(m))
            result.evidence.append(f"the base's tests did not run on the change: {m.error[:300]}")
        return
    said = judged.excused | {d.node_id for d in result.failures if d.node_id}
    passed = set(m.passed)
    for node in run.gap:
        if node not in passed and node not in judged.excused:
            judged.categories.append(FailureCategory.GAP_NOT_CLOSED)
            result.evidence.append(
                f"{node}: the gap's test {_how(node, m)} against the base's own test files"
            )
    passed_before = before.passed if before is not None else ()
    judged.changed += [n for n in passed_before if n in run.doctests]
    for node in lost_passes(passed_before, m.passed):
        if node in said or node in run.gap or node in run.doctests:
            continue
        if node.split("::")[0].split(" ")[0] in run.edited:
            judged.changed.append(node)
            continue
        judged.categories.append(FailureCategory.TEST_REGRESSION)
        result.evidence.append(
            f"{node} passed at the base and {_how(node, m)} against the base's own test files"
        )


def verify(
    plan: IterationPlan,
    baseline: Measurements,
    after: Measurements,
    touched: Sequence[str],
    tree: Path,
    rerun: Rerun | None = None,
    selfcheck: Callable[[], tuple[bool, str]] | None = None,
    base_run: BaseRun | None = None,
) -> Verification:
    """The ratchet, the base's own tests on the change, then every criterion; the first
    failing category decides."""
    # what a suppression comment hides counts: a new noqa is the very finding it hides
    baseline, after = unsuppressed(baseline), unsuppressed(after)
    judged = _Judged()
    result = judged.result
    _ratchet(judged, baseline, after, rerun, base_run)
    if base_run is not None:
        _base_tests(judged, baseline.get(Tool.PYTEST), base_run)
    for criterion in plan.criteria:
        judged_on = after
        if base_run is not None and criterion.check == CheckName.PYTEST:
            judged_on = _per_node(after, base_run.measurement, criterion.args)
        verdict, category = _criterion(
            criterion,
            plan,
            baseline,
            judged_on,
            touched,
            tree,
            selfcheck,
            frozenset(judged.excused),
        )
        result.verdicts.append(verdict)
        if not verdict.passed and judged.flaky & _tests_of(criterion, plan):
            category = FailureCategory.FLAKY_TEST  # they passed when the same suite ran again
        if not verdict.passed:
            result.evidence.append(
                f"criterion failed: {criterion.text or criterion.check.value}: {verdict.evidence}"
            )
            judged.categories.append(category)
    if judged.changed:
        judged.notes.append(
            "base tests the change edits no longer pass against the base's own test files: "
            + ", ".join(judged.changed[:10])
        )
    jump = skip_jump(baseline.get(Tool.PYTEST), after.get(Tool.PYTEST))
    result.evidence += [*judged.notes, *([jump] if jump else [])]
    if judged.categories:
        result.passed = False
        result.category = next(c for c in _PRIORITY if c in judged.categories)
        result.reason = _reason(result.category, result.evidence)
    elif judged.changed:
        result.changed_tests = list(judged.changed)
        result.reason = (
            f"verified, except {len(judged.changed)} base test(s) the change edits; "
            "a person approves the behaviour change"
        )
    else:
        result.reason = "every criterion passed and nothing new broke"
    return result


def _tests_of(criterion: AcceptanceCriterion, plan: IterationPlan) -> set[str]:
    """The tests a criterion is about (a gap-closed criterion: the gap's failing tests)."""
    if criterion.check == CheckName.PYTEST:
        return set(criterion.args)
    if criterion.check == CheckName.GAP_CLOSED:
        return {d.node_id for d in plan.gap.evidence if d.node_id}
    return set()


def _per_node(after: Measurements, base: Measurement, nodes: Sequence[str]) -> Measurements:
    """The run a PYTEST criterion is judged on: the base's own test files where they hold its
    tests, the candidate's own run only for tests that are new."""
    own = after.get(Tool.PYTEST)
    if own is not None and any(n not in base.collected for n in nodes):
        return after  # a new test (an inbox task's acceptance) is judged in its own tree
    return Measurements(items=(*(m for m in after.items if m.tool != Tool.PYTEST), base))


def gap_tests_first(
    plan: IterationPlan, first: Measurement, base: Measurement | None
) -> Verification | None:
    """A refusal from the gap's own tests alone, run before anything else (None: they pass,
    or could not tell, and the full verification decides). A candidate whose gap tests still
    fail is refused in the time those tests take, not the whole suite's: GAP_NOT_CLOSED, or
    TEST_REGRESSION where one fails that did not fail at the base (only those are new problems)."""
    criteria = [c for c in plan.criteria if c.check == CheckName.PYTEST and c.args]
    if not criteria or not first.ran:
        return None
    if any(n not in first.collected for c in criteria for n in c.args):
        return None  # a test gone is the full verification's to judge (HYGIENE_VIOLATION)
    after = Measurements(items=(first,))
    result = Verification(passed=True)
    for criterion in criteria:
        verdict = check_criterion(criterion, plan, Measurements(), after, (), Path("."), None)
        if verdict.passed:
            continue
        result.verdicts.append(verdict)
        result.evidence.append(
            f"criterion failed: {criterion.text or criterion.check.value}: {verdict.evidence}"
        )
    if not result.verdicts:
        return None
    failing = {n for c in criteria for n in c.args} & failed_ids(first) - failed_ids(base)
    result.failures = [d for d in first.diagnostics if d.node_id in failing]
    result.passed = False
    result.category = FailureCategory.TEST_REGRESSION if failing else FailureCategory.GAP_NOT_CLOSED
    result.reason = _reason(result.category, result.evidence)
    result.evidence.append("judged on the gap's own tests first: the whole suite did not run")
    return result


def first_suspects(first: Measurement, baseline: Measurement | None) -> list[str]:
    """Tests that failed in the first pass and not in the baseline's run (to be confirmed)."""
    if not first.ran:
        return []
    return sorted(failed_ids(first) - failed_ids(baseline))


def affected_first(
    first: Measurement, suspects: Sequence[str], on_base: Measurement, again: Measurement
) -> Verification | None:
    """A refusal from the affected tests alone (None: the whole suite decides).

    A suspect counts only when it failed again on the candidate run alone, and passed on the
    baseline run the same way: a test that fails when run apart from the rest of the suite
    (it leans on another test's leftovers) fails on the baseline too and is not refused here.
    """
    if not on_base.ran or not again.ran:
        return None
    confirmed = [
        n
        for n in suspects
        if n in failed_ids(again) and n in on_base.collected and n not in failed_ids(on_base)
    ]
    if not confirmed:
        return None
    failures = [d for d in first.diagnostics if d.node_id in set(confirmed)]
    evidence = [describe(d) for d in failures]
    evidence.append(
        f"judged on the {len(first.collected)} affected test(s) first: {len(confirmed)} failed "
        "again on the candidate alone and passed on the baseline alone; the whole suite did not run"
    )
    return Verification(
        passed=False,
        category=FailureCategory.TEST_REGRESSION,
        reason=evidence[0],
        failures=failures,
        evidence=evidence,
    )
