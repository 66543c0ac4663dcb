"""mypy's adoption read from a project's files, its frozen configuration, and its output parsed."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from domain import Tool
from kernel.config import QualityConfig
from kernel.measuring import mypyrun
from kernel.measuring.gate import adoption, freeze_gate
from kernel.measuring.measure import Target, run_mypy


def _reader(files: dict[str, str]) -> mypyrun.Read:
    return files.get


def test_each_way_a_project_configures_mypy_is_seen() -> None:
    cases = {
        "mypy.ini": ({"mypy.ini": "[mypy]\nstrict = True\n"}, "mypy.ini"),
        ".mypy.ini": ({".mypy.ini": "[mypy]\n"}, ".mypy.ini"),
        "pyproject": ({"pyproject.toml": "[tool.mypy]\nstrict = true\n"}, "[tool.mypy]"),
        "setup.cfg": ({"setup.cfg": "[metadata]\nname = x\n\n[mypy]\n"}, "[mypy] in setup.cfg"),
        "hook": (
            {
                ".pre-commit-config.yaml": "repos:\n- repo: https://github.com/pre-commit/"
                "mirrors-mypy\n  rev: v1.11.2\n  hooks:\n  - id: mypy\n"
            },
            "a mypy pre-commit hook",
        ),
        "tox": (
            {"tox.ini": "[testenv:type]\ndeps = mypy\ncommands = mypy --strict src {posargs}\n"},
            "`mypy` in tox.ini [testenv:type]",
        ),
        "nox": (
            {"noxfile.py": 'def t(session):\n    session.run("mypy", "src", "tests")\n'},
            "`mypy` in noxfile.py",
        ),
    }
    for name, (files, said) in cases.items():
        setup = mypyrun.configured(_reader(files))
        assert said in setup.where, (name, setup)
        adopted = adoption(_reader(files), QualityConfig())
        assert "mypy" in adopted.tools, name
        assert any(line.startswith("mypy: on (") and said in line for line in adopted.why), name


def test_a_project_without_mypy_does_not_run_it_and_says_why() -> None:
    files = {
        "pyproject.toml": "[tool.pyright]\n",
        "setup.cfg": "[flake8]\nmax-line-length = 99\n",
        "tox.ini": "[testenv]\ncommands = pytest\n",
    }
    assert mypyrun.configured(_reader(files)).where == ""
    adopted = adoption(_reader(files), QualityConfig())
    assert "mypy" not in adopted.tools and "pyright" in adopted.tools
    assert mypyrun.NOT_CONFIGURED in adopted.why


def test_the_tox_command_names_what_is_checked_and_only_safe_flags_are_kept() -> None:
    tox = (
        "[tox]\nenvlist = py\n\n[testenv:mypy]\ncommands =\n"
        "    mypy --strict --junit-xml out.xml --install-types -p humanize {posargs:tests}\n"
    )
    setup = mypyrun.configured(_reader({"tox.ini": tox, "mypy.ini": "[mypy]\n"}))
    assert setup.config == "mypy.ini"
    assert setup.args == ("--strict", "-p", "humanize", "tests")
    assert setup.dropped == ("--junit-xml", "out.xml", "--install-types")


def test_a_tox_envs_mypy_commands_are_one_run_where_their_flags_agree() -> None:
    tox = (
        "[testenv:mypy]\ncommands =\n    mypy --strict src\n    mypy --strict tests\n"
        "    mypy -p other\n"
    )
    setup = mypyrun.configured(_reader({"tox.ini": tox}))
    assert setup.args == ("--strict", "src", "tests")
    assert "1 more with other flags not run" in setup.where


def test_the_frozen_configuration_drops_what_writes_and_keeps_its_plugins(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "tools").mkdir(parents=True)
    (tree / "pyproject.toml").write_text(
        '[tool.mypy]\nstrict = true\ncache_dir = "/tmp/x"\nhtml_report = "r"\n'
        'plugins = ["tools/plug.py", "pydantic.mypy"]\nfiles = ["src"]\n',
        encoding="utf-8",
    )
    (tree / "tools" / "plug.py").write_text("def plugin(v): ...\n", encoding="utf-8")
    gate = freeze_gate(tree, tmp_path / "gate", QualityConfig())
    assert gate.mypy_dir is not None and "mypy" in gate.adoption.tools
    frozen = (gate.mypy_dir / "pyproject.toml").read_text(encoding="utf-8")
    assert "strict = true" in frozen and "cache_dir" not in frozen and "html_report" not in frozen
    assert (gate.mypy_dir / "tools" / "plug.py").read_text() == "def plugin(v): ...\n"
    argv = mypyrun.argv_for(gate.mypy, gate.mypy_dir, "/py")
    assert argv[-2:] == ["--config-file", "@pyproject.toml"]  # its own `files` decide
    assert "--no-incremental" in argv and "--cache-dir" in argv


def test_json_and_text_output_are_parsed_alike(tmp_path: Path) -> None:
    json_lines = (
        '{"mypy": "2.4.1"}\n'
        '{"file": "src/a.py", "line": 2, "column": 11, "message": "Incompatible return value '
        'type", "hint": null, "code": "return-value", "severity": "error"}\n'
        '{"file": "src/a.py", "line": 2, "column": 11, "message": "See docs", "hint": null, '
        '"code": null, "severity": "note"}\n'
    )
    text = (
        "src/a.py:2:12: error: Incompatible return value type  [return-value]\n"
        'src/a.py:2:12: note: See https://mypy.readthedocs.io/en/stable/ for "x"\n'
        "src/b.py:7: error: Name 'y' is not defined\n"
        "Found 2 errors in 2 files (checked 3 source files)\n"
    )
    [from_json] = mypyrun.parse(json_lines, tmp_path)
    first, second = mypyrun.parse(text, tmp_path)
    assert from_json.tool == Tool.MYPY
    assert (from_json.file, from_json.line, from_json.column, from_json.rule) == (
        "src/a.py",
        2,
        12,
        "return-value",
    )
    assert (first.file, first.line, first.column, first.rule) == ("src/a.py", 2, 12, "return-value")
    assert first.message == from_json.message == "Incompatible return value type"
    assert (second.file, second.line, second.rule) == ("src/b.py", 7, "misc")
    absolute = mypyrun.parse(f"{tmp_path}/c.py:1:1: error: bad  [misc]\n", tmp_path)
    assert absolute[0].file == "c.py"


def test_status_says_which_mypy_runs(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    site = venv / "lib" / "python3.11" / "site-packages" / "mypy-1.11.2.dist-info"
    site.mkdir(parents=True)
    (site / "METADATA").write_text("Metadata-Version: 2.1\nName: mypy\nVersion: 1.11.2\n")
    python = str(venv / "bin" / "python")
    assert mypyrun.installed(python) == "1.11.2"
    pin = mypyrun.pins.Pin("1.13.0", ".pre-commit-config.yaml")
    assert mypyrun.version_line(python, None) == (
        "mypy: version 1.11.2 in the target's environment"
    )
    assert "differs: the target's environment has 1.11.2, not 1.13.0" in mypyrun.version_line(
        python, pin
    )
    bare = str(tmp_path / "none" / "bin" / "python")
    assert mypyrun.installed(bare) == ""
    assert "not installed in the target's environment" in mypyrun.version_line(bare, None)


def test_what_a_type_ignore_or_a_mypy_comment_hides_is_measured_apart(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "pyproject.toml").write_text("[tool.mypy]\nstrict = true\n", encoding="utf-8")
    source = (
        "def f() -> int:\n"
        '    return "x"  # type: ignore[return-value]\n'
        "\n\n"
        "def g() -> int:\n"
        '    return "y"\n'
    )
    (tree / "a.py").write_text(source, encoding="utf-8")
    (tree / "b.py").write_text('# mypy: ignore-errors\nx: int = "z"\n', encoding="utf-8")
    gate = freeze_gate(tree, tmp_path / "gate", QualityConfig())
    target = Target(root=tree, python=sys.executable, quality=QualityConfig())
    m = run_mypy(tree, gate, target, 300)
    assert m.ran, m.error
    assert [(d.file, d.line, d.rule) for d in m.diagnostics] == [("a.py", 6, "return-value")]
    assert sorted((d.file, d.line) for d in m.suppressed) == [("a.py", 2), ("b.py", 2)]
    assert (tree / "a.py").read_text(encoding="utf-8") == source  # the tree is untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gate", "tree"]  # no copy left


def _fake_env(prefix: Path, version: str) -> str:
    """An interpreter's path whose environment's metadata lists mypy at this version."""
    dist = prefix / "lib" / "python3.11" / "site-packages" / f"mypy-{version}.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: mypy\nVersion: {version}\n")
    (prefix / "bin").mkdir()
    (prefix / "bin" / "python").write_text("")
    return str(prefix / "bin" / "python")


def test_the_tox_env_that_runs_mypy_is_its_environment(tmp_path: Path) -> None:
    tox = "[testenv:type]\ndeps = mypy\ncommands = mypy src\n"
    setup = mypyrun.configured(_reader({"tox.ini": tox}))
    assert setup.env == "type"
    target = _fake_env(tmp_path / "venv", "1.10.0")
    assert mypyrun.interpreter(setup, target, tmp_path)[1:] == (
        "the target's environment",
        "1.10.0",
    )
    tox_python = _fake_env(tmp_path / ".tox" / "type", "1.13.0")
    assert mypyrun.interpreter(setup, target, tmp_path) == (
        tox_python,
        "the tox env .tox/type",
        "1.13.0",
    )
    assert mypyrun.version_line(target, None, setup, tmp_path) == (
        "mypy: version 1.13.0 in the tox env .tox/type"
    )


def test_a_mypy_hook_runs_with_its_args_on_the_whole_tree() -> None:
    hooks = (
        "repos:\n- repo: https://github.com/pre-commit/mirrors-mypy\n  rev: v1.11.2\n"
        "  hooks:\n  - id: mypy\n    args: [--strict, --junit-xml=x.xml]\n"
        "- repo: local\n  hooks:\n  - id: other\n    args: [--no-strict]\n"
    )
    setup = mypyrun.configured(_reader({".pre-commit-config.yaml": hooks}))
    assert (setup.args, setup.dropped) == (("--strict",), ("--junit-xml=x.xml",))
    assert mypyrun.argv_for(setup, None, "/py")[-4:] == [
        "--config-file",
        os.devnull,
        "--strict",
        ".",
    ]
    bare = "repos:\n- repo: https://github.com/pre-commit/mirrors-mypy\n  hooks:\n  - id: mypy\n"
    default = mypyrun.configured(_reader({".pre-commit-config.yaml": bare}))
    assert default.args == ("--ignore-missing-imports",)
    pin = mypyrun.pins.pinned("mypy", _reader({".pre-commit-config.yaml": hooks}))
    assert pin == mypyrun.pins.Pin("1.11.2", ".pre-commit-config.yaml")


def test_a_mypy_hooks_args_in_block_style_are_read() -> None:
    hooks = (
        "repos:\n- repo: https://github.com/pre-commit/mirrors-mypy\n  rev: v1.11.2\n"
        "  hooks:\n  - id: mypy\n    args:\n      - --strict\n      - '--junit-xml=x.xml'\n"
        "    additional_dependencies: [types-requests]\n"
        "- repo: local\n  hooks:\n  - id: other\n    args:\n    - --no-strict\n"
    )
    setup = mypyrun.configured(_reader({".pre-commit-config.yaml": hooks}))
    assert (setup.args, setup.dropped) == (("--strict",), ("--junit-xml=x.xml",))
