"""Replay recorded detections through the tracker and alert rules, offline.

Recorded detections are detections messages (``docs/events.md``), read by
``streamseg.client.recording`` from a JSON-lines file or from the Redis
detections streams, as ``(where, message)`` pairs. :func:`replay` turns
each into a ``FrameResult`` (masks decoded from their COCO RLE when the
rules need them), runs a
``TrackingStage`` built from a pipeline's ``tracking:`` and ``alerts:``
sections, and yields the events.

Class names come from the recording (``label`` -> ``label_name``, of
instances and regions), so the rules' ``classes`` and ``region`` refer to
the names the recording used. Recorded ``regions`` (semantic and panoptic
models) become the frame's label map again, so ``region`` and ``coverage``
rules replay too.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch

from streamseg.streams import RecordingError
from streamseg.track.alerts import AlertsConfig
from streamseg.track.config import TrackingConfig
from streamseg.track.rule_kinds import kind_of
from streamseg.track.stage import TrackingStage
from streamseg.types import Event, Frame, FrameResult, Instances, Regions

__all__ = [
    "RecordingError",
    "class_names_of",
    "needs_masks",
    "replay",
    "to_result",
]

log = logging.getLogger("streamseg.replay")

_NO_IMAGE = torch.zeros((0, 0, 3), dtype=torch.uint8)
Messages = Callable[[], Iterator[tuple[str, dict[str, Any]]]]


# -- converting ---------------------------------------------------------------------------


def class_names_of(messages: Iterable[tuple[str, dict[str, Any]]]) -> list[str]:
    """Class names by label id from the recording (``class_<id>`` where a name is unknown)."""
    names: dict[int, str] = {}
    for _, msg in messages:
        for inst in [*msg["instances"], *(msg.get("regions") or ())]:
            label, name = inst.get("label"), inst.get("label_name")
            if isinstance(label, int) and label >= 1 and isinstance(name, str):
                names.setdefault(label, name)
            elif isinstance(label, int) and label >= 1:
                names.setdefault(label, f"class_{label}")
    top = max(names, default=0)
    return ["__background__", *(names.get(i, f"class_{i}") for i in range(1, top + 1))]


def to_result(msg: dict[str, Any], where: str, *, masks: bool, ids: bool) -> FrameResult:
    """One detections message as a ``FrameResult`` (no pixels)."""
    try:
        height, width = int(msg["image"]["height"]), int(msg["image"]["width"])
        items = msg["instances"]
        boxes = torch.tensor([i["box"] for i in items], dtype=torch.float32).reshape(-1, 4)
        scores = torch.tensor([float(i["score"]) for i in items], dtype=torch.float32)
        labels = torch.tensor([int(i["label"]) for i in items], dtype=torch.int64)
        track_ids = None
        if ids:
            track_ids = torch.tensor(
                [-1 if i.get("track_id") is None else int(i["track_id"]) for i in items],
                dtype=torch.int64,
            )
        mask = _masks(items, (height, width)) if masks else None
        frame = Frame(
            camera_id=str(msg["camera"]),
            seq=int(msg["seq"]),
            pts=None if msg.get("pts") is None else float(msg["pts"]),
            capture_time=float(msg["capture_time"]),
            image=_NO_IMAGE,
        )
        inst = Instances(
            image_size=(height, width),
            boxes=boxes,
            scores=scores,
            labels=labels,
            masks=mask,
            track_ids=track_ids,
            regions=_regions(msg.get("regions"), (height, width)),
        )
    except (KeyError, TypeError, ValueError, RuntimeError) as exc:
        raise RecordingError(
            f"{where}: bad detections message: {type(exc).__name__}: {exc}"
        ) from None
    return FrameResult(frame, inst)


def _masks(items: list[dict[str, Any]], size: tuple[int, int]) -> torch.Tensor | None:
    rles = [i.get("mask") for i in items]
    if not any(rles):
        return None
    from streamseg.ops import rle_to_mask

    out = torch.zeros((len(items), *size), dtype=torch.bool)
    for k, rle in enumerate(rles):
        if rle:
            m = rle_to_mask(rle)
            if tuple(m.shape) != size:
                raise ValueError(
                    f"instance {k}: mask size {list(m.shape)} is not the image's {list(size)}"
                )
            out[k] = m
    return out


def _regions(items: list[dict[str, Any]] | None, size: tuple[int, int]) -> Regions | None:
    """The recorded regions as one label map (``None`` when the message has none)."""
    if items is None:
        return None
    from streamseg.ops import rle_to_mask

    label_map = torch.zeros(size, dtype=torch.int16)
    for k, item in enumerate(items):
        m = rle_to_mask(item["mask"])
        if tuple(m.shape) != size:
            raise ValueError(
                f"region {k}: mask size {list(m.shape)} is not the image's {list(size)}"
            )
        label_map[m] = int(item["label"])
    return Regions.from_label_map(label_map)


def needs_masks(tracking: TrackingConfig, alerts: AlertsConfig) -> bool:
    """Whether any setting uses masks: mask IoU, a rule kind that reads them (its row's
    ``masks``: region, coverage) or a rule entry that does (mask-share zones, masks in
    events)."""
    if tracking.enabled and tracking.match == "mask_iou":
        return True
    return any(
        kind_of(rule).masks or rule.uses_masks()
        for cam in alerts.cameras.values()
        for rule in cam.rules
    )


# -- replaying ----------------------------------------------------------------------------


def replay(
    messages: Messages,
    *,
    tracking: TrackingConfig,
    alerts: AlertsConfig,
    masks: bool = True,
    recorded_ids: bool = False,
) -> Iterator[Event]:
    """Events that ``tracking`` and ``alerts`` produce over a recording, in order.

    Args:
        messages: returns a fresh iterator of ``(where, message)`` each call
            (called twice: once for the class names, once to replay).
        masks: decode masks when the settings use them.
        recorded_ids: keep the recording's track ids instead of tracking again.
    """
    if recorded_ids:
        tracking = tracking.model_copy(update={"enabled": False})
    names = class_names_of(messages())
    names += _missing_classes(alerts, names)
    decode = masks and needs_masks(tracking, alerts)
    stage = TrackingStage(tracking=tracking, alerts=alerts, class_names=names)
    try:
        for where, msg in messages():
            result = to_result(msg, where, masks=decode, ids=recorded_ids)
            _, events = stage.process(result)
            yield from events
    finally:
        stage.close()


def _missing_classes(alerts: AlertsConfig, names: list[str]) -> list[str]:
    known = set(names[1:])
    missing: list[str] = []
    for cid, cam in alerts.cameras.items():
        for rule in cam.rules:
            region = rule.region_class()
            for c in [*rule.classes, *([region] if region else [])]:
                if c not in known and c not in missing:
                    log.warning(
                        "replay: class %r (alerts.cameras.%s.%s) never appears in the recording",
                        c,
                        cid,
                        rule.name,
                    )
                    missing.append(c)
    return missing
