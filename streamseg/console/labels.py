"""Placing the overlay's text labels so that none covers another and none leaves the frame.

``LabelLayout`` takes labels in order of importance, each with the spots
where it would be best (a box's top-left corner above it, a zone's
vertices, a line's middle, ...), and puts each in the first spot that is
inside the frame and free. When none of them is, it searches outwards from
the first in rings of growing radius; a label that still finds no room is
left out (``place`` returns ``None``), never drawn over another. The layout
is plain geometry, shared by the console's live view, the alert snapshots
and ``streamseg render``, and tested on its own: the boxes it returns are
exactly what is drawn.

A spot is ``(x, y, fx, fy)``: the label's top left goes to ``(x + fx * w,
y + fy * h)`` for a label ``w`` x ``h`` pixels big, so ``(x, y, 0, -1)``
puts it just above ``(x, y)`` and ``(x, y, -1, 0)`` just left of it.

Example:
    >>> layout = LabelLayout(100, 40, measure=lambda text: (6 * len(text), 10))
    >>> a = layout.place("first", [(0, 0, 0, 0)], bg=(0, 0, 0))
    >>> b = layout.place("second", [(0, 0, 0, 0)], bg=(0, 0, 0))
    >>> a.box, b.box
    ((0, 0, 32, 12), (0, 12, 38, 24))
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator, Sequence

__all__ = ["Label", "LabelLayout", "Spot", "fit_text", "overlaps"]

RGB = tuple[int, int, int]
Box = tuple[int, int, int, int]  # left, top, right, bottom: pixels, right and bottom excluded
Measure = Callable[[str], tuple[int, int]]  # text -> (width, height) in pixels
Spot = tuple[float, float, float, float]  # x, y and the label's offset in its own sizes

PAD = 1  # pixels of background around the text
RINGS = 12  # how far the search goes from a label's first spot, in label heights


@dataclasses.dataclass(frozen=True)
class Label:
    """One placed label: its text drawn at ``box``'s top left, inside ``PAD`` pixels."""

    text: str
    box: Box
    bg: RGB
    fg: RGB = (255, 255, 255)


def overlaps(a: Box, b: Box) -> bool:
    """Whether two boxes share at least one pixel."""
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def fit_text(text: str, width: int, measure: Measure) -> str:
    """``text``, cut (ending in ``~``) until it is at most ``width`` pixels wide."""
    if measure(text)[0] <= width:
        return text
    while len(text) > 1 and measure(text + "~")[0] > width:
        text = text[:-1]
    return text + "~" if text else ""


class LabelLayout:
    """Labels placed one at a time in a ``width`` x ``height`` frame, never overlapping.

    Args:
        width / height: the frame, pixels.
        measure: ``text -> (width, height)`` of the drawn text, pixels.
        reserved: areas no label may cover (none by default).
    """

    def __init__(
        self, width: int, height: int, *, measure: Measure, reserved: Sequence[Box] = ()
    ) -> None:
        self.width, self.height, self.measure = width, height, measure
        self.labels: list[Label] = []
        self._taken: list[Box] = list(reserved)

    def place(
        self,
        text: str,
        spots: Sequence[Spot],
        *,
        bg: RGB,
        fg: RGB = (255, 255, 255),
    ) -> Label | None:
        """Put ``text`` with its top left at the first free spot of ``spots`` (or near
        the first); ``None`` when there is no room for it anywhere near."""
        text = fit_text(text, self.width - 2 * PAD, self.measure)
        if not text or not spots:
            return None
        tw, th = self.measure(text)
        w, h = tw + 2 * PAD, th + 2 * PAD
        if w > self.width or h > self.height:
            return None
        for x, y in self._candidates(spots, w, h):
            box = (x, y, x + w, y + h)
            if not any(overlaps(box, t) for t in self._taken):
                label = Label(text, box, bg, fg)
                self.labels.append(label)
                self._taken.append(box)
                return label
        return None

    def _candidates(self, spots: Sequence[Spot], w: int, h: int) -> Iterator[tuple[int, int]]:
        """The spots (moved inside the frame), then rings around the first one."""
        for x, y, fx, fy in spots:
            yield self._inside(x + fx * w, y + fy * h, w, h)
        x0, y0 = spots[0][0] + spots[0][2] * w, spots[0][1] + spots[0][3] * h
        for ring in range(1, RINGS + 1):
            steps = 8 * ring
            for k in range(steps):
                angle = 2 * math.pi * k / steps
                yield self._inside(
                    x0 + math.cos(angle) * ring * w / 2, y0 + math.sin(angle) * ring * h, w, h
                )

    def _inside(self, x: float, y: float, w: int, h: int) -> tuple[int, int]:
        return (
            int(min(max(round(x), 0), self.width - w)),
            int(min(max(round(y), 0), self.height - h)),
        )
