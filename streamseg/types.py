"""The data that flows between streamseg's stages.

Every stage takes and returns only these types:

``Frame`` -> ``FrameBatch`` -> (segment) -> ``Instances`` per frame, wrapped with
its frame in a ``FrameResult`` -> (track) ``Instances`` with ``track_ids`` and
``Track`` state -> (alert) ``Event``.

Conventions used everywhere:

* images are ``uint8`` tensors laid out ``H x W x 3`` in RGB order, on the CPU
  or on a GPU;
* boxes are ``xyxy`` in frame pixels (float32), ``x2``/``y2`` exclusive edges;
* times are seconds (floats): ``pts`` is the stream's presentation time,
  ``capture_time`` is the wall clock (``time.time()``) at which the frame was
  read from its source, ``camera_time`` the camera's own wall clock when the
  source reports one (RTCP sender reports), else ``None``;
* class labels are integers ``>= 1`` (0 is background), names come from the
  model's ``class_names``;
* masks are ``bool (N, H, W)`` at frame resolution, or ``MaskCrops``: each
  mask as the crop of its box (the serving path's form, whose cost follows
  the objects' area); ``MaskCrops.to_masks()`` gives the frame-size form.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from streamseg.regions import Regions

__all__ = [
    "Event",
    "Frame",
    "FrameBatch",
    "FrameResult",
    "Instances",
    "MaskCrops",
    "Regions",
    "Track",
    "TrackState",
    "frame_masks",
    "mask_grid",
]


@dataclasses.dataclass(frozen=True)
class Frame:
    """One decoded video frame of one camera.

    Attributes:
        camera_id: the camera's id from ``pipeline.yaml``.
        seq: per-camera sequence number, counting every frame the source
            produced (dropped ones included), starting at 0.
        pts: presentation timestamp in seconds (stream clock), or ``None``.
        capture_time: wall-clock time (unix seconds) when the frame was read.
        image: ``uint8`` tensor ``(H, W, 3)``, RGB, on any device.
        camera_time: the camera's wall clock for this frame (unix seconds)
            when known from RTCP sender reports, else ``None``.
        trace: opaque telemetry context carried from ingest to publish
            (e.g. a W3C ``traceparent`` mapping); empty when tracing is off.
    """

    camera_id: str
    seq: int
    pts: float | None
    capture_time: float
    image: Tensor
    camera_time: float | None = None
    trace: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        img = self.image
        if img.dtype != torch.uint8 or img.dim() != 3 or img.shape[2] != 3:
            raise ValueError(
                f"Frame.image must be uint8 (H, W, 3) RGB, got {tuple(img.shape)} {img.dtype}"
            )

    @property
    def height(self) -> int:
        return int(self.image.shape[0])

    @property
    def width(self) -> int:
        return int(self.image.shape[1])

    @property
    def size(self) -> tuple[int, int]:
        """``(height, width)`` in pixels."""
        return (self.height, self.width)

    def without_image(self) -> Frame:
        """A copy that drops the pixels (kept small once segmentation is done)."""
        return dataclasses.replace(self, image=_EMPTY_IMAGE)


_EMPTY_IMAGE = torch.zeros((0, 0, 3), dtype=torch.uint8)


@dataclasses.dataclass(frozen=True)
class FrameBatch:
    """Frames of one or more cameras that go through one forward pass.

    Frames may differ in size; the segmenter's preprocessing resizes and pads
    them into one tensor. ``enqueue_times`` (optional, seconds, monotonic)
    lets the runtime measure queueing latency.
    """

    frames: tuple[Frame, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.frames, tuple):
            object.__setattr__(self, "frames", tuple(self.frames))

    def __len__(self) -> int:
        return len(self.frames)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.frames)

    @property
    def images(self) -> list[Tensor]:
        """The ``uint8 (H, W, 3)`` images, in batch order."""
        return [f.image for f in self.frames]

    @property
    def camera_ids(self) -> list[str]:
        return [f.camera_id for f in self.frames]


class MaskCrops:
    """``N`` bool masks of one frame, each kept as the crop of a box outside which it is 0.

    Attributes:
        image_size: ``(H, W)`` of the frame, pixels.
        boxes: ``int64 (N, 4)`` ``x0, y0, x1, y1`` (exclusive ends) inside
            the frame, on the CPU.
        crops: ``N`` bool tensors, ``crops[i]`` of shape
            ``(y1 - y0, x1 - x0)`` (any device).

    The crops may instead be given packed, as ``flat``: one bool tensor
    holding every crop's pixels row by row, crop after crop (what a model
    copies back from the GPU in one piece); ``crops`` are then views of it,
    made the first time they are asked for.

    Indexing (int, slice, index or bool tensor, list) and ``len()`` work as
    on an ``(N, H, W)`` tensor, and so does ``shape``; ``to_masks()`` pastes
    the crops into frame-size masks for whoever needs them.

    Example:
        >>> crops = MaskCrops(image_size=(4, 6), boxes=torch.tensor([[1, 1, 3, 2]]),
        ...                   crops=(torch.tensor([[True, False]]),))
        >>> crops.to_masks()[0].nonzero().tolist()
        [[1, 1]]
    """

    __slots__ = ("_crops", "_flat", "boxes", "image_size")

    def __init__(
        self,
        *,
        image_size: tuple[int, int],
        boxes: Tensor,
        crops: Sequence[Tensor] | None = None,
        flat: Tensor | None = None,
    ) -> None:
        self.image_size = (int(image_size[0]), int(image_size[1]))
        cpu64 = boxes.device.type == "cpu" and boxes.dtype == torch.int64
        self.boxes = boxes if cpu64 else boxes.to("cpu", torch.int64)
        if (crops is None) == (flat is None):
            raise ValueError("MaskCrops takes either crops or flat (the crops packed), not both")
        self._crops = tuple(crops) if crops is not None else None
        self._flat = flat
        if flat is not None:
            self._validate_flat(flat)
        else:
            self._validate()

    @property
    def crops(self) -> tuple[Tensor, ...]:
        """The ``N`` crops, ``crops[i]`` bool ``(y1 - y0, x1 - x0)``."""
        if self._crops is None:
            assert self._flat is not None
            b = self.boxes.numpy()
            shapes = np.stack((b[:, 3] - b[:, 1], b[:, 2] - b[:, 0]), axis=1).tolist()
            parts = self._flat.split([h * w for h, w in shapes])
            self._crops = tuple(p.view(h, w) for p, (h, w) in zip(parts, shapes, strict=True))
        return self._crops

    def _check_boxes(self) -> np.ndarray:
        """The boxes as numpy, after checking they are ``(N, 4)`` inside the frame."""
        h, w = self.image_size
        if self.boxes.dim() != 2 or self.boxes.shape[1] != 4:
            raise ValueError(f"MaskCrops.boxes must be (N, 4), got {tuple(self.boxes.shape)}")
        # numpy, not torch: a torch call on a tiny tensor hands the GIL to
        # other threads (see docs/performance.md), and this runs per frame.
        b: np.ndarray = self.boxes.numpy()
        inside = (b[:, 0] >= 0) & (b[:, 1] >= 0) & (b[:, 2] <= w) & (b[:, 3] <= h)
        inside &= (b[:, 2] >= b[:, 0]) & (b[:, 3] >= b[:, 1])
        if not inside.all():
            i = int((~inside).nonzero()[0][0])
            raise ValueError(
                f"MaskCrops.boxes[{i}] = {b[i].tolist()} is not inside the {h}x{w} frame"
            )
        return b

    def _validate_flat(self, flat: Tensor) -> None:
        b = self._check_boxes()
        need = int(((b[:, 3] - b[:, 1]) * (b[:, 2] - b[:, 0])).sum())
        if flat.dtype != torch.bool or flat.dim() != 1 or flat.shape[0] != need:
            raise ValueError(
                f"MaskCrops.flat must be bool ({need},) for its boxes, got {flat.dtype} "
                f"{tuple(flat.shape)}"
            )

    def _validate(self) -> None:
        if len(self.boxes) != len(self.crops):
            raise ValueError(
                f"MaskCrops.boxes must be ({len(self.crops)}, 4) for {len(self.crops)} crops, "
                f"got {tuple(self.boxes.shape)}"
            )
        b = self._check_boxes()
        sizes = np.stack((b[:, 3] - b[:, 1], b[:, 2] - b[:, 0]), axis=1).tolist()
        for i, (crop, size) in enumerate(zip(self.crops, sizes, strict=True)):
            if crop.dtype != torch.bool or list(crop.shape) != size:
                raise ValueError(
                    f"MaskCrops.crops[{i}] must be bool {tuple(size)} for its box, "
                    f"got {crop.dtype} {tuple(crop.shape)}"
                )

    @classmethod
    def from_masks(cls, masks: Tensor) -> MaskCrops:
        """Crops of ``(N, H, W)`` bool masks, each to its set pixels' bounding box."""
        n, h, w = masks.shape
        masks = masks.bool()
        rows, cols = masks.any(2), masks.any(1)
        boxes = torch.zeros((n, 4), dtype=torch.int64)
        crops = []
        for i in range(n):
            ys, xs = rows[i].nonzero(), cols[i].nonzero()
            if ys.numel() == 0:
                crops.append(masks.new_zeros((0, 0)))
                continue
            y0, y1, x0, x1 = int(ys[0]), int(ys[-1]) + 1, int(xs[0]), int(xs[-1]) + 1
            boxes[i] = torch.tensor([x0, y0, x1, y1])
            crops.append(masks[i, y0:y1, x0:x1])
        return cls(image_size=(h, w), boxes=boxes, crops=crops)

    def __len__(self) -> int:
        return int(self.boxes.shape[0])

    @property
    def shape(self) -> tuple[int, int, int]:
        """``(N, H, W)``: the shape of :meth:`to_masks`."""
        return (len(self), *self.image_size)

    @property
    def device(self) -> torch.device:
        if self._flat is not None:
            return self._flat.device
        return self.crops[0].device if self.crops else torch.device("cpu")

    def __getitem__(self, index: int | slice | Tensor | Sequence[int]) -> MaskCrops:
        if isinstance(index, int):
            index = [index]
        if isinstance(index, slice):
            rows = list(range(len(self.crops)))[index]
        else:
            picked = torch.as_tensor(index)
            if picked.dtype == torch.bool:
                picked = picked.nonzero().flatten()
            rows = [r + len(self.crops) if r < 0 else r for r in picked.tolist()]
        return MaskCrops(
            image_size=self.image_size,
            boxes=self.boxes[rows].reshape(-1, 4),
            crops=[self.crops[r] for r in rows],
        )

    def to(self, device: Any) -> MaskCrops:
        """The crops on ``device``, moved in one copy (not one per crop)."""
        target = torch.device(device)
        if not self.crops or self.device == target:
            return self
        flat = torch.cat([c.reshape(-1) for c in self.crops]).to(target)
        parts = flat.split([c.numel() for c in self.crops])
        crops = [p.view(c.shape) for p, c in zip(parts, self.crops, strict=True)]
        return MaskCrops(image_size=self.image_size, boxes=self.boxes, crops=crops)

    def to_masks(self) -> Tensor:
        """The frame-size ``bool (N, H, W)`` masks (zero outside each box)."""
        out = torch.zeros(self.shape, dtype=torch.bool, device=self.device)
        for i, ((x0, y0, x1, y1), crop) in enumerate(
            zip(self.boxes.tolist(), self.crops, strict=True)
        ):
            out[i, y0:y1, x0:x1] = crop
        return out

    def grid(self, stride: int) -> Tensor:
        """``to_masks()[:, s // 2 :: s, s // 2 :: s]`` (``s = stride``) on the CPU, from the crops.

        The coarse masks the tracker's mask IoU and the zones' mask share
        read; each crop gives only the samples that fall in its box.
        """
        s, first = int(stride), int(stride) // 2
        h, w = self.image_size
        out = torch.zeros(
            (len(self.crops), _samples(h, first, s), _samples(w, first, s)), dtype=torch.bool
        )
        for i, ((x0, y0, x1, y1), crop) in enumerate(
            zip(self.boxes.tolist(), self.crops, strict=True)
        ):
            # Sample cells whose pixel first + k * s lies in [start, end).
            gx0, gx1 = _samples(x0, first, s), _samples(x1, first, s)
            gy0, gy1 = _samples(y0, first, s), _samples(y1, first, s)
            if gx1 > gx0 and gy1 > gy0:
                part = crop[first + gy0 * s - y0 :: s, first + gx0 * s - x0 :: s]
                out[i, gy0:gy1, gx0:gx1] = part[: gy1 - gy0, : gx1 - gx0].cpu()
        return out

    @staticmethod
    def cat(items: Sequence[MaskCrops]) -> MaskCrops:
        """The crops of several sets of the same frame size, in order."""
        if not items:
            raise ValueError("MaskCrops.cat needs at least one item")
        size = items[0].image_size
        if any(i.image_size != size for i in items):
            raise ValueError("MaskCrops.cat: all items must have the same image_size")
        return MaskCrops(
            image_size=size,
            boxes=torch.cat([i.boxes for i in items]),
            crops=[c for i in items for c in i.crops],
        )

    def __repr__(self) -> str:
        return f"MaskCrops(n={len(self)}, image_size={self.image_size})"


def _samples(end: int, first: int, stride: int) -> int:
    """How many of the pixels ``first, first + stride, ...`` lie below ``end``."""
    return max(0, -(-(end - first) // stride))


def frame_masks(masks: Tensor | MaskCrops) -> Tensor:
    """``(N, H, W)`` bool frame-size masks of either form."""
    return masks.to_masks() if isinstance(masks, MaskCrops) else masks


def mask_grid(masks: Tensor | MaskCrops, stride: int) -> Tensor:
    """``masks`` sampled every ``stride`` pixels from ``stride // 2``: ``(N, h, w)`` bool, CPU."""
    if isinstance(masks, MaskCrops):
        return masks.grid(stride)
    s = int(stride)
    return masks[:, s // 2 :: s, s // 2 :: s].to("cpu", torch.bool).contiguous()


class Instances:
    """Object instances found in one frame: parallel tensors of length ``N``.

    Attributes:
        image_size: ``(H, W)`` of the frame, pixels.
        boxes: ``float32 (N, 4)`` ``xyxy`` in frame pixels.
        scores: ``float32 (N,)`` confidence in ``[0, 1]``.
        labels: ``int64 (N,)`` class ids (``>= 1``; 0 is background).
        masks: ``bool (N, H, W)`` at frame resolution, or :class:`MaskCrops`
            (box-local crops, what serving's Mask R-CNN gives), or ``None``
            when the model gives no masks; :meth:`frame_masks` gives the
            frame-size form of either.
        track_ids: ``int64 (N,)`` track id per instance once tracked (``-1``
            for instances no track took), else ``None``.
        regions: the frame's class regions (:class:`Regions`: semantic and
            panoptic models' "stuff"), else ``None``. A frame-level field:
            indexing keeps it whole.

    Supports ``len()``, indexing by an int, slice, index tensor or boolean
    mask (``inst[inst.scores > 0.5]``), and ``Instances.empty(size)``.
    Construction validates shapes; instances are never mutated in place:
    ``replace()`` returns a new object.

    Example:
        >>> inst = Instances.empty((480, 640))
        >>> len(inst)
        0
    """

    __slots__ = ("image_size", "boxes", "scores", "labels", "masks", "track_ids", "regions")

    def __init__(
        self,
        *,
        image_size: tuple[int, int],
        boxes: Tensor,
        scores: Tensor,
        labels: Tensor,
        masks: Tensor | MaskCrops | None = None,
        track_ids: Tensor | None = None,
        regions: Regions | None = None,
    ) -> None:
        self.image_size = (int(image_size[0]), int(image_size[1]))
        self.boxes = boxes
        self.scores = scores
        self.labels = labels
        self.masks = masks
        self.track_ids = track_ids
        self.regions = regions
        self._validate()

    def _validate(self) -> None:
        n = self.boxes.shape[0] if self.boxes.dim() == 2 else -1
        if self.boxes.dim() != 2 or self.boxes.shape[1] != 4:
            raise ValueError(f"Instances.boxes must be (N, 4), got {tuple(self.boxes.shape)}")
        for name in ("scores", "labels", "track_ids"):
            t = getattr(self, name)
            if t is not None and (t.dim() != 1 or t.shape[0] != n):
                raise ValueError(f"Instances.{name} must be ({n},), got {tuple(t.shape)}")
        if self.masks is not None:
            h, w = self.image_size
            if isinstance(self.masks, MaskCrops):
                if self.masks.shape != (n, h, w):
                    raise ValueError(
                        f"Instances.masks must be ({n}, {h}, {w}) crops, got {self.masks.shape}"
                    )
            elif self.masks.dim() != 3 or tuple(self.masks.shape) != (n, h, w):
                raise ValueError(
                    f"Instances.masks must be ({n}, {h}, {w}), got {tuple(self.masks.shape)}"
                )
        if self.regions is not None and self.regions.image_size != self.image_size:
            raise ValueError(
                f"Instances.regions are {self.regions.image_size}, "
                f"not the frame's {self.image_size}"
            )

    @classmethod
    def empty(
        cls, image_size: tuple[int, int], *, with_masks: bool = True, device: Any = "cpu"
    ) -> Instances:
        h, w = image_size
        return cls(
            image_size=image_size,
            boxes=torch.zeros((0, 4), dtype=torch.float32, device=device),
            scores=torch.zeros((0,), dtype=torch.float32, device=device),
            labels=torch.zeros((0,), dtype=torch.int64, device=device),
            masks=torch.zeros((0, h, w), dtype=torch.bool, device=device) if with_masks else None,
        )

    def __len__(self) -> int:
        return int(self.boxes.shape[0])

    def __getitem__(self, index: int | slice | Tensor | Sequence[int]) -> Instances:
        if isinstance(index, int):
            index = slice(index, index + 1 if index != -1 else None)
        elif not isinstance(index, slice | Tensor):
            index = torch.as_tensor(index, dtype=torch.int64, device=self.boxes.device)
        return Instances(
            image_size=self.image_size,
            boxes=self.boxes[index],
            scores=self.scores[index],
            labels=self.labels[index],
            masks=None if self.masks is None else self.masks[index],
            track_ids=None if self.track_ids is None else self.track_ids[index],
            regions=self.regions,
        )

    @property
    def device(self) -> torch.device:
        return self.boxes.device

    def replace(self, **changes: Any) -> Instances:
        """A new ``Instances`` with some fields replaced (the original is untouched)."""
        fields = {name: getattr(self, name) for name in self.__slots__}
        fields.update(changes)
        return Instances(**fields)

    def to(self, device: Any) -> Instances:
        moved: dict[str, Any] = {
            name: (None if getattr(self, name) is None else getattr(self, name).to(device))
            for name in self.__slots__
            if name != "image_size"
        }
        return Instances(image_size=self.image_size, **moved)

    @staticmethod
    def cat(items: Sequence[Instances]) -> Instances:
        """Concatenate instances of the same frame size (``regions``: the first item's)."""
        if not items:
            raise ValueError("Instances.cat needs at least one item")
        size = items[0].image_size
        if any(i.image_size != size for i in items):
            raise ValueError("Instances.cat: all items must have the same image_size")

        def cat_opt(name: str) -> Tensor | None:
            parts = [getattr(i, name) for i in items]
            if any(p is None for p in parts):
                return None
            return torch.cat(parts)

        masks: Tensor | MaskCrops | None = None
        parts = [i.masks for i in items]
        if all(isinstance(p, MaskCrops) for p in parts):
            masks = MaskCrops.cat([p for p in parts if isinstance(p, MaskCrops)])
        elif all(p is not None for p in parts):
            masks = torch.cat([frame_masks(p) for p in parts if p is not None])
        return Instances(
            image_size=size,
            boxes=torch.cat([i.boxes for i in items]),
            scores=torch.cat([i.scores for i in items]),
            labels=torch.cat([i.labels for i in items]),
            masks=masks,
            track_ids=cat_opt("track_ids"),
            regions=items[0].regions,
        )

    def frame_masks(self) -> Tensor | None:
        """The masks as ``bool (N, H, W)`` at frame resolution (crops pasted), or ``None``."""
        return None if self.masks is None else frame_masks(self.masks)

    def __repr__(self) -> str:
        return (
            f"Instances(n={len(self)}, image_size={self.image_size}, "
            f"masks={'yes' if self.masks is not None else 'no'}, "
            f"tracked={'yes' if self.track_ids is not None else 'no'})"
        )


@dataclasses.dataclass(frozen=True)
class FrameResult:
    """A frame (usually without its pixels) and the instances found in it."""

    frame: Frame
    instances: Instances


class TrackState(enum.StrEnum):
    """Life cycle of a track."""

    TENTATIVE = "tentative"
    CONFIRMED = "confirmed"
    LOST = "lost"
    REMOVED = "removed"


@dataclasses.dataclass(frozen=True)
class Track:
    """A snapshot of one tracked object after an update.

    Attributes:
        track_id: id unique within its camera for the life of the process.
        camera_id: the camera.
        state: life-cycle state.
        box: ``(4,)`` float32 ``xyxy`` frame pixels (the last matched box, or
            the motion model's prediction while lost).
        label: smoothed class id.
        score: smoothed confidence.
        first_seen / last_seen: frame ``capture_time`` (seconds) of the first
            and latest matched detection.
        hits: number of frames in which the track was matched.
        mask: the last matched ``bool (H, W)`` mask, or ``None``.
    """

    track_id: int
    camera_id: str
    state: TrackState
    box: Tensor
    label: int
    score: float
    first_seen: float
    last_seen: float
    hits: int = 1
    mask: Tensor | None = None


EVENT_SCHEMA_VERSION = 1


@dataclasses.dataclass(frozen=True)
class Event:
    """One alert produced by a rule.

    Attributes:
        rule: the rule's name from ``pipeline.yaml``.
        kind: what happened: one of ``streamseg.config.alerts.ALERT_KINDS``
            (the rules' registry; docs/events.md lists them).
        camera_id: the camera.
        track_id: the track that caused it (``None`` for crowding).
        label: class id, and ``label_name`` its name.
        zone / line: the zone or line name the rule watches (one of them).
        time: capture wall time (unix seconds) of the frame that triggered it.
        pts: stream time of that frame, seconds, or ``None``.
        frame_seq: the frame's sequence number.
        box: ``[x1, y1, x2, y2]`` frame pixels, or ``None``.
        score: detection confidence, or ``None``.
        mask_rle: COCO RLE ``{"size": [H, W], "counts": str}``, or ``None``.
        count: for crowding the occupancy, for lines the running count of
            the crossing direction; else ``None``.
        extra: rule-specific details (e.g. ``dwell_seconds``).
        snapshot: the path of the snapshot file the console writes for this
            event (shortly after it is published), or ``None`` when the
            console keeps no snapshot of it.
    """

    rule: str
    kind: str
    camera_id: str
    time: float
    frame_seq: int
    track_id: int | None = None
    label: int | None = None
    label_name: str | None = None
    zone: str | None = None
    line: str | None = None
    pts: float | None = None
    box: tuple[float, float, float, float] | None = None
    score: float | None = None
    mask_rle: Mapping[str, Any] | None = None
    count: int | None = None
    extra: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    snapshot: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready message body (see ``schemas/alert.schema.json``)."""
        out: dict[str, Any] = {"schema_version": EVENT_SCHEMA_VERSION, "type": "alert"}
        out.update(dataclasses.asdict(self))
        if out["box"] is not None:
            out["box"] = [float(v) for v in out["box"]]
        out["mask_rle"] = None if self.mask_rle is None else dict(self.mask_rle)
        out["extra"] = dict(self.extra)
        return out
