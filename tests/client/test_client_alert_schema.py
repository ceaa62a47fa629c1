"""``client.Alert`` against the alert JSON Schema, as ``types.Event`` is tested in
tests/publish/test_messages.py: same field names as the message and the event,
and what it writes back validates and equals what the service published."""

from __future__ import annotations

import dataclasses

import jsonschema
import pytest

from streamseg.client import Alert
from streamseg.client.events import ALERT_SCHEMA_VERSION
from streamseg.publish.encode import alert_message
from streamseg.schemas import load_schema
from streamseg.types import EVENT_SCHEMA_VERSION, Event

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
READ_AT = {"stream", "id"}  # where the client read it, not part of the message

EVENTS = [
    Event(
        rule="door", kind="enter", camera_id="gate", time=1_700_000_000.5, frame_seq=7,
        track_id=3, label=1, label_name="person", zone="door", pts=0.7,
        box=(1.0, 2.0, 3.0, 4.0), score=0.9, mask_rle={"size": [12, 16], "counts": "abc"},
        extra={"dwell_seconds": 2.5}, snapshot="/var/snap/1.jpg",
    ),
    Event(rule="crowd", kind="crowding", camera_id="gate", time=1.0, frame_seq=1, count=5),
    Event(rule="l", kind="line_out", camera_id="c", time=2.0, frame_seq=3, line="tape", count=1),
]  # fmt: skip


def _fields(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


def test_alert_fields_are_the_schema_properties_and_the_event_fields() -> None:
    schema = load_schema("alert")
    properties = set(schema["properties"]) - {"schema_version", "type"}
    assert _fields(Alert) - READ_AT == properties
    # traceparent, worker and epoch are the publisher's (a fleet's worker and lease).
    assert _fields(Event) | {"traceparent", "worker", "epoch"} == properties
    assert (
        ALERT_SCHEMA_VERSION
        == EVENT_SCHEMA_VERSION
        == schema["properties"]["schema_version"]["const"]
    )


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: e.kind)
@pytest.mark.parametrize("traceparent", [None, TRACEPARENT])
def test_alert_round_trips_the_published_message(event: Event, traceparent: str | None) -> None:
    published = alert_message(event, traceparent=traceparent)
    jsonschema.validate(published, load_schema("alert"))
    alert = Alert.from_message(published, stream="s:alerts", id="1-0")
    written = alert.to_dict()
    jsonschema.validate(written, load_schema("alert"))
    assert written == published
    for name in _fields(Event):
        expected = getattr(event, name)
        got = getattr(alert, name)
        assert (list(got) if name == "box" and got is not None else got) == (
            list(expected) if name == "box" and expected is not None else expected
        ), name


def test_old_names_still_read() -> None:
    """``camera`` and ``rle`` (the names before they agreed with the message) still work."""
    alert = Alert.from_message(alert_message(EVENTS[0]))
    assert alert.camera == alert.camera_id == "gate"
    assert alert.rle == alert.mask_rle == {"size": [12, 16], "counts": "abc"}


def test_a_message_without_the_optional_fields_reads() -> None:
    """Messages from before ``snapshot`` and ``traceparent`` existed (replay's lines) read."""
    body = EVENTS[1].to_dict()
    del body["snapshot"]
    jsonschema.validate(body, load_schema("alert"))
    alert = Alert.from_message(body)
    assert alert.snapshot is None and alert.traceparent is None and alert.count == 5


def test_a_fleet_workers_alert_keeps_its_worker_and_epoch() -> None:
    published = {**alert_message(EVENTS[0]), "worker": "w1", "epoch": 3}
    jsonschema.validate(published, load_schema("alert"))
    alert = Alert.from_message(published, stream="s:alerts", id="1-0")
    assert (alert.worker, alert.epoch) == ("w1", 3)
    assert alert.to_dict() == published
