"""Generated repositories for the analysis benchmark: layered packages, tests, planted gaps."""

from __future__ import annotations

import subprocess
from pathlib import Path

MODULES_PER_PACKAGE = 10
FUNCTIONS_PER_MODULE = 8

PYPROJECT = """[tool.ruff.lint]
select = ["E", "F", "I"]

[tool.pyright]
include = ["pkg*", "tests"]

[tool.pytest.ini_options]
pythonpath = ["."]
"""

PLANTED = (
    "ruff F401 in pkg0/mod1.py; an unformatted pkg0/mod2.py; a pyright reportReturnType in "
    "pkg0/mod3.py; a failing test and a failing parametrised case in tests/test_pkg0.py; a "
    "collection error in tests/test_broken.py; three unchecked ROADMAP.md items"
)


def _function(k: int, previous: str) -> str:
    call = f"{previous}(value, {k})" if previous else f"value * {k + 1}"
    return f'''

def f{k}(x: int, y: int = {k}) -> int:
    """Sum every third multiple, then hand over."""
    total = 0
    for i in range(x):
        if i % 3 == 0:
            total += i * y
        elif i % 5 == 0:
            total -= y
    value = total + {k}
    return {call}
'''


def module_source(package: int, module: int) -> str:
    """One module of about a hundred lines that imports the module below it."""
    body = '"""Generated module."""\n\nfrom __future__ import annotations\n'
    previous = ""
    if module > 0:
        body += f"\nfrom pkg{package}.mod{module - 1} import f0 as previous\n"
        previous = "previous"
    elif package > 0:
        body += f"\nfrom pkg{package - 1}.mod0 import f0 as previous\n"
        previous = "previous"
    for k in range(FUNCTIONS_PER_MODULE):
        body += _function(k, previous if k == 0 else "")
    body += f'''

class Counter{module}:
    """A small stateful helper."""

    def __init__(self, start: int = 0) -> None:
        self.count = start

    def bump(self, by: int = 1) -> int:
        self.count += by
        return self.count
'''
    return body


def tests_source(package: int) -> str:
    """Tests for one package: plain ones and a parametrised one."""
    out = [
        '"""Generated tests."""',
        "",
        "import pytest",
        "",
        f"from pkg{package}.mod0 import f1",
        f"from pkg{package}.mod{MODULES_PER_PACKAGE - 1} import Counter{MODULES_PER_PACKAGE - 1}",
    ]
    out.append(
        f"""

def test_f1_small() -> None:
    assert f1(0) == 2


def test_counter() -> None:
    counter = Counter{MODULES_PER_PACKAGE - 1}(2)
    assert counter.bump(3) == 5


@pytest.mark.parametrize("x", [0, 1, 2])
def test_f1_is_int(x: int) -> None:
    assert isinstance(f1(x), int)
"""
    )
    return "\n".join(out)


def _plant(files: dict[str, str]) -> None:
    files["pkg0/mod1.py"] = files["pkg0/mod1.py"].replace(
        "from __future__ import annotations\n", "from __future__ import annotations\n\nimport os\n"
    )
    files["pkg0/mod2.py"] += "\nVALUES = [1,\n  2]\n"
    files["pkg0/mod3.py"] += "\n\ndef bad() -> str:\n    return 1\n"
    files["tests/test_pkg0.py"] += (
        "\n\ndef test_fails() -> None:\n    assert f1(0) == 3\n"
        '\n\n@pytest.mark.parametrize("x", [1, 2])\n'
        "def test_case_fails(x: int) -> None:\n    assert x < 2\n"
    )
    files["tests/test_broken.py"] = "import pkg0.missing\n\n\ndef test_never() -> None:\n    pass\n"
    files["ROADMAP.md"] = "# Next\n- [ ] one\n- [ ] two\n\n## Later\n- [ ] three\n"


def generate(root: Path, lines: int, planted: bool = True) -> int:
    """Write and commit a repository of about `lines` lines of Python; the real count."""
    modules = max(MODULES_PER_PACKAGE, round(lines / 113))
    packages = max(1, modules // MODULES_PER_PACKAGE)
    files: dict[str, str] = {
        "pyproject.toml": PYPROJECT,
        ".gitignore": "history/*\ninbox/*\n__pycache__/\n",
    }
    for p in range(packages):
        files[f"pkg{p}/__init__.py"] = ""
        for m in range(MODULES_PER_PACKAGE):
            files[f"pkg{p}/mod{m}.py"] = module_source(p, m)
        files[f"tests/test_pkg{p}.py"] = tests_source(p)
    if planted:
        _plant(files)
    root.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    env_git(root, "init", "-q", "-b", "main")
    env_git(root, "add", "-A")
    env_git(root, "commit", "-q", "-m", "generated")
    return sum(t.count("\n") for n, t in files.items() if n.endswith(".py"))


def env_git(root: Path, *args: str) -> str:
    """git with a fixed identity (the benchmark machine may have none)."""
    return subprocess.run(
        [
            "git",
            "-c",
            "user.name=bench",
            "-c",
            "user.email=bench@localhost",
            "-c",
            "commit.gpgsign=false",
            *args,
        ],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def one_file_change(root: Path, packages: int) -> str:
    """Edit one module in the middle of the import graph (a new lint finding too) and commit."""
    path = root / f"pkg{packages // 2}" / "mod5.py"
    text = path.read_text(encoding="utf-8")
    text = text.replace("value = total + 3", "value = total + 33", 1)
    text = text.replace(
        "from __future__ import annotations\n", "from __future__ import annotations\n\nimport sys\n"
    )
    path.write_text(text, encoding="utf-8")
    env_git(root, "commit", "-q", "-am", "one-file change")
    return path.relative_to(root).as_posix()
