"""A ByteTrack-style multi-object tracker for one camera.

Each frame (``ByteTracker.update``):

1. every track's box is predicted to the frame's capture time
   (constant-velocity Kalman filter, ``streamseg/track/kalman.py``);
   tracks unseen for longer than ``max_lost_seconds`` are removed first;
2. detections split by score: *high* (``>= high_score``), *low*
   (``low_score <= s < high_score``), the rest is ignored;
3. one list of overlapping (track, detection) pairs (IoU of box or mask)
   serves every round; a lost track's IoU is the better of its predicted
   box and its last observed box;
4. round 1: confirmed and lost tracks vs high detections (least
   ``match_iou``), optimal assignment;
5. round 2: confirmed and lost tracks still unmatched vs low detections
   (least ``low_match_iou``): a partly hidden object keeps its track;
6. round 3: tentative tracks vs the high detections left (least
   ``tentative_match_iou``); an unmatched tentative track is removed;
7. round 4: lost tracks vs low detections still free, of the same class,
   whose centre is within ``lost_match_distance`` track sizes of the
   predicted or last seen centre (an object coming out from behind
   another shows a small piece that overlaps too little);
8. matched tracks are corrected (a low-score box changes the track's size
   and velocity less, ``score_box_noise``), unmatched confirmed ones become lost;
   detections left with ``score >= new_track_score`` start tentative
   tracks, confirmed after ``confirm_hits`` matched frames.

State is kept as parallel numpy arrays (one row per live track) so every
step is vectorised over tracks. Boxes are xyxy frame pixels, times seconds.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray
from torch import Tensor

from streamseg.track.config import TrackingConfig
from streamseg.track.duplicates import (
    Pairs,
    close_detections,
    copies_of,
    first_reports,
    shadowed,
)
from streamseg.track.kalman import MEASURE_STD, KalmanBoxes
from streamseg.track.matching import (
    MaskGrid,
    mask_iou,
    overlap_pairs,
)
from streamseg.track.rounds import assign_round, inside_share, merge_pairs, near_round
from streamseg.track.state import CONFIRMED, LOST, TENTATIVE, TrackTable
from streamseg.track.view import FrameInfo, TrackView
from streamseg.types import MaskCrops

__all__ = ["CONFIRMED", "LOST", "TENTATIVE", "ByteTracker", "TrackerOutput"]

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]

TIME_EPS = 1e-6  # seconds: slack for float rounding of unix-time differences


class TrackerOutput:
    """``track_ids (N,)`` int64 per detection (-1: none) and the rules' ``view``."""

    __slots__ = ("track_ids", "view")

    def __init__(self, track_ids: I64, view: TrackView) -> None:
        self.track_ids = track_ids
        self.view = view


class ByteTracker:
    """Tracks of one camera.

    Args:
        settings: the ``tracking:`` section.
        num_classes: class ids are ``< num_classes`` (larger ones are accepted
            and widen the vote table).
    """

    def __init__(self, *, settings: TrackingConfig, num_classes: int) -> None:
        self.settings = settings
        self.table = TrackTable(num_classes=max(num_classes, 1))
        self.kalman = KalmanBoxes()
        self.time: float | None = None
        self.next_id = 1
        self._grid: MaskGrid | None = None

    def __len__(self) -> int:
        return len(self.table)

    def update(
        self,
        frame: FrameInfo,
        boxes: F64,
        scores: F64,
        labels: I64,
        masks: Tensor | MaskCrops | None = None,
    ) -> TrackerOutput:
        """Associate one frame's detections.

        Args:
            frame: camera, capture time (seconds) and size of the frame.
            boxes: ``(N, 4)`` float64 xyxy pixels; ``scores (N,)``; ``labels (N,)``.
            masks: ``(N, H, W)`` bool or ``MaskCrops``, used with ``match: mask_iou``.

        Returns:
            the track id of each detection and the view for the alert rules.
        """
        s, t = self.settings, self.table
        dt = 0.0 if self.time is None else max(frame.time - self.time, 0.0)
        self.time = frame.time if self.time is None else max(self.time, frame.time)
        removed = self._expire(frame.time)
        t.new_frame()
        self.kalman.predict(dt, frozen_size=t.state == LOST)
        grid = self._det_grid(frame.image_size, masks)
        high = scores >= s.high_score
        low = (scores >= s.low_score) & ~high
        det_of = np.full(len(t), -1, np.int64)
        taken = np.zeros(len(boxes), bool)

        # One list of overlapping (track, detection) pairs serves all rounds.
        pred = self.kalman.boxes()
        r, c, iou = self._pairs(pred, boxes, labels, grid)
        firm = t.state[r] != TENTATIVE
        fused = scores if s.fuse_score else None
        assign_round(r, c, iou, firm & high[c] & (iou >= s.match_iou), det_of, taken, fused)
        second = firm & low[c]
        if second.any():
            second &= det_of[r] < 0
            gate = iou >= s.low_match_iou
            if s.low_match_inside is not None:
                gate |= inside_share(t, r, c, second & ~gate, pred, boxes, s.low_match_inside)
            assign_round(r, c, iou, second & gate, det_of, taken)
        sure = scores >= min(s.high_score, s.new_track_score)
        third = ~firm & sure[c] & (iou >= s.tentative_match_iou)
        if third.any():
            assign_round(r, c, iou, third & ~taken[c], det_of, taken)

        close = close_detections(boxes, grid, s.duplicate_iou)
        if s.lost_match_distance is not None:
            usable = low & (scores >= s.lost_match_score) & ~copies_of(taken, close)
            near_round(t, labels, s.lost_match_distance, pred, boxes, usable, det_of, taken)

        copies = self._copies(det_of, close)
        det_of[copies] = -1
        matched = (det_of >= 0).nonzero()[0]
        t.det[matched] = det_of[matched]
        self._correct(matched, det_of[matched], frame.time, boxes, scores, labels, grid)
        gone = np.zeros(len(t), bool)
        gone[copies] = True
        removed = removed + self._miss(det_of < 0, gone)
        starters = (~taken & (scores >= max(s.new_track_score, s.low_score))).nonzero()[0]
        starters = first_reports(starters, det_of[matched], scores, close)
        self._start(starters, frame.time, boxes, scores, labels, grid)
        return self._output(frame, len(boxes), masks, scores, removed)

    # -- steps ---------------------------------------------------------------
    def _expire(self, now: float) -> list[tuple[int, F64, int, float]]:
        """Remove lost tracks unseen for longer than ``max_lost_seconds`` (before matching)."""
        t = self.table
        return self._remove(
            (t.state == LOST) & ((now - t.last_seen) > self.settings.max_lost_seconds + TIME_EPS)
        )

    def _miss(
        self, unmatched: NDArray[np.bool_], copies: NDArray[np.bool_]
    ) -> list[tuple[int, F64, int, float]]:
        """Unmatched tracks: confirmed ones become lost; tentative ones and ``copies`` go."""
        t = self.table
        t.misses[unmatched] += 1
        t.state[unmatched & (t.state == CONFIRMED)] = LOST
        drop = (unmatched & (t.state == TENTATIVE)) | copies
        cap = self.settings.max_lost_frames
        if cap is not None:
            drop |= (t.state == LOST) & (t.misses > cap)
        return self._remove(drop)

    def _remove(self, drop: NDArray[np.bool_]) -> list[tuple[int, F64, int, float]]:
        if not drop.any():
            return []
        t = self.table
        gone = [
            (int(t.ids[i]), t.last_box[i].copy(), int(t.label(int(i))), float(t.score[i]))
            for i in (drop & (t.state != TENTATIVE)).nonzero()[0]
        ]
        keep = ~drop
        t.select(keep)
        self.kalman.select(keep)
        return gone

    def _copies(self, det_of: I64, close: Pairs) -> I64:
        """Rows of tracks that follow a second report of an older track's object.

        See :func:`streamseg.track.duplicates.shadowed`: a track shadowed in
        each of the last ``duplicate_frames`` frames is such a copy.
        """
        t = self.table
        t.shadowed = np.where(shadowed(det_of, close, t.ids), t.shadowed + 1, 0)
        return (t.shadowed >= self.settings.duplicate_frames).nonzero()[0]

    def _det_grid(self, size: tuple[int, int], masks: Tensor | MaskCrops | None) -> Tensor | None:
        if self.settings.match != "mask_iou" or masks is None:
            return None
        if self._grid is None:
            self._grid = MaskGrid(size, self.settings.mask_iou_resolution)
        return self._grid.reduce(masks)

    def _pairs(
        self, pred: F64, boxes: F64, labels: I64, grid: Tensor | None
    ) -> tuple[I64, I64, F64]:
        """Overlapping (track row, detection) pairs and their IoU, for every round.

        A lost track counts the better of its predicted and its last
        observed box: its motion estimate is least reliable after an
        occlusion (the visible part of a hiding object moves and shrinks
        oddly), and an object that stopped behind something is found where
        it was last seen. With ``class_aware``, pairs of different classes
        are left out.
        """
        t = self.table
        r, c, iou = overlap_pairs(pred, boxes)
        lost = (t.state == LOST).nonzero()[0]
        if len(lost):
            r2, c2, iou2 = overlap_pairs(t.last_box[lost], boxes)
            r, c, iou = merge_pairs(r, c, iou, lost[r2], c2, iou2)
        if grid is not None:
            iou = self._mask_iou(pred, r, c, iou, grid)
        if self.settings.class_aware:
            same = (t.labels()[r] == labels[c]).nonzero()[0]
            r, c, iou = r[same], c[same], iou[same]
        return r, c, iou

    def _mask_iou(self, pred: F64, r: I64, c: I64, iou: F64, grid: Tensor) -> F64:
        """Mask IoU of the box-overlapping pairs ``(r, c)`` whose track has a mask."""
        t = self.table
        assert self._grid is not None
        if t.grid is None:
            return iou
        has = t.has_grid[r]
        if not has.any():
            return iou
        tr = r[has]
        centre = (pred[tr, :2] + pred[tr, 2:]) / 2
        shifts = (centre - t.grid_xy[tr]) / self._grid.stride
        track_masks = t.grid[torch.from_numpy(tr)]
        m = mask_iou(track_masks, shifts, grid, np.arange(len(tr)), c[has])
        out = iou.copy()
        out[has] = m
        return out

    def _correct(
        self,
        rows: I64,
        dets: I64,
        now: float,
        boxes: F64,
        scores: F64,
        labels: I64,
        grid: Tensor | None,
    ) -> None:
        s, t = self.settings, self.table
        box, score = boxes[dets], scores[dets]
        self.kalman.update(rows, box, self._shape_std(score))
        t.observe(rows, box, score, labels[dets], now, s)
        t.state[rows] = np.where(t.hits[rows] >= s.confirm_hits, CONFIRMED, t.state[rows])
        t.state[rows[t.state[rows] == LOST]] = CONFIRMED
        if grid is not None:
            t.set_grid(rows, grid[dets], box)

    def _shape_std(self, scores: F64) -> F64 | None:
        """Kalman noise of matched boxes' sizes and motion, in box sizes, from their scores.

        ``MEASURE_STD + score_box_noise * (1 - score) ** 2``: a detector is
        less sure of a partly hidden object, whose box is only its visible
        piece (shrunken, its centre shifted). Such a box should barely
        change the track's size and velocity, or the prediction drifts away
        from where the object comes out from behind its cover. Squared, so
        that the usual wobble of a visible object's score (0.7-1) changes
        little: a track still follows a sudden turn.
        """
        k = self.settings.score_box_noise
        if k == 0:
            return None
        missing = 1.0 - scores
        return MEASURE_STD + k * (missing * missing)

    def _start(
        self,
        dets: I64,
        now: float,
        boxes: F64,
        scores: F64,
        labels: I64,
        grid: Tensor | None,
    ) -> None:
        if len(dets) == 0:
            return
        ids = np.arange(self.next_id, self.next_id + len(dets), dtype=np.int64)
        self.next_id += len(dets)
        state = CONFIRMED if self.settings.confirm_hits <= 1 else TENTATIVE
        self.kalman.add(boxes[dets])
        self.table.add(ids, state, boxes[dets], scores[dets], labels[dets], now)
        rows = np.arange(len(self.table) - len(dets), len(self.table))
        self.table.det[rows] = dets
        if grid is not None:
            self.table.set_grid(rows, grid[dets], boxes[dets])

    def _output(
        self,
        frame: FrameInfo,
        n: int,
        masks: Tensor | MaskCrops | None,
        scores: F64,
        removed: list[tuple[int, F64, int, float]],
    ) -> TrackerOutput:
        t = self.table
        seen = (t.det >= 0).nonzero()[0]
        track_ids = np.full(n, -1, np.int64)
        shown = seen if self.settings.publish_tentative else seen[t.state[seen] == CONFIRMED]
        track_ids[t.det[shown]] = t.ids[shown]
        conf = seen[t.state[seen] == CONFIRMED]
        det = t.det[conf]
        gone: dict[str, Any] = {}  # the view's defaults (empty arrays) when nothing was removed
        if removed:
            gone = {
                "removed_ids": np.array([r[0] for r in removed], np.int64),
                "removed_boxes": np.array([r[1] for r in removed]).reshape(-1, 4),
                "removed_labels": np.array([r[2] for r in removed], np.int64),
                "removed_scores": np.array([r[3] for r in removed]),
            }
        view = TrackView(
            frame=frame,
            ids=t.ids[conf],
            det_index=det,
            boxes=t.last_box[conf],
            prev_boxes=t.prev_box[conf],
            first_boxes=t.first_box[conf],
            first_seen=t.first_seen[conf],
            labels=t.labels()[conf],
            scores=t.score[conf],
            det_scores=scores[det],
            masks=masks,
            **gone,
        )
        return TrackerOutput(track_ids, view)

    def snapshot_rows(self) -> tuple[TrackTable, F64]:
        """The table and the current box estimates ``(T, 4)`` (for ``Track`` snapshots)."""
        return self.table, self.kalman.boxes()
