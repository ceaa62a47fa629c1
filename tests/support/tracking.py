"""Drive the real tracking stage frame by frame with hand-made boxes (track and alert tests)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import torch

from streamseg.track.alerts import AlertsConfig
from streamseg.track.config import TrackingConfig
from streamseg.track.stage import TrackingStage
from streamseg.types import Event, Frame, FrameResult, Instances, MaskCrops, Regions

NAMES = ("__background__", "person", "car", "dog")
SIZE = (100, 200)  # (H, W) pixels
_NO_IMAGE = torch.zeros((0, 0, 3), dtype=torch.uint8)


def box_at(x: float, y: float, w: float = 10.0, h: float = 10.0) -> list[float]:
    """The xyxy box whose bottom centre (the default anchor) is ``(x, y)``."""
    return [x - w / 2, y - h, x + w / 2, y]


def instances(
    boxes: Sequence[Sequence[float]],
    *,
    size: tuple[int, int] = SIZE,
    scores: Sequence[float] | None = None,
    labels: Sequence[int] | None = None,
    ids: Sequence[int] | None = None,
    masks: torch.Tensor | None = None,
    regions: Regions | None = None,
) -> Instances:
    n = len(boxes)
    return Instances(
        image_size=size,
        boxes=torch.tensor(list(boxes), dtype=torch.float32).reshape(n, 4),
        scores=torch.tensor(list(scores) if scores is not None else [0.9] * n),
        labels=torch.tensor(list(labels) if labels is not None else [1] * n, dtype=torch.int64),
        masks=masks,
        track_ids=None if ids is None else torch.tensor(list(ids), dtype=torch.int64),
        regions=regions,
    )


def alerts(rules: list[dict[str, Any]], camera: str = "cam", **section: Any) -> AlertsConfig:
    """An ``alerts:`` section with one camera (``section``: its zones, lines, coordinates)."""
    return AlertsConfig.model_validate({"cameras": {camera: {"rules": rules, **section}}})


class Driver:
    """One ``TrackingStage``; ``step`` feeds one frame and returns its events.

    With ``given_ids=True`` tracking is off and instances carry the ids the
    test chooses (``step(..., ids=[...])``), so rule geometry is tested on
    exact positions; otherwise the ByteTracker assigns ids. With
    ``mask_crops=True`` the frame-size masks given to ``step`` reach the
    stage as ``MaskCrops`` (what serving's Mask R-CNN gives).
    """

    def __init__(
        self,
        config: AlertsConfig | None = None,
        *,
        given_ids: bool = False,
        fps: float = 10.0,
        size: tuple[int, int] = SIZE,
        mask_crops: bool = False,
        class_names: Sequence[str] = NAMES,
        **tracking: Any,
    ) -> None:
        if given_ids:
            tracking.setdefault("enabled", False)
        settings = TrackingConfig(**tracking)
        self.stage = TrackingStage(
            tracking=settings, alerts=config or AlertsConfig(), class_names=class_names
        )
        self.fps = fps
        self.size = size
        self.mask_crops = mask_crops
        self.seq = 0
        self.results: list[FrameResult] = []

    @property
    def time(self) -> float:
        return self.seq / self.fps

    def step(
        self, boxes: Sequence[Sequence[float]] = (), *, camera: str = "cam", **kw: Any
    ) -> list[Event]:
        """Process one frame at time ``seq / fps`` (a skipped ``seq`` is a dropped frame)."""
        inst = instances(boxes, size=self.size, **kw)
        if self.mask_crops and isinstance(inst.masks, torch.Tensor):
            inst = inst.replace(masks=MaskCrops.from_masks(inst.masks))
        frame = Frame(camera, self.seq, self.time, 1000.0 + self.time, _NO_IMAGE)
        result, events = self.stage.process(FrameResult(frame, inst))
        self.results.append(result)
        self.seq += 1
        return events

    def skip(self, frames: int) -> None:
        """Frames that never reach the stage (dropped under load)."""
        self.seq += frames

    def ids(self) -> list[int]:
        """Track ids given to the last frame's instances."""
        ids = self.results[-1].instances.track_ids
        assert ids is not None
        return [int(i) for i in ids.tolist()]

    def run(self, paths: Sequence[Sequence[Sequence[float] | None]], **kw: Any) -> list[Event]:
        """Frames from per-object paths of boxes (``None``: that object is not detected).

        ``paths[k][f]`` is object ``k``'s box in frame ``f``; with given ids
        the object's id is ``k + 1``.
        """
        events: list[Event] = []
        given = not self.stage.tracking.enabled
        for f in range(max(len(p) for p in paths)):
            boxes, ids = [], []
            for k, p in enumerate(paths):
                if f < len(p) and p[f] is not None:
                    boxes.append(p[f])
                    ids.append(k + 1)
            extra = dict(kw)
            if given:
                extra["ids"] = ids
            events += self.step(boxes, **extra)
        return events


def kinds(events: Sequence[Event]) -> list[tuple[str, int | None]]:
    """``(kind, track_id)`` of each event."""
    return [(e.kind, e.track_id) for e in events]


# -- a scripted synthetic scene with known events (end-to-end and replay tests) ----------

SCENE_RULES = """
version: 1
cameras:
  - id: gate
    url: synthetic://?seed=1&width=320&height=240&fps=10
tracking:
  confirm_hits: 2
  max_lost_seconds: 1.0
alerts:
  cameras:
    gate:
      zones:
        bay: {polygon: [[182, 40], [262, 40], [262, 200], [182, 200]]}
      lines:
        door: {points: [[160, 20], [160, 220]], in_side: left}
        gate: {points: [[20, 120], [120, 120]], in_side: right}
      rules:
        - {name: bay-zone, type: zone, zone: bay}
        - {name: door-count, type: line, line: door}
        - {name: gate-count, type: line, line: gate}
        - {name: loiter, type: dwell, zone: bay, seconds: 2.0, classes: [disc]}
        - {name: crowd, type: crowding, zone: bay, max_occupancy: 1, clear_occupancy: 1}
"""

# (frame_seq, rule, kind, track_id, count) that SCENE_RULES must produce, in order:
# - track 2 (a disc) stands in the bay from the start: an initial enter when it
#   is confirmed (frame 1), dwell after 2 s (t = 2.0, frame 20);
# - track 1 (a square) walks right along y = 100 at 80 px/s: crosses the door
#   (anchor x > 162 first at t = 1.8), enters the bay (x >= 182 first at
#   t = 2.1), is not detected for frames 24..27 while inside (no exit/enter),
#   leaves it (x > 262 first at t = 3.1); with it the bay holds 2 (> 1):
#   crowding, then crowding_end when it leaves;
# - track 3 (a square) walks down at x = 60 at 40 px/s: crosses the gate
#   line (anchor y > 122 first at t = 1.8).
SCENE_EVENTS = [
    (1, "bay-zone", "enter", 2, None),
    (18, "door-count", "line_in", 1, 1),
    (18, "gate-count", "line_in", 3, 1),
    (20, "loiter", "dwell", 2, None),
    (21, "bay-zone", "enter", 1, None),
    (21, "crowd", "crowding", None, 2),
    (31, "bay-zone", "exit", 1, None),
    (31, "crowd", "crowding_end", None, 1),
]
SCENE_FRAMES = 50
SCENE_HIDDEN = {1: range(24, 28)}  # gt id -> frames in which it is not detected


def scripted_scene() -> Any:
    from streamseg.synthetic.scene import ObjectSpec, SyntheticScene

    walker = ObjectSpec("square", size=(30, 30), path=[(0.0, 20.0, 100.0), (3.5, 300.0, 100.0)])
    stander = ObjectSpec("disc", size=(24, 24), path=[(0.0, 230.0, 150.0)])
    faller = ObjectSpec("square", size=(20, 20), path=[(0.0, 60.0, 43.0), (4.0, 60.0, 203.0)])
    return SyntheticScene(
        seed=3,
        height=240,
        width=320,
        fps=10.0,
        objects=[walker, stander, faller],
        num_frames=SCENE_FRAMES,
    )


@functools.cache
def scripted_results(camera: str = "gate") -> list[tuple[FrameResult, Instances]]:
    """``(detections as a FrameResult, ground truth)`` per frame: gt minus the hidden ones."""
    out = []
    for f in scripted_scene():
        gt = f.gt
        assert gt.track_ids is not None
        keep = [
            i
            for i, tid in enumerate(gt.track_ids.tolist())
            if f.index not in SCENE_HIDDEN.get(tid, ())
        ]
        det = gt[keep].replace(track_ids=None)
        frame = Frame(camera, f.index, f.time, 1.7e9 + f.time, _NO_IMAGE)
        out.append((FrameResult(frame, det), gt))
    return out
