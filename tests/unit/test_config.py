"""seed.toml: defaults, one-line errors naming key and file, and init's round trip."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from kernel.config import Config, load_config, write_config
from kernel.errors import ConfigError
from kernel.host.context import open_context
from tests.support import SAMPLE, make_repo


def test_missing_file_gives_defaults(tmp_path: Path) -> None:
    config = load_config(tmp_path / "seed.toml")
    assert config == Config()
    assert config.agent.backend == "auto" and config.budget.max_cost_usd_per_day == 10.0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[agent]\nbakend = "x"\n', "unknown key 'agent.bakend'"),
        ('[agnet]\nbackend = "x"\n', "unknown key 'agnet'"),
        ('[budget]\nmax_iterations_per_day = "many"\n', "key 'budget.max_iterations_per_day'"),
        ("[agent]\ntimeout_s = -1\n", "key 'agent.timeout_s'"),
        ("[agent\nbackend = 1\n", "not valid TOML"),
    ],
)
def test_bad_config_is_one_line_naming_key_and_file(
    tmp_path: Path, text: str, expected: str
) -> None:
    path = tmp_path / "seed.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    message = str(caught.value)
    assert expected in message and str(path) in message
    assert "\n" not in message


def test_written_config_reads_back_the_same(tmp_path: Path) -> None:
    path = tmp_path / "seed.toml"
    config = Config.model_validate(
        {
            "agent": {"backend": "command", "command": ["a", "{prompt_file}"]},
            "guard": {"protected": ["docs/**"]},
        }
    )
    write_config(path, config)
    assert load_config(path) == config


def test_every_config_field_is_documented() -> None:
    def walk(model: type[Config]) -> None:
        for name, field in model.model_fields.items():
            assert field.description, f"{model.__name__}.{name} has no docstring"
            annotation = field.annotation
            if isinstance(annotation, type) and issubclass(annotation, Config.__mro__[1]):
                walk(annotation)  # type: ignore[arg-type]

    for section in Config.model_fields.values():
        assert isinstance(section.annotation, type)
        walk(section.annotation)  # type: ignore[arg-type]


def _numbers(model: type[Any], prefix: str = "") -> list[tuple[str, float | None, float | None]]:
    """Every numeric key of the config with its lowest and highest value (None: no bound)."""
    found: list[tuple[str, float | None, float | None]] = []
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            found += _numbers(annotation, f"{prefix}{name}.")
            continue
        if annotation not in (int, float, float | None):
            continue
        low = high = None
        for rule in field.metadata:
            low = getattr(rule, "ge", None) if getattr(rule, "ge", None) is not None else low
            low = getattr(rule, "gt", None) if getattr(rule, "gt", None) is not None else low
            high = getattr(rule, "le", None) if getattr(rule, "le", None) is not None else high
        found.append((f"{prefix}{name}", low, high))
    return found


NUMBERS = _numbers(Config) + [
    (f"agent.prices.m.{name}", 0, 10_000.0) for name in ("input", "output", "cached_input")
]


def test_every_number_in_the_config_has_a_range() -> None:
    assert len(NUMBERS) >= 25
    unbounded = [key for key, low, high in NUMBERS if low is None or high is None]
    assert unbounded == []


def _document(key: str, value: object) -> str:
    table, name = key.rsplit(".", 1)
    if table.startswith("agent.prices."):
        others = "".join(f"{k} = 1.0\n" for k in ("input", "output") if k != name)
        return f'[agent.prices."m"]\n{others}{name} = {value}\n'
    if table.startswith("guard.growth."):
        other = "changed_lines" if name == "new_files" else "new_files"
        return f"[{table}]\n{other} = 1\n{name} = {value}\n"
    return f"[{table}]\n{name} = {value}\n"


@pytest.mark.parametrize(("key", "low", "high"), NUMBERS, ids=[n[0] for n in NUMBERS])
def test_each_number_out_of_its_range_is_refused_at_load_naming_its_key(
    tmp_path: Path, key: str, low: float, high: float
) -> None:
    path = tmp_path / "seed.toml"
    for value in (high * 2 + 1, low - 1, "inf", "nan", 9223372036854775807):
        path.write_text(_document(key, value))
        with pytest.raises(ConfigError) as caught:
            load_config(path)
        assert f"key '{key}'" in str(caught.value) and str(path) in str(caught.value), value
    path.write_text(_document(key, high))
    load_config(path)  # the highest value is taken


def test_an_oversized_or_deeply_nested_seed_toml_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "seed.toml"
    path.write_text("# " + "x" * (1024 * 1024) + "\n")
    with pytest.raises(ConfigError, match="over 1048576 bytes"):
        load_config(path)
    path.write_text("x = " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(path)


@pytest.mark.parametrize(
    ("agent", "words"),
    [
        ('backend = "claude"\napi_base = "http://localhost:4000/v1"', "Anthropic Messages API"),
        ('backend = "gemini"\napi_base = "http://localhost:8080/v1beta"', "without /v1beta"),
        ('backend = "ruff-fix"\napi_base = "http://localhost:8000/v1"', "takes no model endpoint"),
        ('backend = "codex"\napi_base = "localhost:8000/v1"', "not an http:// or https:// URL"),
    ],
)
def test_an_api_base_the_backend_cannot_use_is_refused_at_loading(
    tmp_path: Path, agent: str, words: str
) -> None:
    path = tmp_path / "seed.toml"
    path.write_text(f"[agent]\n{agent}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=words) as raised:
        load_config(path)
    assert "api_base" in str(raised.value)


def test_an_api_base_each_backend_can_use_loads(tmp_path: Path) -> None:
    path = tmp_path / "seed.toml"
    for backend, base in [
        ("codex", "http://localhost:8000/v1"),
        ("claude", "http://localhost:4000"),
        ("gemini", "http://localhost:8080"),
        ("opencode", "http://localhost:11434/v1"),
        ("aider", "http://localhost:11434/v1"),
        ("mini", "https://example.com/v1"),
    ]:
        path.write_text(f'[agent]\nbackend = "{backend}"\napi_base = "{base}"\n')
        assert load_config(path).agent.api_base == base


REMOVED_KEYS = "[analysis]\nresident_pyright = true\npyright_memory_mb = 1024\nfull_every = 3\n"
"""A seed.toml written before the resident type checker left seed (issue 26)."""


def test_a_removed_key_is_named_once_and_the_rest_of_the_config_applies(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "seed.toml"
    path.write_text(REMOVED_KEYS)
    config = load_config(path)
    assert config.analysis.full_every == 3
    said = capsys.readouterr().err.splitlines()
    for key in ("analysis.resident_pyright", "analysis.pyright_memory_mb"):
        named = [line for line in said if f"key '{key}' was removed" in line]
        assert len(named) == 1 and str(path) in named[0], said
    assert (
        "resident_pyright"
        not in Config.model_json_schema()["$defs"]["AnalysisConfig"]["properties"]
    )


def test_a_daemon_logs_a_removed_key_and_still_opens(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", SAMPLE, config=REMOVED_KEYS)
    ctx = open_context(repo)
    assert ctx.config.analysis.full_every == 3
    log = (ctx.paths.history / "daemon.log").read_text(encoding="utf-8")
    assert "key 'analysis.resident_pyright' was removed" in log
