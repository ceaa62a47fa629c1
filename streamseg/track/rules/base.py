"""What every alert rule shares: filters, cooldowns and event building."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from numpy.typing import NDArray

from streamseg.track.rules.membership import positions
from streamseg.track.view import TrackView
from streamseg.types import Event, MaskCrops

if TYPE_CHECKING:
    from streamseg.track.rules.context import RuleContext

__all__ = ["TIME_EPS", "RuleBase", "class_ids", "mask_rle"]

I64 = NDArray[np.int64]

# Seconds. Capture times are unix seconds (~1.7e9), where a float64 keeps
# only ~1e-7 s: "0.5 s later" computed as a difference may come out a hair
# short. Durations compared with thresholds get this much slack.
TIME_EPS = 1e-6


def mask_rle(view: TrackView, i: int) -> dict[str, Any] | None:
    """COCO RLE of the mask of the ``i``-th track in ``view``, or ``None`` without masks."""
    if view.masks is None:
        return None
    from streamseg import ops

    j = int(view.det_index[i])
    if isinstance(view.masks, MaskCrops):
        one = view.masks[j]
        rle = ops.crops_to_rle(one.crops, one.boxes, one.image_size)[0]
    else:
        rle = ops.mask_to_rle(view.masks[j].to("cpu", torch.bool))
    counts = rle["counts"]
    if isinstance(counts, bytes):
        counts = counts.decode("ascii")
    return {"size": [int(rle["size"][0]), int(rle["size"][1])], "counts": counts}


def class_ids(classes: Sequence[str], class_names: Sequence[str], where: str) -> I64 | None:
    """Label ids of class ``classes`` (names); ``None`` for all. Unknown names raise ValueError."""
    if not classes:
        return None
    index = {name: i for i, name in enumerate(class_names) if i > 0}
    unknown = [c for c in classes if c not in index]
    if unknown:
        valid = ", ".join(n for i, n in enumerate(class_names) if i > 0) or "(none)"
        raise ValueError(
            f"{where}: unknown class {unknown[0]!r} in `classes`; the model's classes are: {valid}"
        )
    return np.array(sorted(index[c] for c in classes), np.int64)


class RuleBase:
    """A rule's common part.

    Args:
        name: the rule's name (``Event.rule``).
        camera_id: the camera it watches.
        class_names: the model's names (index 0 is background).
        labels: allowed class ids, or ``None`` for all.
        min_score: least smoothed track score.
        cooldown: seconds before the same track re-triggers the same kind.
        include_mask: attach the detection's COCO RLE to events.
    """

    def __init__(
        self,
        *,
        name: str,
        camera_id: str,
        class_names: Sequence[str],
        labels: I64 | None,
        min_score: float,
        cooldown: float,
        include_mask: bool,
    ) -> None:
        self.name = name
        self.camera_id = camera_id
        self.class_names = tuple(class_names)
        self.labels = labels
        self.min_score = min_score
        self.cooldown = cooldown
        self.include_mask = include_mask
        self._last: dict[tuple[int, str], float] = {}
        # The class filter as a look-up table over label ids, and a hashable key of it.
        self._labels_key = None if labels is None else tuple(labels.tolist())
        self._allowed = np.zeros(0 if labels is None else int(labels.max(initial=-1)) + 1, bool)
        if labels is not None:
            self._allowed[labels] = True

    def eligible(self, view: TrackView) -> I64:
        """Positions in ``view`` of the tracks this rule watches (class and score filters).

        Rules with the same filters share the answer within a frame.
        """
        key = ("eligible", self.min_score, self._labels_key)
        out: I64 = view.memo(key, lambda: self._eligible(view))
        return out

    def _eligible(self, view: TrackView) -> I64:
        ok = view.scores >= self.min_score
        if self.labels is not None:
            allowed = self._allowed
            labels = view.labels
            if len(labels) and int(labels.max()) >= len(allowed):
                allowed = np.concatenate((allowed, np.zeros(int(labels.max()) + 1, bool)))
            ok &= allowed[labels]
        if ok.all():
            return positions(len(view))
        return ok.nonzero()[0]

    def cooled(self, track_id: int, kind: str, now: float) -> bool:
        """True (and the time recorded) when ``track_id`` may trigger ``kind`` now."""
        key = (track_id, kind)
        last = self._last.get(key)
        if last is not None and now - last < self.cooldown - TIME_EPS:
            return False
        if self.cooldown > 0:
            self._last[key] = now
        return True

    def forget(self, track_ids: I64) -> None:
        """Drop cooldown entries of removed tracks."""
        if self._last and len(track_ids):
            gone = set(track_ids.tolist())
            self._last = {k: v for k, v in self._last.items() if k[0] not in gone}

    def label_name(self, label: int) -> str | None:
        return self.class_names[label] if 0 <= label < len(self.class_names) else None

    def event(
        self,
        kind: str,
        view: TrackView,
        i: int | None,
        *,
        zone: str | None = None,
        line: str | None = None,
        count: int | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> Event:
        """An event of this rule about the ``i``-th track of ``view`` (``None``: no track)."""
        fields: dict[str, Any] = {}
        if i is not None:
            fields = self._track_fields(int(view.ids[i]), int(view.labels[i]), view.boxes[i])
            fields["score"] = round(float(view.det_scores[i]), 5)
            fields["mask_rle"] = mask_rle(view, i) if self.include_mask else None
        return self._event(
            kind, view, zone=zone, line=line, count=count, extra=dict(extra or {}), **fields
        )

    def removed_event(
        self, kind: str, view: TrackView, r: int, *, zone: str | None, extra: Mapping[str, Any]
    ) -> Event:
        """An event about the ``r``-th removed track of ``view`` (no mask, last known box)."""
        fields = self._track_fields(
            int(view.removed_ids[r]), int(view.removed_labels[r]), view.removed_boxes[r]
        )
        score = round(float(view.removed_scores[r]), 5)
        return self._event(kind, view, zone=zone, score=score, extra=dict(extra), **fields)

    def _track_fields(self, track_id: int, label: int, box: Any) -> dict[str, Any]:
        return {
            "track_id": track_id,
            "label": label,
            "label_name": self.label_name(label),
            "box": (float(box[0]), float(box[1]), float(box[2]), float(box[3])),
        }

    def _event(self, kind: str, view: TrackView, **fields: Any) -> Event:
        """This rule's ``kind`` event at ``view``'s frame, with ``fields``."""
        f = view.frame
        return Event(
            rule=self.name,
            kind=kind,
            camera_id=self.camera_id,
            time=f.time,
            frame_seq=f.frame_seq,
            pts=f.pts,
            **fields,
        )

    @classmethod
    def from_config(cls, rule: Any, context: RuleContext) -> RuleBase:
        """The rule for its config entry ``rule`` (its row: ``track.rule_kinds.RULE_KINDS``)."""
        raise NotImplementedError

    def update(self, view: TrackView) -> list[Event]:
        raise NotImplementedError

    def occupancy(self) -> tuple[str, int] | None:
        """``(zone, tracks inside it now)`` for a rule that keeps a zone's occupancy
        (``None`` for the others)."""
        return None

    def crossings(self) -> tuple[str, int, int] | None:
        """``(line, in, out)``: the crossings counted so far, for a rule whose kind's row
        says it counts them (``RuleKind.counts``); ``None`` for the others."""
        return None
