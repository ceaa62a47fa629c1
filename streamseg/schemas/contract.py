"""The alert kinds' part of the event contract, generated from the rules' registry.

``streamseg.track.rule_kinds.RULE_KINDS`` is the one owner of the alert kinds
(``ALERT_KINDS``) and of what each means. From it come the ``kind`` enum of
``alert.schema.json`` and the table of kinds in ``docs/events.md``;
``tests/docs/test_event_contract.py`` fails when either has drifted.
Recording's own alerts (``streamseg.record.events.RECORD_EVENTS``, rule
``record``: ``disk_full``) follow the rules' kinds in both.
After adding a rule kind (or an event of one), write both again::

    python -m streamseg.schemas.contract --write

Without ``--write`` it only says whether they are current (exit 1 if not).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

__all__ = [
    "DOCS_BEGIN",
    "DOCS_END",
    "alert_schema",
    "kinds_table",
    "main",
    "schema_path",
    "with_kinds_table",
]

DOCS_BEGIN = (
    "<!-- alert kinds: generated from RULE_KINDS by "
    "`python -m streamseg.schemas.contract --write` -->"
)
DOCS_END = "<!-- end of the generated alert kinds -->"
_KIND_DESCRIPTION = (
    "what happened; one of the kinds of streamseg.track.rule_kinds.RULE_KINDS, or of "
    "recording's own alerts, streamseg.record.events.RECORD_EVENTS "
    "(docs/events.md, 'Alert kinds')"
)


def schema_path() -> Path:
    """``alert.schema.json`` in the installed package."""
    return Path(__file__).with_name("alert.schema.json")


def alert_schema(current: dict[str, Any] | None = None) -> dict[str, Any]:
    """The alert schema with its ``kind`` enum made from ``ALERT_KINDS`` and
    ``RECORD_EVENTS`` (the rest as it is)."""
    from streamseg.record.events import RECORD_EVENTS
    from streamseg.track.alerts import ALERT_KINDS

    schema = json.loads(schema_path().read_text("utf-8")) if current is None else current
    schema = json.loads(json.dumps(schema))  # a copy
    schema["properties"]["kind"] = {
        "type": "string",
        "enum": [*ALERT_KINDS, *RECORD_EVENTS],
        "description": _KIND_DESCRIPTION,
    }
    return schema


def kinds_table() -> str:
    """The markdown table of alert kinds: kind, the rule ``type`` that publishes it
    (``record`` for recording's own), meaning."""
    from streamseg.record.events import RECORD_EVENTS
    from streamseg.track.rule_kinds import RULE_KINDS

    rows = ["| `kind` | published by rule `type` | when |", "| --- | --- | --- |"]
    for rule in RULE_KINDS.values():
        for kind, meaning in rule.events.items():
            rows.append(f"| `{kind}` | `{rule.type}` | {meaning} |")
    for kind, meaning in RECORD_EVENTS.items():
        rows.append(f"| `{kind}` | none: recording itself (`rule`: `record`) | {meaning} |")
    return "\n".join(rows)


def with_kinds_table(text: str) -> str:
    """``text`` (docs/events.md) with the part between the markers generated anew."""
    pattern = re.compile(re.escape(DOCS_BEGIN) + r".*?" + re.escape(DOCS_END), re.S)
    if not pattern.search(text):
        raise ValueError(f"the markers {DOCS_BEGIN!r} ... {DOCS_END!r} are missing")
    block = f"{DOCS_BEGIN}\n\n{kinds_table()}\n\n{DOCS_END}"
    return pattern.sub(lambda _m: block, text, count=1)


def _schema_text(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help="write the schema and the docs table")
    parser.add_argument(
        "--docs",
        default=str(Path(__file__).resolve().parents[2] / "docs" / "events.md"),
        help="docs/events.md of the source tree",
    )
    args = parser.parse_args(argv)
    targets = {
        schema_path(): _schema_text(alert_schema()),
        Path(args.docs): with_kinds_table(Path(args.docs).read_text("utf-8")),
    }
    stale = [p for p, text in targets.items() if p.read_text("utf-8") != text]
    if args.write:
        for path in stale:
            path.write_text(targets[path], "utf-8")
            print(f"wrote {path}")
        return 0
    for path in stale:
        print(f"{path} is not current: run python -m streamseg.schemas.contract --write")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
