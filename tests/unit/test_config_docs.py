"""The seed.toml shown in docs/configuration.md is valid, and its defaults are the real ones."""

from __future__ import annotations

import re
import tomllib

from kernel.config import Config
from tests.support import SEED_HOME

CONFIG_DOC = SEED_HOME / "docs" / "configuration.md"


def _shown_block() -> str:
    """The first toml block of docs/configuration.md: the whole seed.toml with its defaults."""
    block = re.search(r"```toml\n(.*?)```", CONFIG_DOC.read_text(encoding="utf-8"), re.S)
    assert block is not None
    return block.group(1)


def _shown_toml() -> dict[str, object]:
    """That block, read as seed.toml."""
    return tomllib.loads(_shown_block())


def test_the_documented_config_is_accepted() -> None:
    Config.model_validate(_shown_toml())


def test_the_docs_show_the_real_guard_and_budget_defaults() -> None:
    shown = Config.model_validate(_shown_toml())
    defaults = Config()
    assert shown.guard.growth == defaults.guard.growth
    assert shown.guard.max_file_bytes == defaults.guard.max_file_bytes
    assert shown.budget == defaults.budget


def test_every_key_of_every_section_is_in_the_docs() -> None:
    block = _shown_block()
    missing: list[str] = []
    for section, field in Config.model_fields.items():
        model = field.annotation
        assert isinstance(model, type)
        for name in getattr(model, "model_fields", {}):
            if not re.search(rf"^#?\s*{name}\s*=|^\[{section}\.{name}", block, re.M):
                missing.append(f"{section}.{name}")
    assert missing == [], f"seed.toml keys missing from docs/configuration.md: {missing}"
