"""Panoptic quality (things and stuff) and mean IoU of semantic / panoptic predictions.

:class:`SegmentationScores` takes one image at a time: the prediction (an
``Instances`` with its ``regions``, as Mask2Former's ``semantic`` and
``panoptic`` tasks give) and the image's panoptic ground truth
(``GroundTruth.segments``), and reports::

    {"panoptic": {"PQ": .., "SQ": .., "RQ": .., "PQ_th": .., "SQ_th": .., "RQ_th": ..,
                  "PQ_st": .., "SQ_st": .., "RQ_st": ..},
     "sem_seg": {"mIoU": .., "pixel_accuracy": ..}}

PQ is torchmetrics' ``PanopticQuality`` (the panopticapi definition: a
predicted and a true segment of one class match when their IoU is above 0.5;
void pixels, label 0 in the ground truth, are left out); the things / stuff
averages come from its per-class sums, over the classes that occur. One
difference from panopticapi is undone here: torchmetrics treats predicted
pixels without a class as void too, and then drops true segments that lie
mostly on them instead of counting them as missed (an empty prediction would
score no PQ at all rather than 0). So those pixels get a class of their own,
"unassigned", a stuff class no ground truth has, left out of the averages. mIoU is
over the whole dataset (intersections and unions of each class summed over
all images, then averaged over the classes that occur, as detectron2's
``SemSegEvaluator``): torchmetrics' ``MeanIoU`` averages per-image IoUs
instead, which is another number, so the confusion matrix is counted here.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import torch
from torch import Tensor

from streamseg.types import Instances

__all__ = ["SegmentationScores", "prediction_segments"]


def prediction_segments(pred: Instances) -> Tensor:
    """``int64 (H, W, 2)``: each pixel's predicted label (0: none) and instance number.

    Stuff pixels take their region's class (instance 0); an instance's pixels
    take its label and its position + 1; where instances overlap (instance
    mode) the better-scored one, listed first, wins.
    """
    h, w = pred.image_size
    out = torch.zeros((h, w, 2), dtype=torch.int64)
    if pred.regions is not None:
        out[..., 0] = pred.regions.label_map.cpu().long()
    masks = pred.frame_masks()
    if masks is not None and len(pred):
        masks = masks.cpu()
        order = torch.arange(len(pred), 0, -1) - 1  # paint the best last
        for i in order.tolist():
            out[masks[i], 0] = int(pred.labels[i])
            out[masks[i], 1] = i + 1
    return out


class SegmentationScores:
    """PQ and mIoU over a dataset (see the module docstring).

    Args:
        num_classes: class count with the background (labels ``1..num_classes - 1``).
        stuff: the stuff labels; the other labels are things.
    """

    def __init__(self, num_classes: int, stuff: Collection[int]) -> None:
        from torchmetrics.detection import PanopticQuality

        labels = set(range(1, num_classes))
        self.stuff = set(stuff) & labels
        self.things = labels - self.stuff
        self.unassigned = num_classes  # the last stuff id, after every real one
        self._pq = PanopticQuality(
            things=self.things,
            stuffs=self.stuff | {self.unassigned},
            allow_unknown_preds_category=True,
        )
        self.num_classes = num_classes
        self._confusion = torch.zeros((num_classes, num_classes), dtype=torch.int64)
        self.images = 0

    def add(self, pred: Instances, truth: Tensor) -> None:
        """Count one image: ``pred`` and its truth (``GroundTruth.segments``, int64 (H, W, 2))."""
        segments = prediction_segments(pred)
        if segments.shape != truth.shape:
            raise ValueError(
                f"prediction {tuple(segments.shape)} and ground truth {tuple(truth.shape)} "
                "differ in size"
            )
        unlabelled = segments[..., 0] == 0
        scored = segments.clone()
        scored[..., 0][unlabelled] = self.unassigned
        self._pq.update(scored[None], truth[None])
        true, guess = truth[..., 0].flatten(), segments[..., 0].flatten()
        known = true > 0
        pairs = true[known] * self.num_classes + guess[known].clamp(0, self.num_classes - 1)
        counts = torch.bincount(pairs, minlength=self.num_classes**2)
        self._confusion += counts.view(self.num_classes, self.num_classes)
        self.images += 1

    def result(self) -> dict[str, Any]:
        """The scores so far (values in ``[0, 1]``; ``-1`` where no class of a kind occurs)."""
        pq = self._pq
        iou, tp = pq.iou_sum.double(), pq.true_positives.double()
        fp, fn = pq.false_positives.double(), pq.false_negatives.double()
        sq = torch.where(tp > 0, iou / tp.clamp(min=1), 0.0)
        denominator = tp + 0.5 * fp + 0.5 * fn
        rq = torch.where(denominator > 0, tp / denominator.clamp(min=1e-9), 0.0)
        occurs = denominator > 0
        occurs[-1] = False  # "unassigned" (see the module docstring)
        is_thing = torch.tensor([True] * len(self.things) + [False] * (len(self.stuff) + 1))
        panoptic: dict[str, float] = {}
        for suffix, chosen in (
            ("", occurs),
            ("_th", occurs & is_thing),
            ("_st", occurs & ~is_thing),
        ):
            for name, values in (("PQ", sq * rq), ("SQ", sq), ("RQ", rq)):
                value = float(values[chosen].mean()) if bool(chosen.any()) else -1.0
                panoptic[name + suffix] = round(value, 6)
        return {"panoptic": panoptic, "sem_seg": self._semantic()}

    def _semantic(self) -> dict[str, float]:
        # Rows: true class (void, 0, never counted); columns: predicted (0: none).
        m = self._confusion.double()
        hits = m.diagonal()[1:]
        true, guessed = m[1:].sum(1), m[:, 1:].sum(0)
        union = true + guessed - hits
        occurs = union > 0
        iou = hits / union.clamp(min=1)
        total = float(true.sum())
        return {
            "mIoU": round(float(iou[occurs].mean()), 6) if bool(occurs.any()) else -1.0,
            "pixel_accuracy": round(float(hits.sum()) / total, 6) if total else -1.0,
        }
