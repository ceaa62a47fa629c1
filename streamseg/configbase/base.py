"""The base of every pipeline.yaml section: strict, immutable pydantic models."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """A config section: unknown keys are errors, values are validated, frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)
