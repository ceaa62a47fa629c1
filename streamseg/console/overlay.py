"""Drawing what the pipeline saw onto the frame it saw it in.

``draw_overlay`` takes one frame's pixels and its tracked instances and
returns a new RGB image with, per instance, the mask filled and outlined in
its track's colour, the box, ``label #id score`` and a short trail of past
positions; the camera's zones and lines with their counts; and a status
badge (camera state, fps). Under the instances, the class regions of
semantic and panoptic models, with their legend (``regions_layer.py``).
``encode_jpeg`` makes the JPEG the console sends.

Labels never cover one another and never leave the frame
(``streamseg.console.labels``): after every shape is drawn, the labels are
placed in order of importance (the status badge, then zone and line labels,
then tracked objects by score, then untracked ones) each in the first free
spot near what it names, and one without room is left out. An untracked
detection scoring under ``OverlayInfo.min_untracked_score`` gets a dim box
and no label; above it, a grey one. ``layout_labels`` returns the placed
labels (what ``draw_overlay`` draws) for tests and other drawers.

Colour rule (tests rely on it): a track's exact colour (``track_color``) is
used only for the mask's outline, which lies inside the mask; boxes,
labels and trails use a darker shade of it, so that a pixel of the exact
colour always sits on the object.

Example:
    >>> import numpy as np
    >>> track_color(7) != track_color(8)
    True
    >>> img = np.zeros((4, 4, 3), dtype=np.uint8)
    >>> encode_jpeg(img, quality=75)[:2]
    b'\\xff\\xd8'
"""

from __future__ import annotations

import colorsys
import dataclasses
import functools
import io
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from PIL import Image, ImageDraw, ImageFont

from streamseg.console.labels import PAD, Label, LabelLayout, Spot
from streamseg.console.regions_layer import draw_legend, legend_rows, paint_regions
from streamseg.track.alerts import CameraAlerts
from streamseg.types import Instances, MaskCrops, Regions

__all__ = [
    "OverlayInfo",
    "draw_overlay",
    "encode_jpeg",
    "layout_labels",
    "render_image",
    "render_jpeg",
    "scale_down",
    "shade",
    "track_color",
]

RGB = tuple[int, int, int]

UNTRACKED: RGB = (200, 200, 200)
DIM: RGB = (110, 110, 110)  # the box of an untracked detection too unsure for a label
WHITE: RGB = (255, 255, 255)
ZONE_COLOR: RGB = (255, 210, 0)
LINE_COLOR: RGB = (0, 230, 255)
FILL_ALPHA = 0.4
# A zone's or line's label tries these sides of each of its anchor points.
_AROUND = ((0.0, 0.0), (-1.0, 0.0), (0.0, -1.0), (-1.0, -1.0))


@dataclasses.dataclass
class OverlayInfo:
    """What is drawn besides the instances.

    Attributes:
        class_names: the model's class names (index 0 is background).
        alerts: the camera's zones and lines (``None``: none).
        trails: ``{track id: [(x, y), ...]}`` past box centres, oldest first, pixels.
        counts: ``{zone name: occupancy}`` and ``{line name: (in, out)}``.
        status: the text of the status badge (state, fps), top left.
        scale: frame pixels per drawn pixel (zones and lines in pixels are
            divided by it; ``render_jpeg`` sets it when it scales down).
        min_untracked_score: an untracked detection scoring less gets a
            dim box and no label (it would only hide tracked objects).
    """

    class_names: Sequence[str] = ()
    alerts: CameraAlerts | None = None
    trails: Mapping[int, Sequence[tuple[float, float]]] = dataclasses.field(default_factory=dict)
    counts: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    status: str = ""
    scale: float = 1.0
    min_untracked_score: float = 0.5


def track_color(track_id: int) -> RGB:
    """A bright colour for a track id; neighbouring ids get distant hues."""
    if track_id < 0:
        return UNTRACKED
    hue = (track_id * 0.618033988749895) % 1.0
    r, g, b = colorsys.hsv_to_rgb(hue, 0.9, 1.0)
    return (round(r * 255), round(g * 255), round(b * 255))


def shade(color: RGB) -> RGB:
    """The darker shade of ``color`` used for boxes, labels and trails."""
    return (color[0] * 3 // 5, color[1] * 3 // 5, color[2] * 3 // 5)


def draw_overlay(image: np.ndarray, instances: Instances, info: OverlayInfo) -> np.ndarray:
    """A copy of ``image`` (``uint8 (H, W, 3)`` RGB) with the overlays drawn.

    ``instances`` are at the frame's resolution (boxes ``xyxy`` pixels,
    masks ``bool (N, H, W)``); ``track_ids`` may be ``None`` (untracked).
    """
    out = image.copy()
    paint_regions(out, instances.regions)  # under the instances
    ids = _track_ids(instances)
    colors = [track_color(t) for t in ids]
    masks = instances.masks
    if isinstance(masks, MaskCrops) and len(instances):
        # Box-local crops: each is painted at its box, never at frame size.
        corners = masks.boxes.tolist()
        for (x0, y0, _, _), crop, color in zip(corners, masks.crops, colors, strict=True):
            _paint_mask(out, crop.detach().to("cpu").numpy(), color, top=y0, left=x0)
    elif isinstance(masks, torch.Tensor) and len(instances):
        for mask, color in zip(masks.detach().to("cpu").numpy(), colors, strict=True):
            _paint_mask(out, mask, color)
    pil = Image.fromarray(out)
    draw = ImageDraw.Draw(pil)
    font = _font()
    _draw_geometry(draw, info, image.shape[:2])
    boxes = instances.boxes.detach().to("cpu").numpy()
    scores = instances.scores.detach().to("cpu").numpy()
    for i, tid in enumerate(ids):
        dark = shade(colors[i]) if tid >= 0 or scores[i] >= info.min_untracked_score else DIM
        trail = info.trails.get(tid) if tid >= 0 else None
        if trail and len(trail) > 1:
            draw.line([tuple(p) for p in trail], fill=dark, width=2)
        x1, y1, x2, y2 = (float(v) for v in boxes[i])
        draw.rectangle((x1, y1, x2, y2), outline=dark, width=1)
    for label in layout_labels(instances, info, image.shape[:2]):
        left, top, right, bottom = label.box
        draw.rectangle((left, top, right - 1, bottom - 1), fill=label.bg)
        draw.text((left + PAD, top + PAD), label.text, fill=label.fg, font=font, anchor="lt")
    draw_legend(draw, font, legend_rows(instances.regions, info.class_names, _measure))
    return np.asarray(pil)


def layout_labels(instances: Instances, info: OverlayInfo, size: tuple[int, int]) -> list[Label]:
    """Every label ``draw_overlay`` draws on a frame of ``size`` ``(H, W)``, placed:
    the status badge, zone and line labels, then objects (tracked first, by score)."""
    h, w = size
    legend = legend_rows(instances.regions, info.class_names, _measure)
    layout = LabelLayout(w, h, measure=_measure, reserved=[legend.box] if legend else [])
    if info.status:
        layout.place(info.status, [(0, 0, 0, 0)], bg=(0, 0, 0))
    for text, spots, bg in _geometry_labels(info, size):
        layout.place(text, spots, bg=bg)
    for text, spots, bg, fg in _object_labels(instances, info):
        layout.place(text, spots, bg=bg, fg=fg)
    return layout.labels


def encode_jpeg(image: np.ndarray, *, quality: int) -> bytes:
    """``uint8 (H, W, 3)`` RGB -> JPEG bytes."""
    buf = io.BytesIO()
    Image.fromarray(image).save(buf, format="JPEG", quality=quality)
    return buf.getvalue()


def render_jpeg(
    image: Any,
    instances: Instances,
    info: OverlayInfo,
    *,
    quality: int,
    max_width: int | None = None,
) -> bytes:
    """``render_image`` as JPEG."""
    return render_image(image, instances, info, quality=quality, max_width=max_width)


def render_image(
    image: Any,
    instances: Instances,
    info: OverlayInfo,
    *,
    quality: int,
    max_width: int | None = None,
    fmt: str = "jpeg",
) -> bytes:
    """``draw_overlay`` then JPEG (or ``fmt="png"``, lossless); ``image`` may be a tensor.

    A frame wider than ``max_width`` is first scaled down by the smallest
    integer factor that fits (pixels averaged by block; masks sampled at the
    blocks' corners), overlays included: drawing costs follow the picture
    sent, not the camera's resolution.
    """
    if max_width is not None and image.shape[1] > max_width:
        image, instances, info = scale_down(image, instances, info, -(-image.shape[1] // max_width))
    pixels = image.detach().to("cpu").numpy() if hasattr(image, "detach") else np.asarray(image)
    drawn = draw_overlay(pixels, instances, info)
    if fmt == "png":
        buf = io.BytesIO()
        Image.fromarray(drawn).save(buf, format="PNG", compress_level=1)
        return buf.getvalue()
    return encode_jpeg(drawn, quality=quality)


def scale_down(
    image: Any, instances: Instances, info: OverlayInfo, k: int
) -> tuple[np.ndarray, Instances, OverlayInfo]:
    """The frame, instances and overlay info at ``1/k`` of the size."""
    pixels = image.detach().to("cpu").numpy() if hasattr(image, "detach") else np.asarray(image)
    small = np.asarray(Image.fromarray(pixels).reduce(k))
    h, w = small.shape[:2]
    masks = instances.frame_masks()
    if masks is not None:
        masks = masks[:, ::k, ::k][:, :h, :w]
    regions = instances.regions
    if regions is not None:
        regions = Regions.from_label_map(regions.label_map[::k, ::k][:h, :w])
    reduced = Instances(
        image_size=(h, w),
        boxes=instances.boxes / k,
        scores=instances.scores,
        labels=instances.labels,
        masks=masks,
        track_ids=instances.track_ids,
        regions=regions,
    )
    trails = {t: [(x / k, y / k) for x, y in pts] for t, pts in info.trails.items()}
    return small, reduced, dataclasses.replace(info, trails=trails, scale=info.scale * k)


def _track_ids(instances: Instances) -> list[int]:
    if instances.track_ids is None:
        return [-1] * len(instances)
    return [int(t) for t in instances.track_ids.detach().to("cpu").tolist()]


def _paint_mask(
    out: np.ndarray, mask: np.ndarray, color: RGB, *, top: int = 0, left: int = 0
) -> None:
    """Blend ``color`` into the mask's pixels and outline it (inside) in the exact colour.

    ``mask`` covers ``out`` from row ``top``, column ``left`` (a crop's box corner).
    """
    if not mask.any():
        return
    ys, xs = np.nonzero(mask)
    y0, y1, x0, x1 = ys.min(), ys.max() + 1, xs.min(), xs.max() + 1
    m = mask[y0:y1, x0:x1]  # work on the set pixels' box, not the frame
    region = out[top + y0 : top + y1, left + x0 : left + x1]
    c = np.asarray(color, dtype=np.float32)
    blended = region[m].astype(np.float32) * (1 - FILL_ALPHA) + c * FILL_ALPHA
    region[m] = blended.astype(np.uint8)
    padded = np.pad(m, 1)
    inner = (
        padded[:-2, 1:-1] & padded[2:, 1:-1] & padded[1:-1, :-2] & padded[1:-1, 2:]
    )  # 4-neighbour erosion
    region[m & ~inner] = color


def _draw_geometry(draw: ImageDraw.ImageDraw, info: OverlayInfo, size: tuple[int, int]) -> None:
    """The zones' outlines and the lines (their labels are placed with the others)."""
    for _name, kind, pts in _shapes(info, size):
        if kind == "zone":
            draw.polygon(pts, outline=ZONE_COLOR, width=2)
        else:
            draw.line(pts, fill=LINE_COLOR, width=2)


def _shapes(
    info: OverlayInfo, size: tuple[int, int]
) -> list[tuple[str, str, list[tuple[float, float]]]]:
    """``(name, "zone" | "line", points in drawn pixels)`` of the camera's geometry."""
    if info.alerts is None:
        return []
    shapes = info.alerts.shapes(size, scale=info.scale)
    out = [(name, "zone", pts) for name, pts in shapes.zones.items()]
    out += [(name, "line", list(pts)) for name, pts in shapes.lines.items()]
    return out


def _geometry_labels(info: OverlayInfo, size: tuple[int, int]) -> list[tuple[str, list[Spot], RGB]]:
    """Zone labels at (or around) their vertices and centre, line labels at their middle,
    ends and quarters: the first of them inside the frame and free wins."""
    out = []
    for name, kind, pts in _shapes(info, size):
        count = info.counts.get(name)
        if kind == "zone":
            text = name if count is None else f"{name}: {count}"
            cx, cy = sum(x for x, _ in pts) / len(pts), sum(y for _, y in pts) / len(pts)
            anchors = [*pts, (cx, cy)]
            bg: RGB = (120, 100, 0)
        else:
            text = name if count is None else f"{name}: in {count[0]} out {count[1]}"
            (x1, y1), (x2, y2) = pts
            anchors = [(x1 + (x2 - x1) * t, y1 + (y2 - y1) * t) for t in (0.5, 0.25, 0.75, 0, 1)]
            bg = (0, 100, 120)
        spots = [(x, y, fx, fy) for x, y in anchors for fx, fy in _AROUND]
        out.append((text, spots, bg))
    return out


def _object_labels(
    instances: Instances, info: OverlayInfo
) -> list[tuple[str, list[Spot], RGB, RGB]]:
    """``label #id score`` above each box (else inside it, below it): tracked ones first,
    by score; untracked ones under ``min_untracked_score`` get none."""
    ids = _track_ids(instances)
    boxes = instances.boxes.detach().to("cpu").numpy()
    labels = instances.labels.detach().to("cpu").numpy()
    scores = instances.scores.detach().to("cpu").numpy()
    order = sorted(range(len(ids)), key=lambda i: (ids[i] < 0, -float(scores[i])))
    out = []
    for i in order:
        tid, score = ids[i], float(scores[i])
        if tid < 0 and score < info.min_untracked_score:
            continue
        name = _class_name(info.class_names, int(labels[i]))
        x1, y1, x2, y2 = (float(v) for v in boxes[i])
        spots: list[Spot] = [(x1, y1, 0, -1), (x1, y1, 0, 0), (x1, y2, 0, 0), (x2, y1, -1, -1)]
        if tid >= 0:
            out.append((f"{name} #{tid} {score:.2f}", spots, shade(track_color(tid)), WHITE))
        else:
            out.append((f"{name} {score:.2f}", spots, (60, 60, 60), UNTRACKED))
    return out


@functools.cache
def _font() -> Any:
    return ImageFont.load_default()


def _measure(text: str) -> tuple[int, int]:
    """Width and height of ``text`` as drawn (anchored at its top left), pixels."""
    left, top, right, bottom = _font().getbbox(text, anchor="lt")
    return math.ceil(right - min(left, 0)), math.ceil(bottom - min(top, 0))


def _class_name(names: Sequence[str], label: int) -> str:
    return names[label] if 0 <= label < len(names) else str(label)
