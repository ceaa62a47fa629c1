"""To and from ``supervision.Detections``, for drawing and counting with supervision.

``pip install 'streamseg[supervision]'``. ``to_supervision`` fills
``xyxy`` (float64, frame pixels), ``confidence``, ``class_id``,
``tracker_id`` (always an ``(N,)`` int64 array, ``-1`` for an untracked
instance, so a frame with no tracked instance gives all ``-1``), ``mask``
(``(N, H, W)`` bool, decoded here; ``masks=False`` skips it) and ``data["class_name"]``.
``from_supervision`` reads the same fields back into ``Instance``s, the
masks encoded as COCO RLE.

Example::

    import supervision as sv
    from streamseg.client import Client, to_supervision

    for frame in Client().detections(cameras=["gate"]):
        dets = to_supervision(frame)
        zone_count = sv.PolygonZone(polygon).trigger(dets).sum()
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from streamseg.client.events import ClientError, FrameDetections, Instance

if TYPE_CHECKING:
    import supervision as sv

__all__ = ["from_supervision", "to_supervision"]

EXTRA_HINT = "pip install 'streamseg[supervision]' (or pip install supervision)"


def _sv() -> Any:
    try:
        import supervision
    except ImportError:
        raise ClientError(f"this needs the supervision package: {EXTRA_HINT}") from None
    return supervision


def to_supervision(frame: FrameDetections, *, masks: bool = True) -> sv.Detections:
    """``frame``'s instances as one ``supervision.Detections`` (see the module docstring)."""
    import numpy as np

    sv_mod = _sv()
    inst = frame.instances
    n = len(inst)
    tracks = [i.track_id for i in inst]
    has_masks = masks and n > 0 and any(i.rle is not None for i in inst)
    return sv_mod.Detections(
        xyxy=np.array([i.box for i in inst], dtype=np.float64).reshape(n, 4),
        confidence=np.array([i.score for i in inst], dtype=np.float64),
        class_id=np.array([i.label for i in inst], dtype=np.int64),
        tracker_id=np.array([-1 if t is None else t for t in tracks], dtype=np.int64),
        mask=frame.masks() if has_masks else None,
        data={"class_name": np.array([i.label_name or "" for i in inst], dtype=object)},
    )


def from_supervision(
    detections: sv.Detections, *, class_names: Sequence[str] | None = None
) -> tuple[Instance, ...]:
    """``detections`` as ``Instance``s: label names from ``data["class_name"]``, else
    ``class_names[class_id]``; masks encoded to COCO RLE; a missing
    ``confidence`` is 1, a missing ``class_id`` an error."""
    n = len(detections)
    if n and detections.class_id is None:
        raise ValueError("supervision Detections without class_id cannot become instances")
    names = detections.data.get("class_name") if detections.data else None
    rles: list[Any] = [None] * n
    if detections.mask is not None and n:
        import numpy as np
        import torch

        from streamseg.ops.rle import masks_to_rle

        dense = np.asarray(detections.mask, dtype=bool)  # also supervision's CompactMask
        rles = masks_to_rle(torch.from_numpy(np.ascontiguousarray(dense)))
    out = []
    for k in range(n):
        label = int(detections.class_id[k])  # type: ignore[index]
        if names is not None:
            name: str | None = str(names[k]) or None
        elif class_names is not None and 0 <= label < len(class_names):
            name = class_names[label]
        else:
            name = None
        track = None if detections.tracker_id is None else int(detections.tracker_id[k])
        x1, y1, x2, y2 = (float(v) for v in detections.xyxy[k])
        out.append(
            Instance(
                box=(x1, y1, x2, y2),
                score=1.0 if detections.confidence is None else float(detections.confidence[k]),
                label=label,
                label_name=name,
                track_id=None if track is None or track < 0 else track,
                rle=rles[k],
            )
        )
    return tuple(out)
