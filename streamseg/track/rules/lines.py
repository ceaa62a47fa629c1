"""Line rules: ``line_in`` / ``line_out`` crossings with running counts.

Each (track, line) pair has a side state machine:

* ``side``: the side of the line (``-1`` left, ``+1`` right, ``0`` not
  known yet) where the anchor was last seen *clearly*, i.e. more than
  ``band`` pixels from the infinite line;
* ``pending``: the anchor's path touched the finite segment since it last
  stood clearly on ``side``.

Each observation moves the anchor from its previous observed position to
the new one (frames dropped in between do not matter: the path is the
segment between the two observed anchors). If that path touches the
segment, ``pending`` is set. When the new anchor is clearly on a side: on
the other side with ``pending`` set, it is a crossing; on the other side
without it (the object went round the end of the line), the side changes
silently; on the same side, ``pending`` is cleared. So jitter inside the
band never counts, a path that only passes beyond the line's ends never
counts, and touching an endpoint counts (closed segment).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from streamseg.geometry import EPS, Segment
from streamseg.track.rules.base import RuleBase
from streamseg.track.rules.idstate import IdState
from streamseg.track.rules.membership import pick_rows
from streamseg.track.view import TrackView
from streamseg.types import Event

if TYPE_CHECKING:
    from streamseg.track.rules.context import RuleContext

__all__ = ["LineRule"]


class LineRule(RuleBase):
    """Counts crossings of ``line`` in its ``in`` direction and back.

    Args:
        line: the line's name; ``segment`` its geometry in pixels.
        in_sign: ``+1`` when arriving on the right-hand side is ``line_in``
            (``in_side: right``), ``-1`` for the left.
        anchor: box anchor name; ``band``: hysteresis in pixels.
        events: kinds to emit (``line_in``, ``line_out``).
    """

    def __init__(
        self,
        *,
        line: str,
        segment: Segment,
        in_sign: int,
        anchor: str,
        band: float,
        events: list[str],
        **common: Any,
    ) -> None:
        super().__init__(**common)
        self.line = line
        self.segment = segment
        self.in_sign = in_sign
        self.anchor = anchor
        self.band = band
        self.kinds = set(events)
        # Per track: (side + 1) + 4 * pending; 3 (side "2") for a track not seen yet.
        self.state = IdState(default=3)
        self.counts = {"line_in": 0, "line_out": 0}
        # Signed distance to the line as one product: right-hand normal, offset.
        self._normal = np.array([-segment.d[1], segment.d[0]]) / segment.length
        self._offset = float(self._normal @ segment.p)

    @classmethod
    def from_config(cls, rule: Any, context: RuleContext) -> LineRule:
        segment, in_sign = context.line(rule.line)
        return cls(
            line=rule.line,
            segment=segment,
            in_sign=in_sign,
            anchor=rule.anchor,
            band=rule.band,
            events=list(rule.events),
            **context.common,
        )

    def crossings(self) -> tuple[str, int, int]:
        """``(line, in, out)``: crossings into ``in_side`` and back, counted so far."""
        return self.line, self.counts["line_in"], self.counts["line_out"]

    def update(self, view: TrackView) -> list[Event]:
        if len(view.removed_ids):
            self.state.drop(view.removed_ids)
            self.forget(view.removed_ids)
        idx = self.eligible(view)
        if len(idx) == 0:
            return []
        every = len(idx) == len(view)
        ids = view.ids if every else view.ids[idx]
        slots = self.state.find(ids)
        code = self.state.get(ids, slots)
        start = view.anchors(self.anchor, "prev_boxes")
        end = view.anchors(self.anchor)
        if not every:
            start, end = start[idx], end[idx]
        # Signed distances to the infinite line (NaN for a track's first box).
        d0 = start @ self._normal - self._offset
        d = end @ self._normal - self._offset
        side = code % 4 - 1
        pending = code >= 4
        new = (side == 2).nonzero()[0]
        if len(new):
            # A track new to this rule starts from its previous observation, if any.
            side[new] = np.where(np.abs(d0[new]) > self.band, np.sign(d0[new]), 0)
        # Only a path with ends on both sides of the line (or on it) can touch it.
        near = ((d0 * d <= 0) | (np.abs(d0) <= EPS) | (np.abs(d) <= EPS)).nonzero()[0]
        if len(near):
            pending[near] |= self.segment.touched_by(pick_rows(start, near), pick_rows(end, near))
        clear = np.abs(d) > self.band
        to = np.sign(d).astype(np.int8)
        crossed = (clear & pending & (side != 0) & (to != side)).nonzero()[0]
        side = np.where(clear, to, side)
        pending &= ~clear
        self.state.set(ids, (side + 1) + 4 * pending.view(np.int8), slots)
        events: list[Event] = []
        for k in crossed.tolist():
            kind = "line_in" if int(to[k]) == self.in_sign else "line_out"
            events += self._crossing(kind, view, int(idx[k]))
        return events

    def _crossing(self, kind: str, view: TrackView, i: int) -> list[Event]:
        if not self.cooled(int(view.ids[i]), kind, view.frame.time):
            return []
        self.counts[kind] += 1
        if kind not in self.kinds:
            return []
        extra = {"in": self.counts["line_in"], "out": self.counts["line_out"]}
        return [self.event(kind, view, i, line=self.line, count=self.counts[kind], extra=extra)]
