"""Base classes for the domain models."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Fact(BaseModel):
    """An immutable record of something that happened or was measured."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class Draft(BaseModel):
    """A model that is built up step by step before it becomes a fact."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)
