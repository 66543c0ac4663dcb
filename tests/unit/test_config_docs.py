"""The seed.toml shown in the README is valid, and its defaults are the real ones."""

from __future__ import annotations

import re
import tomllib

from kernel.config import Config
from tests.support import SEED_HOME


def _readme_toml() -> dict[str, object]:
    text = (SEED_HOME / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```toml\n(.*?)```", text, re.S)
    assert block is not None
    return tomllib.loads(block.group(1))


def test_the_readme_config_is_accepted() -> None:
    Config.model_validate(_readme_toml())


def test_the_readme_shows_the_real_guard_and_budget_defaults() -> None:
    shown = Config.model_validate(_readme_toml())
    defaults = Config()
    assert shown.guard.growth == defaults.guard.growth
    assert shown.guard.max_file_bytes == defaults.guard.max_file_bytes
    assert shown.budget == defaults.budget


def test_every_key_of_every_section_is_in_the_readme() -> None:
    text = (SEED_HOME / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```toml\n(.*?)```", text, re.S)
    assert block is not None
    missing: list[str] = []
    for section, field in Config.model_fields.items():
        model = field.annotation
        assert isinstance(model, type)
        for name in getattr(model, "model_fields", {}):
            if not re.search(rf"^#?\s*{name}\s*=|^\[{section}\.{name}", block.group(1), re.M):
                missing.append(f"{section}.{name}")
    assert missing == [], f"seed.toml keys missing from the README: {missing}"
