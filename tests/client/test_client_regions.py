"""``streamseg.client`` reads the regions of semantic and panoptic models' messages."""

from __future__ import annotations

import jsonschema
import numpy as np
import torch

from streamseg.client import FrameDetections, Region, to_supervision
from streamseg.publish.encode import detections_message
from streamseg.schemas import load_schema
from streamseg.types import Frame, FrameResult, Instances, Regions

NAMES = ("__background__", "car", "road", "water")


def _message() -> dict:
    label_map = torch.zeros((30, 40), dtype=torch.int16)
    label_map[15:] = 2
    label_map[:5, :10] = 3
    mask = torch.zeros((1, 30, 40), dtype=torch.bool)
    mask[0, 18:24, 20:30] = True
    label_map[mask[0]] = 0
    inst = Instances(
        image_size=(30, 40),
        boxes=torch.tensor([[20.0, 18, 30, 24]]),
        scores=torch.tensor([0.8]),
        labels=torch.tensor([1]),
        masks=mask,
        track_ids=torch.tensor([9]),
        regions=Regions.from_label_map(label_map),
    )
    frame = Frame("yard", 7, 0.7, 1000.7, torch.zeros((0, 0, 3), dtype=torch.uint8))
    return detections_message(
        FrameResult(frame, inst), arch="mask2former_tiny", class_names=NAMES, published_time=1001.0
    )


def test_regions_parse_and_decode() -> None:
    msg = _message()
    jsonschema.validate(msg, load_schema("detections"))
    frame = FrameDetections.from_message(msg)
    assert [(r.label, r.label_name, r.area) for r in frame.regions] == [
        (2, "road", 15 * 40 - 60),
        (3, "water", 50),
    ]
    road = frame.region("road")
    assert isinstance(road, Region) and frame.region("lava") is None
    assert road.mask()[20, 5] and not road.mask()[20, 25]  # the car is not road
    label_map = frame.label_map()
    assert label_map[2, 2] == 3 and label_map[29, 39] == 2 and label_map[20, 25] == 0
    assert road.to_dict() == msg["regions"][0]


def test_to_supervision_keeps_to_the_things() -> None:
    detections = to_supervision(FrameDetections.from_message(_message()))
    assert len(detections) == 1 and detections.tracker_id.tolist() == [9]
    assert detections.mask.shape == (1, 30, 40) and int(detections.mask.sum()) == 60
    assert list(detections.data["class_name"]) == ["car"]


def test_instance_messages_have_no_regions() -> None:
    msg = _message()
    del msg["regions"]
    jsonschema.validate(msg, load_schema("detections"))
    frame = FrameDetections.from_message(msg)
    assert frame.regions == () and not np.any(frame.label_map())
