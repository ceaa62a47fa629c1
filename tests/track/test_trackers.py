"""One tracker interface, chosen by a registry row (``streamseg.track.trackers``).

Every ``TRACKERS`` row builds a tracker that takes a frame's ``Instances``
and gives each detection's track id and the rules' view; the tracking stage
asks a camera's tracker only that interface, so a row registered from a
test module runs in the stage with nothing else changed.
"""

from __future__ import annotations

import pytest
import torch

from streamseg.track.alerts import AlertsConfig
from streamseg.track.config import TrackingConfig
from streamseg.track.stage import build_tracking_stage
from streamseg.track.tracker import TrackerOutput
from streamseg.track.trackers import TRACKERS, GivenIds, build_tracker, tracker_kind
from streamseg.track.view import FrameInfo
from streamseg.types import Instances
from tests.support.tracking import scripted_results

NAMES = ("__background__", "disc", "square", "triangle", "star")


def _info(result_index: int, inst: Instances, t: float) -> FrameInfo:
    return FrameInfo("gate", t, result_index, t, inst.image_size)


@pytest.mark.parametrize("kind", sorted(TRACKERS))
def test_every_row_tracks_the_scripted_scene_through_the_one_interface(kind: str) -> None:
    tracking = TrackingConfig(enabled=kind == "bytetrack")
    assert tracker_kind(tracking) == kind
    tracker = build_tracker(tracking, num_classes=len(NAMES))
    ids_seen: set[int] = set()
    for i, (result, gt) in enumerate(scripted_results()):
        inst = gt if kind == "given" else result.instances  # given: ids come with the instances
        before = (inst.boxes.clone(), None if inst.track_ids is None else inst.track_ids.clone())
        out = tracker.update(_info(i, inst, result.frame.capture_time), inst)
        assert len(out.track_ids) == len(inst)
        assert torch.equal(inst.boxes, before[0])  # the input is never changed
        ids_seen |= {int(t) for t in out.track_ids if t >= 0}
        assert sum(tracker.state_counts().values()) == len(tracker)
        assert tracker.confirmed() >= 0
    assert ids_seen, "no detection got a track id"
    tracks = tracker.tracks("gate")
    assert all(t.camera_id == "gate" for t in tracks)
    assert (len(tracks) > 0) == (kind == "bytetrack")  # given ids keep no track snapshots


class FromSeven(GivenIds):
    """A tracker registered by this test: detection ``i`` of a frame is track ``7 + i``."""

    def update(self, frame: FrameInfo, instances: Instances) -> TrackerOutput:
        ids = torch.arange(7, 7 + len(instances), dtype=torch.int64)
        return super().update(frame, instances.replace(track_ids=ids))


def test_the_stage_runs_the_tracker_its_row_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(TRACKERS, "bytetrack", f"{__name__}:FromSeven")
    stage = build_tracking_stage(TrackingConfig(enabled=True), AlertsConfig(), NAMES)
    try:
        for result, _gt in scripted_results()[:5]:
            tracked, _events = stage.process(result)
            ids = tracked.instances.track_ids
            assert ids is not None and ids.tolist() == list(range(7, 7 + len(result.instances)))
        tracker = stage.cameras["gate"].tracker
        assert isinstance(tracker, FromSeven) and len(tracker) == 3
        assert stage.tracks("gate") == []
        assert dict((a["state"], n) for n, a in stage.track_observations()) == {"confirmed": 3}
    finally:
        stage.close()
