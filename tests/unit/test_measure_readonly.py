"""Measuring never writes: a target whose configuration asks its tools to write stays as it was."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from domain import Measurement, Tool
from kernel.measuring.gate import Gate, freeze_gate
from kernel.measuring.measure import measure, run_pyright, run_ruff, run_ruff_format
from tests.planted import OLD_STYLE, WRITING, target_for
from tests.support import make_repo, snapshot


def _rules(m: Measurement | None, file: str) -> set[str]:
    assert m is not None and m.ran, m
    return {d.rule for d in m.diagnostics if d.file == file}


def test_measuring_a_target_that_asks_its_tools_to_write_leaves_it_byte_identical(
    tmp_path: Path,
) -> None:
    root = make_repo(tmp_path / "repo", WRITING)
    before = snapshot(root)
    target = target_for(root, strict=())
    gate = freeze_gate(root, tmp_path / "gate", target.quality)
    found = measure(root, target, gate, tmp_path / "work")
    assert snapshot(root) == before  # nothing fixed, cached, compiled or left behind
    assert {"F401", "UP006", "UP045"} <= _rules(found.get(Tool.RUFF), "old.py")
    assert _rules(found.get(Tool.RUFF_FORMAT), "old.py") == {"unformatted"}
    pytest_m = found.get(Tool.PYTEST)
    assert pytest_m is not None and pytest_m.ran
    assert pytest_m.collected == ("tests/test_old.py::test_total",)
    assert _rules(found.get(Tool.PYRIGHT), "typed.py") == {"reportAssignmentType"}
    # the gate keeps the project's own files whole: the kernel's flags override what writes
    assert gate.ruff_dir is not None
    assert "fix = true" in (gate.ruff_dir / "pyproject.toml").read_text(encoding="utf-8")


def test_a_ruff_toml_that_asks_to_write_is_judged_by_its_rules_and_writes_nothing(
    tmp_path: Path,
) -> None:
    own = 'fix = true\nfix-only = true\ncache-dir = "c"\nline-length = 70\n[lint]\nselect = ["F"]\n'
    root = make_repo(tmp_path / "repo", {".ruff.toml": own, "a.py": "import os\n"})
    before = snapshot(root)
    gate = freeze_gate(root, tmp_path / "gate", target_for(root).quality)
    m = run_ruff(root, gate, 60)
    assert [d.rule for d in m.diagnostics] == ["F401"] and snapshot(root) == before
    assert not (root / "c").exists()


def test_the_pinned_flags_hold_when_the_gate_itself_asks_ruff_to_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a gate that kept every write setting (an `extend`ed file could carry them): flags win
    gate_dir = tmp_path / "gate"
    gate_dir.mkdir()
    (gate_dir / "pyproject.toml").write_text(
        '[tool.ruff]\nfix = true\nfix-only = true\nunsafe-fixes = true\ncache-dir = "rc"\n'
        'output-format = "grouped"\n[tool.ruff.lint]\nselect = ["UP", "F401"]\n'
        '[tool.ruff.format]\nquote-style = "single"\n',
        encoding="utf-8",
    )
    gate = Gate(ruff_config=gate_dir / "pyproject.toml")
    root = make_repo(tmp_path / "repo", {"old.py": OLD_STYLE})
    before = snapshot(root)
    # the daemon's own environment must not redirect ruff's report either
    monkeypatch.setenv("RUFF_OUTPUT_FILE", str(tmp_path / "elsewhere.json"))
    monkeypatch.setenv("RUFF_CACHE_DIR", str(root / ".cache"))
    ruff_m = run_ruff(root, gate, 120)
    format_m = run_ruff_format(root, gate, 120)
    some = run_ruff(root, gate, 120, ["old.py"])
    assert snapshot(root) == before
    assert {"F401", "UP006", "UP045"} <= _rules(ruff_m, "old.py") == _rules(some, "old.py")
    assert _rules(format_m, "old.py") == {"unformatted"}
    assert not (tmp_path / "elsewhere.json").exists() and not (gate_dir / "rc").exists()


LAYOUT: dict[str, str] = {
    "src/pkg/__init__.py": "",
    "src/pkg/mod.py": "from pkg.other import VALUE\n\nx: int = VALUE\n",
    "src/pkg/other.py": 'VALUE: str = "a"\n',
    "app.py": 'thing = "s"\n',
    "lib2/helper.py": "def helper() -> int:\n    return 1\n",
    "tests/test_app.py": (
        "import foo\nfrom app import thing\n\ny: str = foo.bar()\nz: int = thing\n"
    ),
    "tests/test_helper.py": "from helper import helper\n\nw: str = helper()\n",
    "typings/foo/__init__.pyi": "def bar() -> int: ...\n",
    "strictpkg/__init__.py": "",
    "strictpkg/loose.py": "def ident(x):\n    return x\n",
    "hidden/.secret/bad.py": 'x: int = "bad"\n',
    "node_modules/x/bad.py": 'x: int = "bad"\n',
    "skipped/bad.py": 'x: int = "bad"\n',
}
"""What pyright derives from its project root: src/ on the path, typings/ stubs, default
excludes, imports from the root, strict paths; and one error per file that is checked."""


def _in_tree(tree: Path, config: dict[str, Any]) -> set[tuple[str, int, str]]:
    """What pyright reports with the config written inside the tree: the reference."""
    copy = tree.parent / f"{tree.name}-copy"
    shutil.copytree(tree, copy)
    (copy / "pyrightconfig.json").write_text(json.dumps(config), encoding="utf-8")
    argv = [sys.executable, "-m", "pyright", "--outputjson", "--pythonpath", sys.executable]
    done = subprocess.run(argv, cwd=copy, capture_output=True, text=True, check=False)
    data = json.loads(done.stdout)
    return {
        (
            Path(d["file"]).relative_to(copy.resolve()).as_posix(),
            d["range"]["start"]["line"] + 1,
            d.get("rule", "syntax"),
        )
        for d in data["generalDiagnostics"]
        if d["severity"] == "error"
    }


@pytest.mark.parametrize(
    "config",
    [
        {},
        {"include": ["src", "tests", "strictpkg"], "exclude": ["skipped"]},
        {"extraPaths": ["lib2"], "stubPath": "typings"},
        {"executionEnvironments": [{"root": "tests", "extraPaths": ["lib2"]}]},
        {"include": ["/nowhere"]},  # pyright ignores an absolute include: the whole project
    ],
    ids=["defaults", "include-exclude", "extra-paths", "environments", "absolute-include"],
)
def test_pyright_outside_the_tree_reports_what_it_reports_inside(
    tmp_path: Path, config: dict[str, Any]
) -> None:
    root = make_repo(tmp_path / "repo", LAYOUT)
    before = snapshot(root)
    strict = ("strictpkg",)
    target = target_for(root, strict=strict)
    gate = Gate(ruff_config=tmp_path / "unused.toml", pyright_config=config)
    found = run_pyright(root, gate, target, 300)
    assert snapshot(root) == before
    assert found.ran, found.error
    got = {(d.file, d.line, d.rule) for d in found.diagnostics}
    want = _in_tree(root, {**config, "strict": list(strict)})
    assert got == want
    some = run_pyright(root, gate, target, 300, ["tests/test_app.py"])  # an incremental run
    assert {(d.file, d.line, d.rule) for d in some.diagnostics} == {
        x for x in got if x[0] == "tests/test_app.py"
    }
    assert ("src/pkg/mod.py", 3, "reportAssignmentType") in got  # pkg found through src/
    assert ("tests/test_app.py", 4, "reportAssignmentType") in got  # foo found in typings/
    assert not [f for f, _, _ in got if f.startswith(("hidden/", "node_modules/"))]
