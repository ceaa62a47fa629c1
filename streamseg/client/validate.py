"""Debug mode: check each message against its JSON Schema before it is parsed.

``jsonschema`` is an optional extra (``pip install 'streamseg[client-debug]'``):
the service and an ordinary consumer never need it, and checking every
message costs far more than parsing it, so it is a tool for finding what is
wrong with a message rather than something to run in production.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from streamseg.client.events import ClientError, MessageError
from streamseg.schemas import SCHEMAS, load_schema

__all__ = ["SchemaError", "SchemaValidator"]

EXTRA_HINT = "pip install 'streamseg[client-debug]' (or pip install jsonschema)"


class SchemaError(MessageError):
    """A message does not match its JSON Schema (the text names the field and the rule)."""


class SchemaValidator:
    """Validators of ``detections.schema.json`` and ``alert.schema.json``, built once."""

    def __init__(self) -> None:
        try:
            import jsonschema
        except ImportError:
            raise ClientError(f"validate=True needs the jsonschema package: {EXTRA_HINT}") from None
        self._validators = {
            name: jsonschema.Draft202012Validator(load_schema(name)) for name in SCHEMAS
        }

    def check(self, msg: Mapping[str, Any], *, expect: str | None, where: str) -> None:
        """Raise ``SchemaError`` unless ``msg`` matches the schema of its ``type``
        (``expect``: the type its stream should hold)."""
        kind = msg.get("type")
        if expect is not None and kind != expect:
            raise SchemaError(f"{where}: 'type' is {kind!r}; this stream holds {expect!r} messages")
        validator = self._validators.get(str(kind))
        if validator is None:
            raise SchemaError(f"{where}: 'type' is {kind!r}; known: {', '.join(SCHEMAS)}")
        errors = sorted(validator.iter_errors(msg), key=lambda e: list(e.absolute_path))
        if errors:
            first = errors[0]
            path = "/".join(str(p) for p in first.absolute_path) or "(the message)"
            more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
            raise SchemaError(
                f"{where}: does not match {kind}.schema.json at {path}: {first.message}{more}"
            )
