"""The event contract has one owner: the rules' registry (``RULE_KINDS``).

The alert schema's ``kind`` enum and docs/events.md's table of kinds are
generated from it; these tests fail when either (or a place that lists the
kinds by hand) has drifted. Fix: ``python -m streamseg.schemas.contract --write``.
"""

from __future__ import annotations

import json
import re

import pytest

from streamseg.record.events import RECORD_EVENTS
from streamseg.schemas import contract
from streamseg.track.alerts import ALERT_KINDS
from streamseg.track.rule_config import ZoneRule
from streamseg.track.rule_kinds import RULE_KINDS, RuleKind
from tests.support.serve import REPO

DOCS = REPO / "docs" / "events.md"


def test_the_shipped_schema_is_generated_from_the_registry() -> None:
    on_disk = json.loads(contract.schema_path().read_text("utf-8"))
    assert on_disk == contract.alert_schema(), "run python -m streamseg.schemas.contract --write"
    assert on_disk["properties"]["kind"]["enum"] == [*ALERT_KINDS, *RECORD_EVENTS]


def test_the_docs_table_is_generated_from_the_registry() -> None:
    text = DOCS.read_text("utf-8")
    assert contract.with_kinds_table(text) == text, "run python -m streamseg.schemas.contract"
    for kind in [*ALERT_KINDS, *RECORD_EVENTS]:
        assert f"| `{kind}` |" in text


def test_the_check_command_says_whether_the_files_are_current(tmp_path: object) -> None:
    assert contract.main([]) == 0
    stale = DOCS.read_text("utf-8").replace("| `crowding_end` |", "| `crowding_over` |")
    path = tmp_path / "events.md"  # type: ignore[operator]
    path.write_text(stale)
    assert contract.main(["--docs", str(path)]) == 1
    assert contract.main(["--docs", str(path), "--write"]) == 0
    assert path.read_text() == DOCS.read_text("utf-8")


def test_every_kind_comes_from_one_rule_and_has_a_meaning() -> None:
    seen = [k for rule in RULE_KINDS.values() for k in rule.events]
    assert tuple(seen) == ALERT_KINDS and len(set(seen)) == len(seen)
    assert RULE_KINDS["crowding"].kinds == ("crowding", "crowding_end")
    assert RULE_KINDS["dwell"].kinds == ("dwell",)  # no `events:` field: named after its type
    # A row whose meanings do not match its kinds is refused where it is written.
    with pytest.raises(TypeError, match="enter"):
        RuleKind(ZoneRule, "x:Y", {"enter": "in"})


@pytest.mark.parametrize(
    "path",
    ["README.md", "streamseg/client/events.py"],
)
def test_hand_written_lists_of_kinds_name_every_kind(path: str) -> None:
    """Where the kinds are listed in prose, every kind is there (``crowding_end`` was not)."""
    text = (REPO / path).read_text("utf-8")
    listed = set(re.findall(r"`+(\w+)`+", text))
    kinds = {*ALERT_KINDS, *RECORD_EVENTS}
    assert kinds <= listed, sorted(kinds - listed)
