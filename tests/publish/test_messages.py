"""Message encoding and the published JSON Schemas."""

from __future__ import annotations

import json

import jsonschema
import pytest
import torch

from streamseg.publish.encode import alert_message, detections_message, dumps
from streamseg.schemas import load_schema
from streamseg.types import Event, Frame, FrameResult, Instances, MaskCrops

CLASS_NAMES = ("__background__", "person", "car")


def result(n: int, *, masks: bool, tracked: bool) -> FrameResult:
    h, w = 12, 16
    frame = Frame(
        "gate", 7, 0.7, 1_700_000_000.5, torch.zeros((h, w, 3), dtype=torch.uint8),
        trace={"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
    )  # fmt: skip
    m = torch.zeros((n, h, w), dtype=torch.bool)
    for i in range(n):
        m[i, i : i + 3, 2:5] = True
    inst = Instances(
        image_size=(h, w),
        boxes=torch.tensor([[1.0, 2.0, 5.5, 6.25]] * n),
        scores=torch.linspace(0.5, 0.9, n),
        labels=torch.tensor([1, 2, 1][:n]),
        masks=m if masks else None,
        track_ids=torch.tensor([3, -1, 9][:n]) if tracked else None,
    )
    return FrameResult(frame.without_image(), inst)


@pytest.mark.parametrize("tracked", [True, False])
def test_detections_message_without_masks(tracked: bool) -> None:
    msg = detections_message(
        result(3, masks=False, tracked=tracked),
        arch="maskrcnn_small",
        class_names=CLASS_NAMES,
        published_time=1_700_000_001.0,
    )
    jsonschema.validate(msg, load_schema("detections"))
    assert msg["camera"] == "gate" and msg["seq"] == 7 and msg["pts"] == 0.7
    assert msg["image"] == {"height": 12, "width": 16}
    assert msg["traceparent"].startswith("00-0af7")
    first = msg["instances"][0]
    assert first["label_name"] == "person" and first["box"] == [1.0, 2.0, 5.5, 6.25]
    assert first["mask"] is None
    tracks = [i["track_id"] for i in msg["instances"]]
    assert tracks == ([3, None, 9] if tracked else [None, None, None])
    assert json.loads(dumps(msg)) == msg


def test_empty_frame_message() -> None:
    empty = FrameResult(
        Frame("c", 0, None, 1.0, torch.zeros((4, 4, 3), dtype=torch.uint8)),
        Instances.empty((4, 4)),
    )
    msg = detections_message(empty, arch="a", class_names=CLASS_NAMES, published_time=2.0)
    jsonschema.validate(msg, load_schema("detections"))
    assert msg["instances"] == [] and msg["pts"] is None


TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_alert_message_is_event_dict() -> None:
    event = Event(
        rule="door",
        kind="enter",
        camera_id="gate",
        time=1_700_000_000.5,
        frame_seq=7,
        track_id=3,
        label=1,
        label_name="person",
        zone="door",
        pts=0.7,
        box=(1.0, 2.0, 3.0, 4.0),
        score=0.9,
        mask_rle={"size": [12, 16], "counts": "abc"},
        extra={"dwell_seconds": 2.5},
    )
    msg = alert_message(event)
    assert msg == {**event.to_dict(), "traceparent": None}
    jsonschema.validate(msg, load_schema("alert"))
    traced = alert_message(event, traceparent=TRACEPARENT)
    assert traced["traceparent"] == TRACEPARENT
    jsonschema.validate(traced, load_schema("alert"))
    jsonschema.validate(event.to_dict(), load_schema("alert"))  # replay's lines have none
    jsonschema.validate(msg, load_schema("alert"))
    crowd = Event(rule="crowd", kind="crowding", camera_id="gate", time=1.0, frame_seq=1, count=5)
    jsonschema.validate(alert_message(crowd), load_schema("alert"))


def test_schema_rejects_bad_messages() -> None:
    msg = detections_message(
        result(1, masks=False, tracked=True),
        arch="a",
        class_names=CLASS_NAMES,
        published_time=1.0,
    )
    schema = load_schema("detections")
    for broken in (
        {**msg, "schema_version": 2},
        {**msg, "extra_key": 1},
        {**msg, "instances": [{**msg["instances"][0], "box": [1, 2, 3]}]},
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(broken, schema)


def test_schemas_are_valid_json_schema() -> None:
    for name in ("detections", "alert"):
        jsonschema.Draft202012Validator.check_schema(load_schema(name))


@pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")
def test_detections_masks_are_coco_rle() -> None:
    from pycocotools import mask as coco_mask

    res = result(3, masks=True, tracked=True)
    msg = detections_message(res, arch="a", class_names=CLASS_NAMES, published_time=1.0)
    jsonschema.validate(msg, load_schema("detections"))
    assert res.instances.masks is not None
    for inst, expected in zip(msg["instances"], res.instances.masks, strict=True):
        rle = inst["mask"]
        assert rle["size"] == [12, 16] and isinstance(rle["counts"], str)
        decoded = coco_mask.decode({"size": rle["size"], "counts": rle["counts"].encode()})
        assert (torch.from_numpy(decoded).bool() == expected).all()
    assert json.loads(dumps(msg)) == msg


def test_dumps_says_what_the_standard_library_says() -> None:
    """orjson's bytes parse to the same values as ``json.dumps``'s, they validate
    against the schemas, and NaN or infinities are refused as before."""
    from streamseg.bench.publish import sample_message

    def stdlib(m: object) -> bytes:
        return json.dumps(m, separators=(",", ":"), allow_nan=False).encode()

    validator = jsonschema.Draft202012Validator(load_schema("detections"))
    samples = [sample_message(k, seq=k) for k in (0, 1, 10, 50)]
    odd = {**samples[1], "camera": "caméra-北", "pts": 1e-05, "published_time": 1e16}
    for msg in [*samples, odd]:
        data = dumps(msg)
        assert json.loads(data) == json.loads(stdlib(msg)) == msg
        validator.validate(json.loads(data))
    real = detections_message(
        result(3, masks=True, tracked=True), arch="a", class_names=CLASS_NAMES, published_time=1.0
    )
    assert json.loads(dumps(real)) == json.loads(stdlib(real))
    bad = result(1, masks=False, tracked=False)
    bad.instances.scores[0] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        detections_message(bad, arch="a", class_names=CLASS_NAMES, published_time=1.0)
    with pytest.raises(ValueError, match="not JSON"):
        alert_message(Event(rule="r", kind="dwell", camera_id="gate", time=float("inf"),
                            frame_seq=1))  # fmt: skip


def test_detections_from_crops_are_the_frame_masks_message() -> None:
    """Masks as box-local crops publish the same bytes as the frame-size masks."""
    res = result(3, masks=True, tracked=True)
    assert isinstance(res.instances.masks, torch.Tensor)
    crops = MaskCrops.from_masks(res.instances.masks)
    as_crops = FrameResult(res.frame, res.instances.replace(masks=crops))
    want = detections_message(res, arch="a", class_names=CLASS_NAMES, published_time=1.0)
    got = detections_message(as_crops, arch="a", class_names=CLASS_NAMES, published_time=1.0)
    assert dumps(got) == dumps(want)
    assert [i["mask"]["counts"] for i in got["instances"]] == [
        i["mask"]["counts"] for i in want["instances"]
    ]


def test_numbers_are_rounded_the_same_in_every_message_kind() -> None:
    """The alert of an instance shows its box and score as its detections message does."""
    raw_box = (139.04843139648438, 2.123456789, 55.555555, 6.0000001)
    raw_score = 0.123456789
    frame = Frame(
        "gate", 7, 0.123456789, 1_700_000_000.123456789, torch.zeros((1, 1, 3), dtype=torch.uint8)
    )
    inst = Instances(
        image_size=(200, 200),
        boxes=torch.tensor([raw_box], dtype=torch.float64),
        scores=torch.tensor([raw_score], dtype=torch.float64),
        labels=torch.tensor([1]),
        track_ids=torch.tensor([3]),
    )
    det = detections_message(
        FrameResult(frame.without_image(), inst),
        arch="a",
        class_names=CLASS_NAMES,
        published_time=1_700_000_001.987654321,
    )
    event = Event(
        rule="dwell", kind="dwell", camera_id="gate", time=frame.capture_time, frame_seq=7,
        track_id=3, pts=frame.pts, box=raw_box, score=raw_score,
        extra={"dwell_seconds": 2.123456, "since": 1_699_999_998.123456789, "ids": [1, 2]},
    )  # fmt: skip
    alert = alert_message(event)
    assert alert["box"] == det["instances"][0]["box"] == [139.05, 2.12, 55.56, 6.0]
    assert alert["score"] == det["instances"][0]["score"] == 0.12346
    assert alert["time"] == det["capture_time"] == 1_700_000_000.123457
    assert alert["pts"] == det["pts"] == 0.123457
    assert det["published_time"] == 1_700_000_001.987654
    assert alert["extra"] == {"dwell_seconds": 2.123, "since": 1_699_999_998.123457, "ids": [1, 2]}
    # No number of either message has more decimals than its rule allows.
    text = (dumps(det) + dumps(alert)).decode()
    assert "139.048" not in text and "0.1234567" not in text


def test_alert_kind_is_an_enum_of_the_rules_registry() -> None:
    from streamseg.record.events import RECORD_EVENTS
    from streamseg.track.alerts import ALERT_KINDS

    schema = load_schema("alert")
    # The rules' kinds, then recording's own (disk_full: streamseg.schemas.contract).
    assert schema["properties"]["kind"]["enum"] == [*ALERT_KINDS, *RECORD_EVENTS]
    assert "crowding_end" in ALERT_KINDS
    ok = alert_message(Event(rule="r", kind="crowding_end", camera_id="c", time=1.0, frame_seq=1))
    jsonschema.validate(ok, schema)
    with pytest.raises(jsonschema.ValidationError, match="teleported"):
        jsonschema.validate({**ok, "kind": "teleported"}, schema)
