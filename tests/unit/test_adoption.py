"""Which tools take part: the ones the target configures, or the ones seed.toml names."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from domain import AnalysisInput, Tool
from kernel.config import QualityConfig
from kernel.gate import SMALL_RUFF, adoption, freeze_gate, json_lenient
from kernel.measure import measure
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
        ({}, ("ruff", "ruff-format", "pytest")),
        ({"pyrightconfig.json": "{}"}, ("ruff", "ruff-format", "pyright", "pytest")),
        ({"pyproject.toml": "[tool.pyright]\n"}, ("ruff", "ruff-format", "pyright", "pytest")),
        ({"pyproject.toml": "[project]\nname = 'x'\n"}, ("ruff", "ruff-format", "pytest")),
    ],
)
def test_pyright_takes_part_only_when_configured(
    files: dict[str, str], tools: tuple[str, ...]
) -> None:
    assert _adopt(files) == tools


def test_ruff_format_offers_gaps_only_when_configured() -> None:
    assert adoption({}.get, QualityConfig()).advisory == ("ruff-format",)
    for files in (
        {"pyproject.toml": "[tool.ruff.format]\n"},
        {"ruff.toml": "[format]\nquote-style = 'single'\n"},
        {".ruff.toml": "[format]\n"},
    ):
        assert adoption(files.get, QualityConfig()).advisory == (), files
    assert adoption({"pyproject.toml": "[tool.ruff]\n"}.get, QualityConfig()).advisory == (
        "ruff-format",
    )


def test_seed_toml_names_the_tools_exactly() -> None:
    named = adoption({}.get, QualityConfig(tools=["pyright", "pytest"]))
    assert named.tools == ("pyright", "pytest") and named.advisory == ()
    assert "ruff: off ([quality] tools in seed.toml)" in named.why
    with pytest.raises(ValueError, match="unknown tools"):
        QualityConfig(tools=["mypy"])


def test_the_why_lines_say_what_takes_part() -> None:
    why = adoption({}.get, QualityConfig()).why
    assert why == (
        "ruff: syntax errors and undefined names only (no [tool.ruff], ruff.toml or .ruff.toml)",
        "ruff-format: only files already formatted at the baseline (no [tool.ruff.format])",
        "pyright: off (no [tool.pyright] or pyrightconfig.json)",
        "pytest: on (always)",
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
    assert [x.tool for x in m.items] == [Tool.RUFF, Tool.RUFF_FORMAT, Tool.PYTEST]
    ruff = m.get(Tool.RUFF)
    assert ruff is not None and [(d.file, d.rule) for d in ruff.diagnostics] == [("c.py", "F821")]
    fmt = m.get(Tool.RUFF_FORMAT)
    assert fmt is not None and fmt.advisory and [d.file for d in fmt.diagnostics] == ["a.py"]
    gaps = ANALYZER.analyze(AnalysisInput(measurements=m, now=datetime.now(UTC)))
    assert [g.key for g in gaps] == ["ruff:c.py:F821"]


def test_a_ruff_config_without_a_selection_gets_the_long_standing_defaults(tmp_path: Path) -> None:
    # the installed ruff's own defaults change between versions (0.17 enables pylint rules)
    root = make_repo(
        tmp_path / "repo",
        {
            "pyproject.toml": '[tool.ruff]\nline-length = 90\n\n[tool.ruff.lint]\nextend-select = ["I"]\n',
            "a.py": "import subprocess\nimport os\n\nsubprocess.run(['x'])\n",
        },
    )
    gate = freeze_gate(root, tmp_path / "gate", QualityConfig())
    text = gate.ruff_config.read_text()
    assert (
        'select = [\n    "E4",\n    "E7",\n    "E9",\n    "F",\n]' in text
        and "line-length = 90" in text
    )
    m = measure(root, target_for(root, strict=()), gate, tmp_path / "work")
    ruff = m.get(Tool.RUFF)
    assert ruff is not None and sorted(d.rule for d in ruff.diagnostics) == ["F401", "I001"]


def test_pyrightconfig_is_read_with_comments_and_trailing_commas_and_strings_left_whole() -> None:
    text = (
        '{\n  // the strict part\n  "strict": ["src",], /* and */\n  "exclude": ["odd,]name"],\n}\n'
    )
    assert json_lenient(text) == {"strict": ["src"], "exclude": ["odd,]name"]}
    assert json_lenient("{not json") == {}
