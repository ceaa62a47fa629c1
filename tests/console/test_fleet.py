"""Other workers' alerts as the console lists them (``streamseg.console.fleet``)."""

from __future__ import annotations

import pytest

from streamseg.console.fleet import matches, remote_event, split_event_id

ALERT = {
    "type": "alert", "rule": "door", "kind": "enter", "camera_id": "cam3", "time": 100.0,
    "frame_seq": 41, "label_name": "person", "worker": "w1", "epoch": 2,
    "mask_rle": {"size": [2, 2], "counts": "04"},
    "snapshot": "/tmp/streamseg-snapshots-x/00000017-cam3-door.jpg",
}  # fmt: skip


def test_a_remote_event_names_its_owner_and_the_owners_snapshot() -> None:
    e = remote_event(ALERT)
    assert e["id"] == "w1:17" and e["remote"] is True and e["worker"] == "w1"
    assert e["snapshot"] == "/api/events/w1:17/snapshot.jpg"
    assert e["snapshot_path"] == ALERT["snapshot"]
    assert "mask_rle" not in e and e["clip"] is None and e["path"] == []
    dropped = remote_event({**ALERT, "snapshot": None})  # its snapshot was dropped
    assert dropped["snapshot"] is None and dropped["id"] == "w1:41:door"


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({}, True),
        ({"camera": "cam3", "kind": "enter", "rule": "door", "label": "person"}, True),
        ({"camera": "cam4"}, False),
        ({"kind": "exit"}, False),
        ({"label": "car"}, False),
        ({"since": 100.0, "until": 100.0}, True),
        ({"since": 100.5}, False),
        ({"until": 99.0}, False),
        ({"camera": None, "since": None}, True),
    ],
)
def test_filters_as_the_event_log_applies_them(filters: dict, expected: bool) -> None:  # type: ignore[type-arg]
    assert matches(remote_event(ALERT), filters) is expected


@pytest.mark.parametrize(
    ("eid", "expected"),
    [("w1:17", ("w1", 17)), ("pod:a:3", ("pod:a", 3)), ("17", None), (":3", None), ("w1:x", None)],
)
def test_event_ids_of_other_workers(eid: str, expected: tuple[str, int] | None) -> None:
    assert split_event_id(eid) == expected
