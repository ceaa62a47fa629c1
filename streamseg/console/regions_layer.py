"""The class-regions layer of the overlays: translucent class colours and a legend.

Semantic and panoptic models give each frame's "stuff" as a label map
(``Instances.regions``). The console's live view, event snapshots and
``streamseg render`` paint it first, under the instance masks: every region
pixel is blended with its class's colour (``REGION_ALPHA``), and a legend in
the bottom-left corner names each class shown with its share of the frame.

A class keeps its colour everywhere (``region_color``): muted, so that the
brighter track colours of instances stand out over it.

Example:
    >>> region_color(3) == region_color(3) != region_color(4)
    True
"""

from __future__ import annotations

import colorsys
import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from PIL import ImageDraw

from streamseg.types import Regions

__all__ = ["REGION_ALPHA", "Legend", "draw_legend", "legend_rows", "paint_regions", "region_color"]

RGB = tuple[int, int, int]
REGION_ALPHA = 0.35
_SWATCH = 9  # legend colour square, pixels


def region_color(label: int) -> RGB:
    """The colour of class ``label``'s regions (a fixed, muted hue per class)."""
    hue = (label * 0.381966011250105 + 0.08) % 1.0
    r, g, b = colorsys.hsv_to_rgb(hue, 0.55, 0.85)
    return (round(r * 255), round(g * 255), round(b * 255))


def _palette(top: int) -> np.ndarray:
    """``float32 (top + 1, 3)`` class colours; row 0 (no region) is unused."""
    return np.array([region_color(i) for i in range(top + 1)], dtype=np.float32)


def paint_regions(out: np.ndarray, regions: Regions | None) -> None:
    """Blend each region pixel of ``out`` (``uint8 (H, W, 3)``, in place) with its class colour.

    ``regions`` must be at ``out``'s size; pixels without a region are left as they are.
    """
    if regions is None or len(regions) == 0:
        return
    labels = regions.label_map.to("cpu").numpy().astype(np.int64)
    where = labels > 0
    colors = _palette(int(regions.labels.max()))[labels[where]]
    out[where] = (out[where] * (1 - REGION_ALPHA) + colors * REGION_ALPHA).astype(np.uint8)


@dataclasses.dataclass(frozen=True)
class Legend:
    """Where the legend goes: ``box`` ``(left, top, right, bottom)`` pixels (exclusive
    ends) and, per row, the region's class and its text, largest region first."""

    box: tuple[int, int, int, int]
    rows: list[tuple[int, str]]
    line: int


def legend_rows(
    regions: Regions | None,
    class_names: Sequence[str],
    measure: Callable[[str], tuple[int, int]],
) -> Legend | None:
    """The legend of ``regions`` in the bottom-left corner, measured with ``measure``
    (``text -> (width, height)``); ``None`` when there are no regions.

    The label layout reserves ``Legend.box`` so that no label covers it.
    """
    if regions is None or len(regions) == 0:
        return None
    h, w = regions.image_size
    total = float(h * w)
    order = sorted(
        zip(regions.labels.tolist(), regions.areas.tolist(), strict=True), key=lambda r: -r[1]
    )
    rows = [(k, f"{_name(class_names, k)} {100 * area / total:.0f}%") for k, area in order]
    sizes = [measure(text) for _, text in rows]
    line = max(th for _, th in sizes) + 3
    width = max(tw for tw, _ in sizes) + _SWATCH + 10
    top = max(0, h - line * len(rows) - 6)
    return Legend((2, top, min(w, 3 + width), h - 1), rows, line)


def draw_legend(draw: ImageDraw.ImageDraw, font: Any, legend: Legend | None) -> None:
    """Draw ``legend`` (see :func:`legend_rows`): a swatch, class name and share per row."""
    if legend is None:
        return
    left, top, right, bottom = legend.box
    draw.rectangle((left, top, right - 1, bottom - 1), fill=(0, 0, 0))
    for k, (label, text) in enumerate(legend.rows):
        y = top + 3 + k * legend.line
        draw.rectangle((5, y + 1, 5 + _SWATCH, y + 1 + _SWATCH), fill=region_color(label))
        draw.text((8 + _SWATCH, y), text, fill=(255, 255, 255), font=font, anchor="lt")


def _name(names: Sequence[str], label: int) -> str:
    return names[label] if 0 <= label < len(names) else str(label)
