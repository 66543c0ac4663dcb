"""ruff as the project runs it: its own configuration in place, every setting it implies."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from kernel.config import QualityConfig
from kernel.measuring.gate import freeze_gate, freeze_gate_at, pyright_config
from kernel.measuring.measure import ruff_binary, run_pyright, run_ruff
from tests.planted import target_for
from tests.support import git, make_repo

OLD_TYPING = (
    "import sys\nfrom typing import Dict, Iterable\n\n"
    "if sys.version_info >= (3, 8):\n    x: Dict[str, int] = {}\n\n\n"
    "def f(a: Iterable[int]) -> int:\n    return sum(a)\n"
)


def _own(tree: Path) -> list[tuple[str, int, str]]:
    """What the project's own `ruff check` prints for the tree (same ruff)."""
    out = subprocess.run(
        [ruff_binary(), "check", "--no-cache", "--output-format", "json", "."],
        cwd=tree,
        capture_output=True,
        text=True,
        check=False,
    )
    found = [
        (str(Path(d["filename"]).relative_to(tree)), d["location"]["row"], d["code"])
        for d in json.loads(out.stdout)
    ]
    return sorted(found)


def _seed(tree: Path, gate_dir: Path) -> list[tuple[str, int, str]]:
    m = run_ruff(tree, freeze_gate(tree, gate_dir, QualityConfig()), 60)
    assert m.ran, m.error
    return sorted((d.file, d.line, d.rule) for d in m.diagnostics)


def test_requires_python_in_project_reaches_ruff(tmp_path: Path) -> None:
    tree = make_repo(
        tmp_path / "repo",
        {
            "pyproject.toml": '[project]\nname = "x"\nrequires-python = ">=3.7"\n\n'
            '[tool.ruff.lint]\nselect = ["UP"]\n',
            "a.py": OLD_TYPING,
        },
    )
    found = _seed(tree, tmp_path / "gate")
    assert not [f for f in found if f[2] in ("UP035", "UP036")], found
    assert found == _own(tree)


def test_extend_nested_configs_and_per_file_ignores_are_the_projects(tmp_path: Path) -> None:
    tree = make_repo(
        tmp_path / "repo",
        {
            "pyproject.toml": '[project]\nname = "x"\nrequires-python = ">=3.9"\n\n'
            '[tool.ruff]\nextend = "configs/base.toml"\n\n'
            '[tool.ruff.lint.per-file-ignores]\n"scripts/*" = ["F401"]\n',
            "configs/base.toml": '[lint]\nselect = ["F", "E711"]\n',
            "a.py": "import os\nx = None\nprint(x == None)\n",
            "scripts/run.py": "import os\n",
            # a nested config: its own rules for its folder, extending a file in its parent
            "legacy/ruff.toml": 'extend = "../configs/base.toml"\n[lint]\nignore = ["F401"]\n',
            "legacy/old.py": "import os\nimport sys\nprint(sys.argv == None)\n",
            "vendored/ruff.toml": '[lint]\nselect = ["E9"]\n',
            "vendored/lib.py": "import os\n",
        },
    )
    found = _seed(tree, tmp_path / "gate")
    assert found == _own(tree)
    assert ("a.py", 1, "F401") in found and ("legacy/old.py", 3, "E711") in found
    assert not [f for f in found if f[0].startswith(("scripts/", "vendored/"))]
    assert not [f for f in found if f[0] == "legacy/old.py" and f[2] == "F401"]


def test_a_project_that_selects_no_rules_gets_the_defaults_of_the_ruff_that_runs(
    tmp_path: Path,
) -> None:
    tree = make_repo(
        tmp_path / "repo",
        {
            "pyproject.toml": "[tool.ruff]\nline-length = 90\n",
            "a.py": "import subprocess\nimport os\n\nsubprocess.run(['x'])\nx = lambda: 1\n",
        },
    )
    assert _seed(tree, tmp_path / "gate") == _own(tree)


def test_an_extend_outside_the_repository_is_the_bases_copy(tmp_path: Path) -> None:
    shared = tmp_path / "shared.toml"
    shared.write_text('[lint]\nselect = ["F401"]\n')
    tree = make_repo(
        tmp_path / "repo", {"ruff.toml": 'extend = "../shared.toml"\n', "a.py": "import os\n"}
    )
    gate = freeze_gate_at(tree, "HEAD", tmp_path / "gate", QualityConfig())
    shared.write_text('[lint]\nselect = ["E9"]\n')  # changed after the gate was frozen
    assert [d.rule for d in run_ruff(tree, gate, 60).diagnostics] == ["F401"]
    assert any("extend ../shared.toml" in line for line in gate.adoption.why), gate.adoption.why


def test_a_config_the_change_adds_or_edits_does_not_relax_the_judgement(tmp_path: Path) -> None:
    base_files = {
        "pyproject.toml": '[tool.ruff.lint]\nselect = ["F", "E711"]\n',
        "pkg/a.py": "x = None\nprint(x == None)\n",
    }
    root = make_repo(tmp_path / "repo", base_files)
    head = git(root, "rev-parse", "HEAD").strip()
    gate = freeze_gate_at(root, head, tmp_path / "gate", QualityConfig())
    # the candidate's tree: a nested .ruff.toml (which wins over pyproject.toml) and a root
    # ruff.toml, each relaxing the rule, and [tool.ruff] edited
    (root / "pkg" / ".ruff.toml").write_text('[lint]\nselect = ["E9"]\n')
    (root / "ruff.toml").write_text('[lint]\nselect = ["E9"]\n')
    (root / "pyproject.toml").write_text('[tool.ruff.lint]\nignore = ["E711"]\n')
    (root / ".gitignore").write_text("pkg/\n")
    found = run_ruff(root, gate, 60)
    assert [(d.file, d.rule) for d in found.diagnostics] == [("pkg/a.py", "E711")]


def test_the_projects_flake8_ignore_silences_the_always_on_rules(tmp_path: Path) -> None:
    files = {"six.py": "print(basestring)\n"}
    for name, text in {
        "setup.cfg": "[flake8]\nmax-line-length = 100\nignore = F821\n",
        "tox.ini": "[flake8]\nextend-ignore = E501,F821\n",
        ".flake8": "[flake8]\nignore =\n    W503,\n    F821\n",
    }.items():
        tree = make_repo(tmp_path / name, {**files, name: text})
        assert _seed(tree, tmp_path / f"gate-{name}") == [], name
    tree = make_repo(tmp_path / "none", {**files, "setup.cfg": "[flake8]\nignore = E501\n"})
    assert [f[2] for f in _seed(tree, tmp_path / "gate-none")] == ["F821"]


def test_pyright_finds_the_virtualenv_the_project_names_in_its_checkout(tmp_path: Path) -> None:
    site = ".venv/lib/python3.11/site-packages/extpkg/__init__.py"
    root = make_repo(
        tmp_path / "repo",
        {
            "pyrightconfig.json": '{"venvPath": ".", "venv": ".venv"}',
            ".gitignore": ".venv/\n",
            "a.py": "from extpkg import VALUE\n\nx: str = VALUE\n",
        },
    )
    (root / site).parent.mkdir(parents=True)
    (root / site).write_text("VALUE: int = 1\n")
    (root / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    export = tmp_path / "export"  # the tree's files only: the virtualenv stays in the checkout
    export.mkdir()
    for name in ("pyrightconfig.json", "a.py"):
        (export / name).write_bytes((root / name).read_bytes())
    gate = freeze_gate(export, tmp_path / "gate", QualityConfig())
    m = run_pyright(export, gate, target_for(root, strict=()), 120)
    assert [d.rule for d in m.diagnostics] == ["reportAssignmentType"], m


def test_pyright_keeps_its_own_python_version_when_the_project_names_none(tmp_path: Path) -> None:
    # pyright does not read requires-python (it takes the interpreter's version): neither does seed
    tree = make_repo(
        tmp_path / "repo",
        {"pyproject.toml": '[project]\nname = "x"\nrequires-python = ">=3.8"\n\n[tool.pyright]\n'},
    )
    gate = freeze_gate(tree, tmp_path / "gate", QualityConfig())
    assert "pythonVersion" not in pyright_config(gate, tree, (), tree)
