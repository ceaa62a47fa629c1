"""The JSON examples in README.md and docs/events.md follow the published JSON Schemas."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest

from streamseg.schemas import load_schema

REPO = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"```json\n(.*?)```", re.S)


def _examples(doc: str) -> list[dict]:
    found = []
    for text in BLOCK.findall((REPO / doc).read_text(encoding="utf-8")):
        data = json.loads(text)
        if isinstance(data, dict) and data.get("type") in ("alert", "detections"):
            found.append(data)
    return found


@pytest.mark.parametrize("doc", ["README.md", "docs/events.md"])
def test_message_examples_validate(doc: str) -> None:
    examples = _examples(doc)
    assert {e["type"] for e in examples} == {"alert", "detections"}, doc
    for example in examples:
        schema = load_schema("alert" if example["type"] == "alert" else "detections")
        jsonschema.validate(example, schema)


def test_readme_commands_exist() -> None:
    """Every `streamseg COMMAND` in the README's command table is a real command."""
    from streamseg.cli import BENCH_COMMANDS, COMMANDS

    text = (REPO / "README.md").read_text(encoding="utf-8")
    names = re.findall(r"^\| `streamseg ([a-z]+)", text, re.M)
    assert names
    for name in names:
        assert name in COMMANDS or name == "bench", name
    for what in re.findall(r"`streamseg bench ([a-z]+)", text):
        assert what in BENCH_COMMANDS, what
