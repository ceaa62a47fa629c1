"""``ZoneState``: which tracks are inside a zone, kept once for the rules that share it."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from streamseg.track.rules.idstate import IdState
from streamseg.track.rules.membership import IN, UNKNOWN, Membership
from streamseg.track.view import TrackView

__all__ = ["ZoneState"]

I64 = NDArray[np.int64]


class ZoneState:
    """Which tracks are in a zone, shared by the rules that would keep the same state.

    Rules on one zone with the same membership test (anchor and band, or
    mask share) and the same class and score filters see the same tracks
    go in and out: their inside states (track id -> OUT / IN) are one
    ``IdState``, stepped once per frame (``advance``) and cleared of removed
    tracks once (``drop``); every rule reads the frame's answer.
    """

    def __init__(self, membership: Membership) -> None:
        self.membership = membership
        self.inside = IdState(default=UNKNOWN)
        # The frame's view and answers: each rule calls with the same view.
        self._view: TrackView | None = None
        self._advanced: tuple[NDArray[np.int8], NDArray[np.bool_], I64] | None = None
        self._seen: int | None = None
        self._dropped: NDArray[np.int8] | None = None

    def advance(self, view: TrackView, idx: I64) -> tuple[NDArray[np.int8], NDArray[np.bool_], I64]:
        """Previous and new inside states of tracks ``idx`` of ``view``, and which changed.

        Returns ``prev (K,)`` (-1/0/1), ``now_in (K,)`` bool and ``moved``:
        positions into ``idx`` whose state changed (first sightings
        included). Stores the new states (once per frame).
        """
        self._new_frame(view)
        if self._advanced is None:
            ids = view.ids if len(idx) == len(view) else view.ids[idx]
            slots = self.inside.find(ids)
            prev = self.inside.get(ids, slots)
            now_in = self.membership.step(view, idx, prev)
            # OUT = 0 and IN = 1 are the bool's own bytes. A track seen for the
            # first time (UNKNOWN) is stored either way, so that its next frames
            # use the hysteresis and it is never again "first seen".
            code = now_in.view(np.int8)
            moved = (code != prev).nonzero()[0]
            if len(moved):
                self.inside.set(ids, code, slots)
            if len(view.removed_ids):
                self._seen = self.inside.count(IN)
            self._advanced = (prev, now_in, moved)
        return self._advanced

    def seen(self) -> int:
        """Tracks inside after this frame's observations, before removed tracks leave."""
        if self._seen is None:  # no drop comes between this and the next frame's advance
            self._seen = self.inside.count(IN)
        return self._seen

    def drop(self, view: TrackView) -> NDArray[np.int8]:
        """Forget ``view``'s removed tracks (once per frame); their states before."""
        self._new_frame(view)
        if self._dropped is None:
            self._dropped = self.inside.drop(view.removed_ids)
        return self._dropped

    def _new_frame(self, view: TrackView) -> None:
        if view is not self._view:
            self._view = view
            self._advanced = self._seen = self._dropped = None
