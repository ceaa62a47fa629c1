"""A pass-through "tracker" for instances that already carry track ids.

Used when ``tracking.enabled`` is false (and by ``streamseg replay
--recorded-ids``): the ids found in ``Instances.track_ids`` are taken as
confirmed tracks so the alert rules can run on them. An id unseen for
longer than ``max_lost_seconds`` is dropped (reported as removed).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray
from torch import Tensor

from streamseg.track.tracker import TrackerOutput
from streamseg.track.view import FrameInfo, TrackView
from streamseg.types import MaskCrops

__all__ = ["GivenIdTracker"]

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]


class _Seen:
    __slots__ = ("box", "first_box", "first_seen", "label", "last_seen", "score")

    def __init__(self, box: F64, label: int, score: float, now: float) -> None:
        self.first_box = box
        self.box = box
        self.first_seen = now
        self.last_seen = now
        self.label = label
        self.score = score


class GivenIdTracker:
    """Keeps what the rules need about each given id (first/previous box, times)."""

    def __init__(self, *, max_lost_seconds: float) -> None:
        self.max_lost_seconds = max_lost_seconds
        self.seen: dict[int, _Seen] = {}

    def __len__(self) -> int:
        return len(self.seen)

    def update(
        self,
        frame: FrameInfo,
        boxes: F64,
        scores: F64,
        labels: I64,
        track_ids: I64 | None,
        masks: Tensor | MaskCrops | None = None,
    ) -> TrackerOutput:
        """One frame; ``track_ids (N,)`` as given (``-1``/``None``: untracked)."""
        n = len(boxes)
        ids = np.full(n, -1, np.int64) if track_ids is None else track_ids.astype(np.int64)
        now = frame.time
        gone = [t for t, s in self.seen.items() if now - s.last_seen > self.max_lost_seconds + 1e-6]
        removed = [(t, self.seen.pop(t)) for t in gone if t not in set(ids.tolist())]
        rows: list[int] = []
        prev: list[F64] = []
        taken: set[int] = set()
        for i, tid in enumerate(ids.tolist()):
            if tid < 0 or tid in taken:
                continue
            taken.add(tid)
            s = self.seen.get(tid)
            if s is None:
                s = self.seen[tid] = _Seen(boxes[i], int(labels[i]), float(scores[i]), now)
                prev.append(np.full(4, np.nan))
            else:
                prev.append(s.box)
                s.box, s.last_seen = boxes[i], now
                s.label, s.score = int(labels[i]), float(scores[i])
            rows.append(i)
        det = np.array(rows, np.int64)
        tids = ids[det]
        view = TrackView(
            frame=frame,
            ids=tids,
            det_index=det,
            boxes=boxes[det].reshape(-1, 4),
            prev_boxes=np.array(prev).reshape(-1, 4),
            first_boxes=np.array([self.seen[t].first_box for t in tids.tolist()]).reshape(-1, 4),
            first_seen=np.array([self.seen[t].first_seen for t in tids.tolist()], np.float64),
            labels=labels[det].astype(np.int64),
            scores=scores[det].astype(np.float64),
            det_scores=scores[det].astype(np.float64),
            masks=masks,
            removed_ids=np.array([t for t, _ in removed], np.int64),
            removed_boxes=np.array([s.box for _, s in removed]).reshape(-1, 4),
            removed_labels=np.array([s.label for _, s in removed], np.int64),
            removed_scores=np.array([s.score for _, s in removed], np.float64),
        )
        out = np.full(n, -1, np.int64)
        out[det] = tids
        return TrackerOutput(out, view)
