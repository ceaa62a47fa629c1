"""Drive the real tracking stage frame by frame with hand-made boxes (track and alert tests)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from streamseg.config.alerts import AlertsConfig
from streamseg.config.tracking import TrackingConfig
from streamseg.track.stage import TrackingStage
from streamseg.types import Event, Frame, FrameResult, Instances

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
) -> Instances:
    n = len(boxes)
    return Instances(
        image_size=size,
        boxes=torch.tensor(list(boxes), dtype=torch.float32).reshape(n, 4),
        scores=torch.tensor(list(scores) if scores is not None else [0.9] * n),
        labels=torch.tensor(list(labels) if labels is not None else [1] * n, dtype=torch.int64),
        masks=masks,
        track_ids=None if ids is None else torch.tensor(list(ids), dtype=torch.int64),
    )


def alerts(rules: list[dict[str, Any]], camera: str = "cam", **section: Any) -> AlertsConfig:
    """An ``alerts:`` section with one camera (``section``: its zones, lines, coordinates)."""
    return AlertsConfig.model_validate({"cameras": {camera: {"rules": rules, **section}}})


class Driver:
    """One ``TrackingStage``; ``step`` feeds one frame and returns its events.

    With ``given_ids=True`` tracking is off and instances carry the ids the
    test chooses (``step(..., ids=[...])``), so rule geometry is tested on
    exact positions; otherwise the ByteTracker assigns ids.
    """

    def __init__(
        self,
        config: AlertsConfig | None = None,
        *,
        given_ids: bool = False,
        fps: float = 10.0,
        size: tuple[int, int] = SIZE,
        **tracking: Any,
    ) -> None:
        if given_ids:
            tracking.setdefault("enabled", False)
        settings = TrackingConfig(**tracking)
        self.stage = TrackingStage(
            tracking=settings, alerts=config or AlertsConfig(), class_names=NAMES
        )
        self.fps = fps
        self.size = size
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
