"""The events timeline: filters, snapshots on disk, the size cap and retention."""

from __future__ import annotations

import dataclasses
import io
import time
from pathlib import Path

import numpy as np
from PIL import Image

from streamseg.console.events import SNAPSHOT_QUEUE, EventLog
from streamseg.synthetic.scene import SyntheticScene
from streamseg.track.alerts import CameraAlerts
from streamseg.types import Event, Frame, FrameResult
from tests.support.waiting import poll

ALERTS = CameraAlerts(
    zones={"dock": {"polygon": [[10, 10], [150, 10], [150, 110], [10, 110]]}},
    rules=[{"name": "in-dock", "type": "zone", "zone": "dock"}],
)


def frame_result(index: int) -> tuple[object, FrameResult]:
    scene = SyntheticScene(seed=2, height=120, width=160, num_objects=3)
    f = scene.frame(index)
    frame = Frame("gate", index, f.time, time.time(), f.image)
    return f.image, FrameResult(frame.without_image(), f.gt)


def event(rule: str, kind: str, track: int, t: float, label: str = "disc") -> Event:
    return Event(
        rule=rule, kind=kind, camera_id="gate", time=t, frame_seq=1, track_id=track,
        label_name=label, zone="dock",
    )  # fmt: skip


def test_events_are_listed_filtered_and_snapshotted(tmp_path: Path) -> None:
    log = EventLog(folder=tmp_path, class_names=SyntheticScene(seed=2).class_names)
    image, result = frame_result(4)
    track = int(result.instances.track_ids[0])
    now = time.time()
    log.record(image, result, [event("in-dock", "enter", track, now - 60)], ALERTS, {})
    log.record(
        image,
        result,
        [event("in-dock", "exit", track, now, "star")],
        ALERTS,
        {track: [(5.0, 5.0), (9.0, 9.0)]},
    )
    try:
        assert [e["kind"] for e in log.list()] == ["exit", "enter"]  # newest first
        assert [e["kind"] for e in log.list(kind="enter")] == ["enter"]
        assert [e["kind"] for e in log.list(label="star")] == ["exit"]
        assert [e["kind"] for e in log.list(since=now - 1)] == ["exit"]
        assert (
            log.list(rule="other") == [] and log.list(camera="gate", limit=1)[0]["kind"] == "exit"
        )
        newest = log.list()[0]
        assert newest["rule_config"]["zone"] == "dock" and newest["path"] == [
            [5.0, 5.0],
            [9.0, 9.0],
        ]
        assert "mask_rle" not in newest
        path = poll(lambda: log.snapshot(newest["id"]))
        snap = np.asarray(Image.open(io.BytesIO(path.read_bytes())).convert("RGB"))
        assert snap.shape == (120, 160, 3)

        def yellow(pixels: np.ndarray) -> int:  # the zone's colour, give or take the JPEG
            return int((np.abs(pixels.astype(int) - (255, 210, 0)).sum(-1) < 120).sum())

        assert yellow(snap) >= yellow(np.asarray(image)) + 300  # the zone's outline is drawn
    finally:
        log.close()


def test_snapshots_beyond_the_cap_or_too_old_are_deleted(tmp_path: Path) -> None:
    image, result = frame_result(2)
    log = EventLog(folder=tmp_path, max_bytes=3 * 2500, retention=3600)
    try:
        for i in range(8):
            log.record(image, result, [event("in-dock", "enter", 1, time.time())], ALERTS, {})
            poll(lambda i=i: log.snapshot(i + 1))
        files = sorted(tmp_path.glob("*.jpg"))
        assert 1 <= len(files) < 8
        assert sum(f.stat().st_size for f in files) <= 3 * 2500
        assert log.snapshot(8) is not None and log.snapshot(1) is None  # oldest went first
        log.retention = 0.0  # everything is too old now: the next write expires the rest
        log.record(image, result, [event("in-dock", "enter", 1, time.time())], ALERTS, {})
        poll(lambda: not list(tmp_path.glob("*.jpg")))
    finally:
        log.close()


def test_recorded_events_name_their_snapshot_file(tmp_path: Path) -> None:
    """The path goes into the event before the file exists; the file follows."""
    image, result = frame_result(3)
    log = EventLog(folder=tmp_path / "snaps")
    try:
        given = event("in-dock", "enter", 1, time.time())
        (out,) = log.record(image, result, [given], ALERTS, {})
        assert given.snapshot is None and out == dataclasses.replace(given, snapshot=out.snapshot)
        assert out.snapshot is not None and Path(out.snapshot).is_absolute()
        assert out.to_dict()["snapshot"] == out.snapshot == log.list()[0]["snapshot_path"]
        path = poll(lambda: log.snapshot(1))
        assert str(path) == out.snapshot and path.read_bytes()[:2] == b"\xff\xd8"
    finally:
        log.close()
    # No writer any more: the queue fills, and events past it get no snapshot (counted).
    many = [event("in-dock", "enter", 1, time.time()) for _ in range(SNAPSHOT_QUEUE + 5)]
    out_many = log.record(image, result, many, ALERTS, {})
    assert [e.snapshot is None for e in out_many] == [False] * SNAPSHOT_QUEUE + [True] * 5
    assert log.snapshots_dropped == 5
