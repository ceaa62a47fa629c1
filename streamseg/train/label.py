"""Pseudo-labels: a teacher model over recorded footage -> a COCO dataset.

For each video: decode, keep every N-th frame (or F frames per second of
stream time), run the teacher, keep instances scoring at least the threshold,
and (optionally) only instances the tracker follows over at least K of the
sampled frames, which drops one-frame flickers. Frames are written as PNG
(lossless) next to one COCO instance JSON with compressed-RLE masks, which
``streamseg train`` reads like any human-made COCO file.

The tracker is the service's (``streamseg.track``) with settings of its own
(:func:`label_tracking`): every instance the score threshold keeps may start
or extend a track, and a track counts every frame it was matched in, its
first included. The service's defaults would not do here: their thresholds
(0.5 to extend, 0.6 to start a track) ignore instances a lower
``--score-threshold`` keeps, and a new track is given its id only once
confirmed, one frame late.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from streamseg.track.config import TrackingConfig
from streamseg.train.evaluate import predict
from streamseg.train.images import write_png
from streamseg.types import Frame, FrameResult, Instances
from streamseg.video import VideoReader

__all__ = [
    "LabelOptions",
    "LabelResult",
    "LabelTracker",
    "confirmed",
    "label_tracking",
    "label_videos",
    "sample_frames",
]

log = logging.getLogger("streamseg.label")


@dataclasses.dataclass(frozen=True)
class LabelOptions:
    """How footage becomes labels.

    Attributes:
        score_threshold: keep teacher instances scoring at least this.
        every: keep every ``every``-th decoded frame (with ``fps`` unset).
        fps: keep this many frames per second of stream time instead.
        min_track_frames: keep an instance only if its track is matched in
            at least this many sampled frames (1: no tracking).
        tracking: ``tracking:`` settings (``TrackingConfig`` fields) that
            replace the labelling defaults of :func:`label_tracking`.
        classes: keep only these teacher classes (empty: all).
        batch_size: frames per teacher forward pass.
        device / precision: where and how the teacher runs.
        max_frames: stop after this many sampled frames per video.
    """

    score_threshold: float = 0.5
    every: int = 1
    fps: float | None = None
    min_track_frames: int = 1
    tracking: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    classes: tuple[str, ...] = ()
    batch_size: int = 2
    device: str = "cpu"
    precision: str = "fp32"
    max_frames: int | None = None


@dataclasses.dataclass(frozen=True)
class LabelResult:
    """What was written: the JSON, frames, instances kept and dropped."""

    annotations: Path
    images: int
    instances: int
    dropped_unconfirmed: int
    dropped_low_score: int


def sample_frames(
    path: Path, *, every: int = 1, fps: float | None = None, max_frames: int | None = None
) -> Iterator[tuple[int, float, Tensor]]:
    """``(frame index, pts seconds, uint8 (H, W, 3))`` of the sampled frames of ``path``."""
    next_time: float | None = None

    def keep(index: int, time: float | None) -> bool:
        nonlocal next_time
        if fps is None:
            return index % every == 0
        t = index / 30.0 if time is None else time
        if next_time is not None and t < next_time - 1e-6:
            return False
        next_time = (t if next_time is None else next_time) + 1.0 / fps
        return True

    with VideoReader(path) as video:
        for taken, (index, time, image) in enumerate(video.read(keep), start=1):
            yield index, index / 30.0 if time is None else time, torch.from_numpy(image)
            if max_frames is not None and taken >= max_frames:
                return


def _masks_to_rle(masks: Tensor) -> list[dict[str, Any]]:
    from streamseg.ops import masks_to_rle

    return [dict(r) for r in masks_to_rle(masks.cpu())]


# Settings the confirmation rule depends on: the tracker must run, and give
# a new track its id from its first frame.
_FIXED_TRACKING = {"enabled": True, "publish_tentative": True}


def label_tracking(options: LabelOptions) -> TrackingConfig:
    """The tracker settings of ``streamseg label``: the service's, except

    * ``high_score`` = ``low_score`` = ``new_track_score`` = the score
      threshold: every instance kept may extend or start a track;
    * ``confirm_hits: 1`` and ``publish_tentative``: a track has its id from
      its first frame; confirmation is ``min_track_frames``, counted after;
    * ``max_lost_frames: 2`` (and no limit in seconds): a track survives two
      sampled frames without a match, whatever the sampling stride;

    then ``options.tracking`` on top. Raising ``high_score`` alone also raises
    ``new_track_score`` (tracks start on sure instances, weaker ones extend
    them). ``enabled`` and ``publish_tentative`` cannot be changed.

    Raises:
        ValueError: an unknown field, a bad value, or a fixed setting.
    """
    fixed = sorted(k for k in options.tracking if k in _FIXED_TRACKING)
    if fixed:
        raise ValueError(
            f"tracking setting {', '.join(fixed)} cannot be changed for labelling "
            "(--min-track-frames 1 turns tracking off)"
        )
    threshold = options.score_threshold
    values: dict[str, Any] = {
        "high_score": threshold,
        "low_score": threshold,
        "new_track_score": threshold,
        "confirm_hits": 1,
        "max_lost_seconds": 3600.0,
        "max_lost_frames": 2,
        **options.tracking,
        **_FIXED_TRACKING,
    }
    if "new_track_score" not in options.tracking:
        values["new_track_score"] = max(threshold, float(values["high_score"]))
    if "low_score" not in options.tracking:
        values["low_score"] = min(threshold, float(values["high_score"]))
    try:
        return TrackingConfig.model_validate(values)
    except Exception as exc:  # pydantic's ValidationError, said in one line
        raise ValueError(f"tracking settings {dict(options.tracking)}: {exc}") from None


class LabelTracker:
    """The service's tracker over the sampled frames of one video.

    ``tracker(seq, pts, instances)`` returns the track id of each instance
    (int64, ``-1`` for none), for frames in order; ``pts`` in seconds.
    """

    def __init__(self, class_names: Sequence[str], settings: TrackingConfig) -> None:
        from streamseg.track.alerts import AlertsConfig
        from streamseg.track.stage import build_tracking_stage

        self.stage = build_tracking_stage(settings, AlertsConfig(enabled=False), class_names)

    def __call__(self, seq: int, pts: float, inst: Instances) -> Tensor:
        frame = Frame(camera_id="label", seq=seq, pts=pts, capture_time=pts, image=_NO_PIXELS)
        result, _events = self.stage.process(FrameResult(frame, inst))
        ids = result.instances.track_ids
        return ids if ids is not None else torch.full((len(inst),), -1, dtype=torch.int64)

    def close(self) -> None:
        self.stage.close()


_NO_PIXELS = torch.zeros((0, 0, 3), dtype=torch.uint8)  # the tracker needs no pixels


def confirmed(track_ids: Sequence[Tensor], min_frames: int) -> list[Tensor]:
    """Per frame, ``bool (N,)``: the instances whose track has an instance in
    at least ``min_frames`` of the frames (``-1``: no track, never kept)."""
    hits = Counter(int(i) for ids in track_ids for i in ids.unique() if int(i) >= 0)
    return [
        torch.tensor([int(i) >= 0 and hits[int(i)] >= min_frames for i in ids], dtype=torch.bool)
        for ids in track_ids
    ]


def label_videos(
    videos: Sequence[Path],
    *,
    model: nn.Module,
    class_names: Sequence[str],
    out_dir: Path,
    options: LabelOptions,
) -> LabelResult:
    """Label ``videos`` with ``model``; write ``out_dir/annotations.json`` + ``images/``."""
    keep_names = [n for n in class_names[1:] if not options.classes or n in options.classes]
    unknown = [c for c in options.classes if c not in class_names]
    if unknown:
        raise ValueError(f"the teacher has no class {unknown}; it knows {list(class_names[1:])}")
    category_of = {class_names.index(n): i + 1 for i, n in enumerate(keep_names)}
    images: list[dict[str, Any]] = []
    annotations: list[dict[str, Any]] = []
    stats: Counter[str] = Counter()
    for video in videos:
        imgs, anns = _label_one(
            video,
            model,
            class_names,
            category_of,
            out_dir,
            options,
            first_id=len(images) + 1,
            stats=stats,
        )
        images += imgs
        annotations += anns
    for i, ann in enumerate(annotations):
        ann["id"] = i + 1
    categories = [{"id": i + 1, "name": n} for i, n in enumerate(keep_names)]
    path = out_dir / "annotations.json"
    path.write_text(
        json.dumps(
            {
                "images": images,
                "annotations": annotations,
                "categories": categories,
                "info": {
                    "description": "streamseg label pseudo-labels",
                    "options": dataclasses.asdict(options),
                },
            }
        )
    )
    return LabelResult(
        path, len(images), len(annotations), stats["unconfirmed"], stats["low_score"]
    )


def _label_one(
    video: Path,
    model: nn.Module,
    class_names: Sequence[str],
    category_of: dict[int, int],
    out_dir: Path,
    options: LabelOptions,
    *,
    first_id: int,
    stats: Counter[str],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    tracking = options.min_track_frames > 1
    tracker = LabelTracker(class_names, label_tracking(options)) if tracking else None
    frames: dict[int, tuple[int, float, Tensor]] = {}

    def pairs() -> Iterator[tuple[int, Tensor]]:
        for n, (index, t, image) in enumerate(
            sample_frames(
                video, every=options.every, fps=options.fps, max_frames=options.max_frames
            )
        ):
            frames[n] = (index, t, image)
            yield n, image

    images: list[dict[str, Any]] = []
    pending: list[list[dict[str, Any]]] = []  # per frame: annotations (RLE masks)
    frame_ids: list[Tensor] = []  # per frame: their track ids
    for n, inst in predict(
        model,
        pairs(),
        batch_size=options.batch_size,
        device=options.device,
        precision=options.precision,
    ):
        index, t, image = frames.pop(n)
        inst = inst.to("cpu")
        keep = inst.scores >= options.score_threshold
        stats["low_score"] += int((~keep).sum())
        inst = inst[keep]
        inst = inst[
            torch.tensor([int(lab) in category_of for lab in inst.labels], dtype=torch.bool)
        ]
        ids = tracker(n, t, inst) if tracker else torch.full((len(inst),), -1, dtype=torch.int64)
        image_id = first_id + len(images)
        name = f"images/{video.stem}_{index:06d}.png"
        write_png(out_dir / name, image)
        images.append(
            {
                "id": image_id,
                "file_name": name,
                "height": int(image.shape[0]),
                "width": int(image.shape[1]),
                "video": str(video),
                "frame_index": index,
                "pts": round(t, 6),
            }
        )
        pending.append(_annotations(image_id, inst, category_of, ids))
        frame_ids.append(ids)
    if tracker is None:
        annotations = [a for anns in pending for a in anns]
    else:
        tracker.close()
        annotations = []
        for anns, ok in zip(pending, confirmed(frame_ids, options.min_track_frames), strict=True):
            annotations += [a for a, keep in zip(anns, ok.tolist(), strict=True) if keep]
        stats["unconfirmed"] += sum(len(anns) for anns in pending) - len(annotations)
    log.info("%s: %d frames, %d instances", video, len(images), len(annotations))
    return images, annotations


def _annotations(
    image_id: int, inst: Instances, category_of: dict[int, int], track_ids: Tensor
) -> list[dict[str, Any]]:
    if not len(inst):
        return []
    masks = inst.frame_masks()
    assert masks is not None, "the teacher gives no masks"
    rles = _masks_to_rle(masks)
    out = []
    for i, rle in enumerate(rles):
        x1, y1, x2, y2 = (float(v) for v in inst.boxes[i])
        out.append(
            {
                "image_id": image_id,
                "category_id": category_of[int(inst.labels[i])],
                "bbox": [x1, y1, x2 - x1, y2 - y1],
                "area": float(masks[i].sum()),
                "iscrowd": 0,
                "segmentation": rle,
                "score": float(inst.scores[i]),
                "track_id": int(track_ids[i]),
            }
        )
    return out
