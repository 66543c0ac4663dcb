"""Which tools take part: the ones the target configures, or the ones seed.toml names."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from domain import AnalysisInput, Tool
from kernel.config import QualityConfig
from kernel.measuring.gate import (
    SMALL_RUFF,
    adoption,
    freeze_gate,
    json_lenient,
    running_ruff_version,
)
from kernel.measuring.measure import measure
from modules.analyzers.quality import ANALYZER
from tests.planted import target_for
from tests.support import make_repo

UGLY = "x  =  1\n"
NEAT = "y = 2\n"
BAD_TYPE = 'def f() -> int:\n    return "no"\n\n\n'


def _adopt(files: dict[str, str], quality: QualityConfig | None = None) -> tuple[str, ...]:
    return adoption(files.get, quality or QualityConfig()).tools


@pytest.mark.parametrize(
    ("files", "tools"),
    [
        ({}, ("ruff", "pytest")),
        ({"pyrightconfig.json": "{}"}, ("ruff", "pyright", "pytest")),
        ({"pyproject.toml": "[tool.pyright]\n"}, ("ruff", "pyright", "pytest")),
        ({"pyproject.toml": "[project]\nname = 'x'\n"}, ("ruff", "pytest")),
    ],
)
def test_pyright_takes_part_only_when_configured(
    files: dict[str, str], tools: tuple[str, ...]
) -> None:
    assert _adopt(files) == tools


def test_ruff_format_takes_part_only_where_adopted() -> None:
    assert "ruff-format" not in adoption({}.get, QualityConfig()).tools
    hook = "repos:\n- repo: https://github.com/astral-sh/ruff-pre-commit\n  hooks:\n  - id: ruff-format\n"
    for files in (
        {"pyproject.toml": "[tool.ruff.format]\n"},
        {"ruff.toml": "[format]\nquote-style = 'single'\n"},
        {".ruff.toml": "[format]\n"},
        {".pre-commit-config.yaml": hook},
        {"tox.ini": "[testenv:lint]\ncommands =\n    ruff format --check .\n"},
        {"noxfile.py": 'session.run("ruff", "format", ".")\n'},
    ):
        assert "ruff-format" in adoption(files.get, QualityConfig()).tools, files
    assert (
        "ruff-format"
        not in adoption({"pyproject.toml": "[tool.ruff]\n"}.get, QualityConfig()).tools
    )


def test_seed_toml_names_the_tools_exactly() -> None:
    named = adoption({}.get, QualityConfig(tools=["pyright", "pytest"]))
    assert named.tools == ("pyright", "pytest") and named.advisory == ()
    assert "ruff: off ([quality] tools in seed.toml)" in named.why
    with pytest.raises(ValueError, match="unknown tools"):
        QualityConfig(tools=["black"])


def test_the_why_lines_say_what_takes_part() -> None:
    why = adoption({}.get, QualityConfig()).why
    assert why == (
        "ruff: syntax errors and undefined names only (no [tool.ruff], ruff.toml or .ruff.toml)",
        "ruff-format: off (no [tool.ruff.format], ruff-format hook or `ruff format` command)",
        "pyright: off (no [tool.pyright] or pyrightconfig.json)",
        "mypy: off (no [tool.mypy], mypy.ini, .mypy.ini, setup.cfg [mypy], mypy pre-commit hook "
        "or tox/nox command running mypy)",
        "pytest: on (always)",
        f"ruff: version {running_ruff_version()}",
    )


def test_a_pinned_ruff_that_cannot_run_is_named_with_the_version_that_runs(tmp_path: Path) -> None:
    monkey = {"XDG_CACHE_HOME": str(tmp_path)}  # an empty tool cache
    hook = "- repo: https://github.com/astral-sh/ruff-pre-commit\n  rev: abc123  # frozen: v0.1.2\n"
    with pytest.MonkeyPatch.context() as patch:
        for k, v in monkey.items():
            patch.setenv(k, v)
        why = adoption({".pre-commit-config.yaml": hook}.get, QualityConfig()).why
    assert why[-1] == (
        f"ruff: differs: runs {running_ruff_version()}, not 0.1.2 as pinned in "
        ".pre-commit-config.yaml (not in seed's tool cache: it is installed when HEAD is "
        "analysed and PyPI answers)"
    )


def test_an_unconfigured_target_is_judged_by_the_small_rule_set_and_offers_no_format_gaps(
    tmp_path: Path,
) -> None:
    root = make_repo(
        tmp_path / "repo",
        {"a.py": "import os\n" + UGLY, "b.py": NEAT, "c.py": BAD_TYPE + "print(nowhere)\n"},
    )
    gate = freeze_gate(root, tmp_path / "gate", QualityConfig())
    assert all(rule in gate.ruff_config.read_text() for rule in SMALL_RUFF)
    m = measure(root, target_for(root, strict=()), gate, tmp_path / "work")
    assert [x.tool for x in m.items] == [Tool.RUFF, Tool.PYTEST]
    ruff = m.get(Tool.RUFF)
    assert ruff is not None and [(d.file, d.rule) for d in ruff.diagnostics] == [("c.py", "F821")]
    gaps = ANALYZER.analyze(AnalysisInput(measurements=m, now=datetime.now(UTC)))
    assert [g.key for g in gaps] == ["ruff:c.py:F821"]


def test_pyrightconfig_is_read_with_comments_and_trailing_commas_and_strings_left_whole() -> None:
    text = (
        '{\n  // the strict part\n  "strict": ["src",], /* and */\n  "exclude": ["odd,]name"],\n}\n'
    )
    assert json_lenient(text) == {"strict": ["src"], "exclude": ["odd,]name"]}
    assert json_lenient("{not json") == {}
