"""The base of every document model (page front matter, manifest, record, store row): unknown keys are errors."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

# a value a record's params or extras, or a claim's selector, may hold
Scalar = bool | int | float | str


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")
