"""To and from ``supervision.Detections`` (the ``supervision`` extra)."""

from __future__ import annotations

import numpy as np
import pytest
import supervision as sv  # in the dev extra: a missing package fails here, not skips

from streamseg.client import Client, FrameDetections, Instance, from_supervision, to_supervision
from tests.support.publishing import NAMES, frames, publish
from tests.support.servers import RedisServer


def test_round_trip_of_published_frame(redis_server: RedisServer) -> None:
    items = frames("gate", [3])
    publish(redis_server.url, items)
    (frame,) = Client(redis_server.url).detections(start="begin", limit=1)
    dets = to_supervision(frame)
    assert isinstance(dets, sv.Detections) and len(dets) == 2
    np.testing.assert_array_equal(dets.xyxy, [i.box for i in frame.instances])
    np.testing.assert_array_equal(dets.confidence, [0.875, 0.5])
    np.testing.assert_array_equal(dets.class_id, [1, 2])
    np.testing.assert_array_equal(dets.tracker_id, [3, -1])  # the second one is untracked
    assert list(dets.data["class_name"]) == ["person", "car"]
    np.testing.assert_array_equal(dets.mask, items[0][0].instances.masks.numpy())
    # supervision's own operations work on it.
    assert len(dets[dets.confidence > 0.6]) == 1
    back = from_supervision(dets)
    assert back == frame.instances  # boxes, scores, labels, names, tracks and the RLE text


def test_from_supervision_built_by_hand() -> None:
    mask = np.zeros((1, 6, 8), dtype=bool)
    mask[0, 1:4, 2:5] = True
    dets = sv.Detections(xyxy=np.array([[2.0, 1.0, 5.0, 4.0]]), mask=mask, class_id=np.array([2]))
    (inst,) = from_supervision(dets, class_names=NAMES)
    assert (inst.label, inst.label_name, inst.score, inst.track_id) == (2, "car", 1.0, None)
    np.testing.assert_array_equal(inst.mask(), mask[0])
    with pytest.raises(ValueError, match="without class_id"):
        from_supervision(sv.Detections(xyxy=np.array([[0.0, 0, 1, 1]])))


def test_empty_frame_and_no_masks() -> None:
    empty = FrameDetections(
        camera="c", seq=0, pts=None, capture_time=1.0, camera_time=None, published_time=1.0,
        height=4, width=4, arch="a", instances=(),
    )  # fmt: skip
    dets = to_supervision(empty)
    assert len(dets) == 0 and dets.mask is None
    assert dets.tracker_id is not None and dets.tracker_id.shape == (0,)
    assert from_supervision(dets) == ()
    one = FrameDetections(
        camera="c", seq=0, pts=None, capture_time=1.0, camera_time=None, published_time=1.0,
        height=4, width=4, arch="a", instances=(Instance(box=(0, 0, 1, 1), score=0.5, label=1),),
    )  # fmt: skip
    one_dets = to_supervision(one)
    assert one_dets.mask is None
    # No instance is tracked: still an array, -1 for each untracked one (docs/events.md).
    assert one_dets.tracker_id is not None and one_dets.tracker_id.dtype == np.int64
    np.testing.assert_array_equal(one_dets.tracker_id, [-1])
    assert from_supervision(one_dets)[0].track_id is None
