"""mypy as the project configures it, end to end: its errors are gaps, a new one refuses a
change, an old one is not blamed on it, and `status` names each type checker and why."""

from __future__ import annotations

import json
import sys
import venv
from pathlib import Path

from tests.support import agent_config, git, make_repo, records, seed

CALC = (
    "def add(a: int, b: int) -> int:\n"
    "    return a - b\n"
    "\n\n"
    "def half(x: int) -> int:\n"
    "    return x / 2\n"
)
"""test_add fails (the top gap); `half` is a real type error mypy and pyright both report."""

FILES: dict[str, str] = {
    "calc.py": CALC,
    "tests/test_calc.py": (
        "from calc import add\n\n\ndef test_add() -> None:\n    assert add(2, 3) == 5\n"
    ),
    "pyproject.toml": (
        '[tool.mypy]\nstrict = true\nfiles = ["calc.py"]\n\n'
        '[tool.pytest.ini_options]\npythonpath = ["."]\n'
    ),
    ".gitignore": "history/*\ninbox/*\n__pycache__/\n",
}
TARGET = f'[quality]\npython = "{sys.executable}"\n'
"""The target's environment: the suite's own, which has mypy (the test extra pins it)."""

FIX = {"replace": "calc.py", "old": "return a - b", "new": "return a + b"}


def test_a_strict_mypy_project_has_its_type_error_as_a_gap_beside_pyrights(
    tmp_path: Path,
) -> None:
    files = dict(FILES)
    files["pyproject.toml"] = FILES["pyproject.toml"] + '\n[tool.pyright]\ninclude = ["calc.py"]\n'
    repo = make_repo(tmp_path / "repo", files, TARGET)
    result = seed(repo, "gaps", "--json")
    assert result.returncode == 0, result.stderr
    gaps = {g["key"]: g for g in json.loads(result.stdout)["gaps"]}
    mypy = gaps["mypy:calc.py:return-value"]
    assert mypy["source"] == "mypy"
    assert 'Incompatible return value type (got "float", expected "int")' in mypy["title"]
    assert [(d["file"], d["line"]) for d in mypy["evidence"]] == [("calc.py", 6)]
    assert any(k.startswith("pyright:calc.py:") for k in gaps), sorted(gaps)  # both run
    status = seed(repo, "status")
    assert status.returncode == 0, status.stderr
    assert "mypy: on ([tool.mypy] in pyproject.toml)" in status.stdout
    assert "pyright: on (configured)" in status.stdout
    assert "mypy: version 2.4.1 in the target's environment" in status.stdout


def test_mypy_configured_but_not_installed_is_said_and_finds_nothing(tmp_path: Path) -> None:
    # no quality.python and no .venv: the daemon's own interpreter, which has no mypy
    repo = make_repo(tmp_path / "repo", FILES, "")
    result = seed(repo, "gaps", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert not [g for g in report["gaps"] if g["source"] == "mypy"], report["gaps"]
    assert any("mypy is configured" in e for e in report["errors"]), report["errors"]
    status = seed(repo, "status")
    assert "mypy: on ([tool.mypy] in pyproject.toml)" in status.stdout
    assert "mypy: not run: not installed in the target's environment" in status.stdout
    assert "pyright: off (no [tool.pyright] or pyrightconfig.json)" in status.stdout


def _once(tmp_path: Path, steps: list[dict[str, str]]):
    repo = make_repo(tmp_path / "repo", FILES, agent_config(tmp_path, steps, extra=TARGET))
    head = git(repo, "rev-parse", "HEAD").strip()
    result = seed(repo, "once")
    [record] = records(repo)
    assert record["gap"]["key"] == "pytest:tests/test_calc.py::test_add", record
    return repo, head, result, record


def test_a_change_adding_a_mypy_error_is_refused(tmp_path: Path) -> None:
    bad = "\n\ndef name() -> int:\n    return 'seed'\n"
    repo, head, result, record = _once(tmp_path, [FIX, {"append": "calc.py", "text": bad}])
    assert result.returncode == 1, result.stderr
    assert (record["outcome"], record["failure_category"]) == ("ROLLBACK", "TYPE_ERROR")
    assert any(e.startswith("mypy calc.py:10 return-value") for e in record["evidence"]), record
    assert git(repo, "rev-parse", "HEAD").strip() == head
    assert "def name" not in (repo / "calc.py").read_text()


def test_a_new_mypy_error_hidden_by_a_type_ignore_is_refused_too(tmp_path: Path) -> None:
    bad = "\n\ndef name() -> int:\n    return 'seed'  # type: ignore\n"
    repo, head, result, record = _once(tmp_path, [FIX, {"append": "calc.py", "text": bad}])
    assert result.returncode == 1, result.stderr
    assert (record["outcome"], record["failure_category"]) == ("ROLLBACK", "TYPE_ERROR")
    assert any(e.startswith("mypy calc.py:10 return-value") for e in record["evidence"]), record
    assert git(repo, "rev-parse", "HEAD").strip() == head


def test_an_old_mypy_error_in_a_touched_file_is_not_blamed_on_the_change(tmp_path: Path) -> None:
    repo, head, result, record = _once(tmp_path, [FIX])
    assert result.returncode == 0, result.stderr + str(record)
    assert record["outcome"] == "SUCCESS" and record["touched_files"] == ["calc.py"]
    assert git(repo, "rev-parse", "HEAD^").strip() == head
    assert "return x / 2" in (repo / "calc.py").read_text()
    after = seed(repo, "gaps", "--json")
    keys = [g["key"] for g in json.loads(after.stdout)["gaps"]]
    assert "mypy:calc.py:return-value" in keys  # still there, and still the person's


TOOLS_MYPY = '[quality]\ntools = ["mypy"]\n'


def test_seeds_own_mypy_checks_with_a_venv_in_the_checkout_that_has_none(tmp_path: Path) -> None:
    # the project's .venv (in the checkout, as most are) lacks mypy: seed's own mypy runs,
    # resolving imports with that interpreter, which its sandbox must show
    repo = make_repo(tmp_path / "repo", {**FILES, ".gitignore": ".venv/\n"}, TOOLS_MYPY)
    venv.EnvBuilder(with_pip=False, symlinks=True).create(repo / ".venv")
    result = seed(repo, "gaps", "--json", python=sys.executable)  # this suite's: it has mypy
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert "mypy:calc.py:return-value" in [g["key"] for g in report["gaps"]], report
    assert report["errors"] == [], report["errors"]
