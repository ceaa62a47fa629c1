"""JSON Schemas of the Redis messages: ``detections.schema.json``, ``alert.schema.json``.

``load_schema("detections")`` returns one as a dict.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

__all__ = ["SCHEMAS", "load_schema"]

SCHEMAS = ("detections", "alert")


def load_schema(name: str) -> dict[str, Any]:
    if name not in SCHEMAS:
        raise ValueError(f"unknown schema {name!r}; known: {', '.join(SCHEMAS)}")
    text = resources.files(__name__).joinpath(f"{name}.schema.json").read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema
