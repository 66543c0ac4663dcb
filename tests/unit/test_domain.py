"""Every domain model survives a JSON round trip; facts are immutable; domain stays declarative."""

from __future__ import annotations

import ast
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError

import domain
from domain import (
    AcceptanceCriterion,
    ActionType,
    AgentReport,
    AnalysisInput,
    AttemptNote,
    CheckName,
    CriterionVerdict,
    DaemonStatus,
    Diagnostic,
    DiffStat,
    Event,
    FailureCategory,
    Gap,
    GapCategory,
    GapReport,
    HaltNote,
    HistoryDigest,
    HistoryRow,
    HistoryTotals,
    InboxItem,
    IterationOutcome,
    IterationPlan,
    IterationRecord,
    Measurement,
    Measurements,
    OutcomeTally,
    PlannedAction,
    Priority,
    ProjectState,
    RankedGap,
    Risk,
    RoadmapItem,
    RunResult,
    RunSpec,
    Severity,
    TaskKind,
    Tool,
    gap_ref,
)

NOW = datetime(2026, 11, 22, 12, 30, 5, tzinfo=UTC)


def _gap() -> Gap:
    diag = Diagnostic(
        tool=Tool.PYTEST,
        file="tests/test_a.py",
        rule="failed",
        node_id="tests/test_a.py::test_x[1-2]",
        message="assert 1 == 2",
        exc_type="AssertionError",
        frame_file="a.py",
        frame_line=3,
        detail="E assert",
    )
    item = InboxItem(
        name="task.md",
        title="Do it",
        body="body",
        priority=Priority.HIGH,
        acceptance=("pytest tests/test_a.py",),
        allowed=("a.py",),
        forbidden=("b.py",),
        received_at=NOW,
        sha256="ab",
    )
    return Gap(
        key="pytest:tests/test_a.py::test_x[1-2]",
        category=GapCategory.QUALITY,
        source="pytest",
        severity=Severity.CRITICAL,
        title="t",
        description="d",
        files=("a.py",),
        evidence=(diag,),
        inbox=item,
        roadmap=RoadmapItem(text="x", line=3, headings=("A", "B")),
        rank_reason="#1",
    )


def _plan() -> IterationPlan:
    return IterationPlan(
        iteration_id="iter-0042-20261122-123005",
        created_at=NOW,
        gap=_gap(),
        task_kind=TaskKind.FIX_TEST,
        goal="fix",
        actions=(
            PlannedAction(
                action_type=ActionType.MODIFY, target_files=("a.py",), description="fix it"
            ),
        ),
        criteria=(
            AcceptanceCriterion(
                check=CheckName.PYTEST, args=("tests/test_a.py::test_x[1-2]",), text="passes"
            ),
        ),
        estimated_risk=Risk.MEDIUM,
        allowed_paths=("a.py", "tests/**"),
        history=(
            AttemptNote(
                iteration_id="iter-0041-20261122-120000",
                outcome=IterationOutcome.ROLLBACK,
                failure_category=FailureCategory.TEST_REGRESSION,
                failing_tests=("t",),
                reason="r",
            ),
        ),
        phases=("reproduce", "patch"),
        context=("ctx",),
        notes=("n",),
        route="ruff-fix",
    )


def _record() -> IterationRecord:
    plan = _plan()
    return IterationRecord(
        iteration_id=plan.iteration_id,
        started_at=NOW,
        ended_at=NOW,
        gap=gap_ref(plan.gap),
        outcome=IterationOutcome.ROLLBACK,
        failure_category=FailureCategory.TEST_REGRESSION,
        reason="r",
        evidence=("e",),
        failures=plan.gap.evidence,
        verdicts=(CriterionVerdict(check=CheckName.PYTEST, passed=False, evidence="x"),),
        touched_files=("a.py",),
        diff=DiffStat(files=1, insertions=2, deletions=3, new_files=0),
        base="abc",
        commit=None,
        kept_branch=None,
        backend="command",
        agent_version="1.0",
        agent_summary="s",
        agent_exit_code=0,
        tokens_used=10,
        cost_usd=0.5,
        durations={"execute": 1.5},
        checkout_changes=("notes.txt",),
        task_kind="fix_test",
        plan=plan,
    )


SAMPLES: list[BaseModel] = [
    _gap(),
    GapReport(gaps=(_gap(),), tree="t", errors=("e",), skipped=("k",)),
    _plan(),
    _record(),
    Event(at=NOW, kind="halt", message="m", data={"a": 1}),
    Measurements(
        tree="t",
        items=(
            Measurement(
                tool=Tool.RUFF,
                ran=True,
                exit_code=1,
                diagnostics=(_gap().evidence[0],),
                collected=("x",),
            ),
        ),
    ),
    ProjectState(
        now=NOW,
        next_sequence=7,
        tallies=(
            OutcomeTally(task_kind="fix_test", fingerprint="f", day="2026-11-22", successes=1),
        ),
    ),
    AnalysisInput(measurements=Measurements(), now=NOW, roadmap="- [ ] a"),
    RunSpec(argv=("a", "{prompt_file}"), env={"X": "1"}, prompt="p"),
    RunResult(exit_code=None, timed_out=True),
    AgentReport(success=False, failure_category=FailureCategory.AGENT_ERROR, tokens_used=3),
    _record().model_copy(
        update={
            "ranking": (RankedGap(**gap_ref(_gap()).model_dump(), rank=2, skipped="waiting"),),
            "open_gaps": {"pytest": 3, "roadmap": 1},
        }
    ),
    HistoryDigest(
        generated_at=NOW,
        root_name="r",
        rows=(
            HistoryRow(
                iteration_id="iter-0042-20261122-123005",
                started_at=NOW,
                ended_at=NOW,
                outcome=IterationOutcome.ROLLBACK,
                failure_category=FailureCategory.LINT_ERROR,
                durations={"verify": 1.5},
                open_gaps={"ruff": 2},
            ),
        ),
        totals=HistoryTotals(iterations=1, by_outcome={"ROLLBACK": 1}, day="2026-11-22"),
        halt=HaltNote(halted=True, reason="r", since=NOW),
        quarantined=("k",),
    ),
    DaemonStatus(
        root="/r",
        running=True,
        pid=3,
        phase="idle",
        top_gaps=(RankedGap(**gap_ref(_gap()).model_dump(), rank=1, severity=Severity.HIGH),),
        open_gaps={"pytest": 1},
    ),
]


@pytest.mark.parametrize("model", SAMPLES, ids=lambda m: type(m).__name__)
def test_json_round_trip(model: BaseModel) -> None:
    text = model.model_dump_json()
    again = type(model).model_validate_json(text)
    assert again == model
    assert again.model_dump_json() == text


def test_facts_are_immutable_and_strict() -> None:
    record = _record()
    with pytest.raises(ValidationError):
        record.outcome = IterationOutcome.SUCCESS  # type: ignore[misc]
    with pytest.raises(ValidationError):
        Gap.model_validate({**_gap().model_dump(), "surprise": 1})


def test_iteration_id_format_is_enforced() -> None:
    data = _plan().model_dump()
    for bad in ("iter-42-20261122-123005", "iter-0042-2026112-123005", "0042-20261122-123005"):
        with pytest.raises(ValidationError):
            IterationPlan.model_validate({**data, "iteration_id": bad})
    assert IterationPlan.model_validate({**data, "iteration_id": "iter-12345-20261122-123005"})


def test_a_records_checkout_is_one_folder_name_the_loop_makes_or_none() -> None:
    # a replay makes its checkout under this name in the kernel's folder of them
    data = _record().model_dump()
    for bad in ("../wt-1-2", "wt-1-2/..", "/tmp/x", "wt-1-2\n", "x", ".."):
        with pytest.raises(ValidationError):
            IterationRecord.model_validate({**data, "checkout": bad})
    made = IterationRecord.model_validate({**data, "checkout": "wt-4242-20261127162442123456"})
    assert made.checkout == "wt-4242-20261127162442123456"
    assert IterationRecord.model_validate(data).checkout == ""  # a record from before it


def test_most_critical_is_the_first_ranked_gap() -> None:
    assert GapReport().most_critical is None
    assert GapReport(gaps=(_gap(),)).most_critical == _gap()


_ALLOWED_IMPORTS = {"__future__", "typing", "enum", "datetime", "pathlib", "pydantic", "domain"}
_DECLARATIVE_CALLS = {"Field", "ConfigDict"}
_DECORATORS = {"property", "staticmethod", "classmethod"}
_NEVER = {"open", "exec", "eval", "compile", "__import__", "breakpoint", "input", "globals"}


def _type_expression(node: ast.expr) -> bool:
    """What an annotation may be (pydantic evaluates a model's annotations at import)."""
    if isinstance(node, ast.Constant):
        if isinstance(node.value, str):  # an annotation written as a string: its expression
            try:
                return _type_expression(ast.parse(node.value, mode="eval").body)
            except SyntaxError:
                return True  # a plain string (Literal["x"]): no code
        return True
    if isinstance(node, ast.Name):
        return True
    if isinstance(node, ast.Attribute):
        return _type_expression(node.value)
    if isinstance(node, ast.Subscript):
        return _type_expression(node.value) and _type_expression(node.slice)
    if isinstance(node, ast.Tuple | ast.List):
        return all(_type_expression(e) for e in node.elts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _type_expression(node.left) and _type_expression(node.right)
    return False


def _value(node: ast.expr) -> bool:
    """What a constant, a field's default or an argument's default may be: no call but
    Field/ConfigDict, a lambda whose body calls nothing."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.Call):
        return (
            isinstance(node.func, ast.Name)
            and node.func.id in _DECLARATIVE_CALLS
            and all(_value(a) for a in node.args)
            and all(_value(k.value) for k in node.keywords)
        )
    if isinstance(node, ast.Lambda):
        return not any(isinstance(n, ast.Call) for n in ast.walk(node.body))
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return all(_value(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(_value(v) for v in (*node.keys, *node.values) if v is not None)
    if isinstance(node, ast.UnaryOp):
        return _value(node.operand)
    if isinstance(node, ast.BinOp):
        return _value(node.left) and _value(node.right)
    return _type_expression(node)


def _function(node: ast.FunctionDef, where: str) -> list[str]:
    found = [
        f"{where}: decorator {ast.unparse(d)}"
        for d in node.decorator_list
        if not (isinstance(d, ast.Name) and d.id in _DECORATORS)
    ]
    args = node.args
    defaults = [*args.defaults, *(d for d in args.kw_defaults if d is not None)]
    found += [f"{where}: default {ast.unparse(d)}" for d in defaults if not _value(d)]
    notes = [a.annotation for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
    notes += [args.vararg.annotation if args.vararg else None, node.returns]
    found += [f"{where}: annotation" for n in notes if n is not None and not _type_expression(n)]
    return found


def _body(body: list[ast.stmt], path: str, module: bool) -> list[str]:
    """What runs at import in a module's or a class's body beyond the declarative rule."""
    found: list[str] = []
    for node in body:
        where = f"{path}:{node.lineno}"
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # a docstring
        if isinstance(node, ast.Pass) and not module:
            continue
        if module and isinstance(node, ast.Import):
            found += [
                f"{where}: imports {a.name}"
                for a in node.names
                if a.name.split(".")[0] not in _ALLOWED_IMPORTS
            ]
        elif module and isinstance(node, ast.ImportFrom):
            if node.level == 0 and (node.module or "").split(".")[0] not in _ALLOWED_IMPORTS:
                found.append(f"{where}: imports {node.module}")
        elif isinstance(node, ast.ClassDef):
            if node.decorator_list or node.keywords:
                found.append(f"{where}: class decorators or keywords")
            if not all(isinstance(b, ast.Name | ast.Attribute) for b in node.bases):
                found.append(f"{where}: class bases")
            found += _body(node.body, path, module=False)
        elif isinstance(node, ast.FunctionDef):
            found += _function(node, where)
        elif isinstance(node, ast.AnnAssign):
            if not _type_expression(node.annotation):
                found.append(f"{where}: annotation {ast.unparse(node.annotation)}")
            if node.value is not None and not _value(node.value):
                found.append(f"{where}: runs {ast.unparse(node.value)[:80]}")
        elif isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets):
            if not _value(node.value):
                found.append(f"{where}: runs {ast.unparse(node.value)[:80]}")
        else:
            found.append(f"{where}: a {type(node).__name__} statement runs at import")
    return found


def undeclarative(path: str, text: str) -> list[str]:
    """Everything in a domain file beyond DESIGN's rule: imports only of __future__, typing,
    enum, datetime, pathlib, pydantic and domain; only classes, functions and constants, no
    call at import but Field and ConfigDict; no builtin that does I/O or runs code, anywhere."""
    tree = ast.parse(text)
    found = _body(tree.body, path, module=True)
    found += [
        f"{path}:{n.lineno}: {n.id}"
        for n in ast.walk(tree)
        if isinstance(n, ast.Name) and n.id in _NEVER and isinstance(n.ctx, ast.Load)
    ]
    found += [
        f"{path}:{n.lineno}: .{n.attr}"
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute) and n.attr.startswith("__") and n.attr.endswith("__")
    ]
    return found


def test_domain_is_declarative() -> None:
    root = Path(domain.__file__).parent
    files = sorted(root.rglob("*.py"))
    assert len(files) > 10
    found = [f for p in files for f in undeclarative(str(p.relative_to(root)), p.read_text())]
    assert found == []


@pytest.mark.parametrize(
    "text",
    [
        "import os\n",
        "from subprocess import run\n",
        "print('x')\n",
        "try:\n    _evil()\nfinally:\n    pass\n",
        "if True:\n    x = 1\n",
        "X = _evil()\n",
        "class A(Base):\n    x: int = Field(default=_evil())\n",
        "class A(make_base()):\n    pass\n",
        "@register\nclass A:\n    pass\n",
        "class A:\n    _evil()\n",
        'class A:\n    x: \'int | __import__("os").system("id")\'\n',
        "def f(x=_evil()):\n    pass\n",
        "@cache(maxsize=1)\ndef f():\n    pass\n",
        "def f():\n    return open('/etc/passwd').read()\n",
        "def f(x):\n    return x.__class__.__subclasses__()\n",
        "class A:\n    f = Field(exclude_if=lambda v: _evil(v))\n",
    ],
)
def test_the_declarative_rule_refuses_code_that_runs(text: str) -> None:
    assert undeclarative("domain/x.py", text), text
