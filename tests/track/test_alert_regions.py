"""Rules over class regions: a track on a region (``region``) and a class's share of a zone
(``coverage``), through the real tracking stage; and their replay from messages."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from streamseg.publish.encode import detections_message
from streamseg.track.alerts import AlertsConfig
from streamseg.track.config import TrackingConfig
from streamseg.track.replay import to_result
from streamseg.track.rules.engine import RuleError
from streamseg.track.stage import TrackingStage
from streamseg.types import Regions
from tests.support.tracking import Driver, alerts, kinds

NAMES = ("__background__", "person", "car", "road", "water")
SIZE = (100, 200)
PERSON, CAR, ROAD, WATER = 1, 2, 3, 4


def road_map(water_rows: int = 0) -> Regions:
    """A road across the frame at y 60..100; water filling the top ``water_rows`` rows."""
    label_map = torch.zeros(SIZE, dtype=torch.int16)
    label_map[60:, :] = ROAD
    label_map[:water_rows, :] = WATER
    return Regions.from_label_map(label_map)


def thing(x: int, y: int, size: int = 10) -> tuple[list[float], torch.Tensor]:
    """A square object with its top-left corner at ``(x, y)``: box and mask."""
    mask = torch.zeros(SIZE, dtype=torch.bool)
    mask[y : y + size, x : x + size] = True
    return [float(x), float(y), float(x + size), float(y + size)], mask


def drive(
    rules: list[dict[str, Any]],
    frames: list[tuple[list[tuple[int, int, int]], Regions]],
    **section: Any,
) -> list[Any]:
    """Run frames of ``(objects (x, y, label), regions)`` with given track ids 1, 2, ..."""
    d = Driver(alerts(rules, **section), given_ids=True, size=SIZE, class_names=NAMES)
    events = []
    for objects, regions in frames:
        shapes = [thing(x, y) for x, y, _ in objects]
        events += d.step(
            [b for b, _ in shapes],
            masks=torch.stack([m for _, m in shapes])
            if shapes
            else torch.zeros((0, *SIZE), dtype=torch.bool),
            labels=[label for _, _, label in objects],
            ids=list(range(1, len(objects) + 1)),
            regions=regions,
        )
    return events


def test_on_region_after_seconds_then_off() -> None:
    rule = {
        "name": "on-road",
        "type": "region",
        "region": "road",
        "classes": ["person"],
        "min_fraction": 0.5,
        "seconds": 0.2,
    }
    # y 20 (ring all ground), then standing in the road (ring all road) for 4 frames, then out.
    ys = [20, 70, 70, 70, 70, 20]
    events = drive([rule], [([(95, y, PERSON), (30, 70, CAR)], road_map()) for y in ys])
    assert kinds(events) == [("on_region", 1), ("off_region", 1)]
    on, off = events
    assert on.frame_seq == 3  # entered at frame 1, 0.2 s later
    assert on.rule == "on-road" and on.label_name == "person" and on.mask_rle is not None
    assert on.extra["region"] == "road" and on.extra["fraction"] == 1.0
    assert on.extra["seconds"] == pytest.approx(0.2)
    assert off.frame_seq == 5 and off.extra["fraction"] == 0.0


def test_on_region_hysteresis_and_partial_overlap() -> None:
    # The object straddles the road's edge: about half of its ring is road.
    rule = {
        "name": "r",
        "type": "region",
        "region": "road",
        "min_fraction": 0.4,
        "band": 0.2,
        "include_mask": False,
    }
    # Ring shares: y 55 -> 0.47 (on), 48 -> 0.27 (stays on: band), 50 -> 0.36, 45 -> 0.09 (off).
    ys = [55, 48, 50, 45, 30]
    events = drive([rule], [([(95, y, PERSON)], road_map()) for y in ys])
    assert kinds(events) == [("on_region", 1), ("off_region", 1)]
    assert events[0].extra["fraction"] == pytest.approx(0.47, abs=0.01)
    assert events[1].frame_seq == 3


def test_coverage_above_a_share_of_a_zone() -> None:
    zone = {"polygon": [[0.0, 0.0], [200.0, 0.0], [200.0, 50.0], [0.0, 50.0]]}
    rule = {
        "name": "wet",
        "type": "coverage",
        "zone": "top",
        "region": "water",
        "above": 0.1,
        "seconds": 0.1,
        "band": 0.05,
    }
    water = [0, 3, 8, 8, 8, 4, 2]  # rows of water in a 50-row zone: 0, 6 %, 16 %, ..., 4 %
    events = drive([rule], [([], road_map(w)) for w in water], zones={"top": zone})
    assert kinds(events) == [("coverage", None), ("coverage_end", None)]
    start, end = events
    assert start.frame_seq == 3 and start.zone == "top" and start.label == WATER
    assert start.label_name == "water" and start.extra["above"] == 0.1
    assert start.extra["fraction"] == pytest.approx(0.16, abs=0.02)
    assert end.frame_seq == 6  # 8 % is still within the band; 4 % ends it


def test_coverage_below_and_of_a_thing_class() -> None:
    zone = {"polygon": [[80.0, 60.0], [120.0, 60.0], [120.0, 80.0], [80.0, 80.0]]}
    rule = {"name": "blocked", "type": "coverage", "zone": "z", "region": "car", "above": 0.1}
    frames = [([(20, 20, CAR)], road_map()), ([(95, 65, CAR)], road_map())]
    events = drive([rule], frames, zones={"z": zone})
    assert kinds(events) == [("coverage", None)] and events[0].frame_seq == 1
    free = {"name": "free", "type": "coverage", "zone": "z", "region": "road", "below": 0.5}
    # Water over rows 0..74 leaves road on 5 of the zone's 20 rows: 25 %.
    frames = [([], road_map()), ([], road_map(water_rows=75)), ([], road_map())]
    events = drive([free], frames, zones={"z": zone})
    assert kinds(events) == [("coverage", None), ("coverage_end", None)]


def test_unknown_region_class_names_the_field() -> None:
    """Refused when the rules are built, before any frame (serve exits 2 with it)."""
    config = alerts([{"name": "x", "type": "region", "region": "lava"}])
    with pytest.raises(RuleError, match="unknown class 'lava' in `region`") as info:
        TrackingStage(tracking=TrackingConfig(), alerts=config, class_names=NAMES)
    assert info.value.field == "alerts.cameras.cam.rules[0].region"


def test_coverage_needs_one_bound() -> None:
    with pytest.raises(ValueError, match="exactly one of `above` or `below`"):
        AlertsConfig.model_validate(
            {
                "cameras": {
                    "c": {
                        "zones": {"z": {"polygon": [[0, 0], [1, 0], [1, 1]]}},
                        "rules": [{"name": "x", "type": "coverage", "zone": "z", "region": "road"}],
                    }
                }
            }
        )


def _message(regions: Regions) -> dict[str, Any]:
    from streamseg.types import Frame, FrameResult, Instances

    _, mask = thing(95, 70)
    inst = Instances(
        image_size=SIZE,
        boxes=torch.tensor([[95.0, 70, 105, 80]]),
        scores=torch.tensor([0.9]),
        labels=torch.tensor([PERSON]),
        masks=mask[None],
        track_ids=torch.tensor([4]),
        regions=regions,
    )
    frame = Frame("cam", 3, 0.3, 1000.3, torch.zeros((0, 0, 3), dtype=torch.uint8))
    return detections_message(
        FrameResult(frame, inst), arch="m", class_names=NAMES, published_time=1000.4
    )


def test_regions_survive_the_message_and_replay() -> None:
    regions = road_map(water_rows=10)
    msg = _message(regions)
    assert [(r["label"], r["label_name"], r["area"]) for r in msg["regions"]] == [
        (ROAD, "road", 40 * 200),
        (WATER, "water", 10 * 200),
    ]
    back = to_result(msg, "m", masks=True, ids=True).instances
    assert back.regions is not None
    assert torch.equal(back.regions.label_map, regions.label_map)
    plain = detections_message(
        to_result(msg, "m", masks=True, ids=True).__class__(
            to_result(msg, "m", masks=False, ids=True).frame, back.replace(regions=None)
        ),
        arch="m",
        class_names=NAMES,
        published_time=1.0,
    )
    assert "regions" not in plain  # instance models' messages are unchanged
