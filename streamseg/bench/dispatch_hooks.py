"""What ``bench dispatch`` asks of a model family, one class per family.

A family's row (``streamseg.models.Family.dispatch``) names its class here;
:mod:`streamseg.bench.dispatch` asks it, never the family's name:

* ``options(proposals)``: build options besides the resize and limits
  (Mask R-CNN's RPN keeps ``proposals`` per image);
* ``calibrate(segmenter, frames, detections)``: a score threshold that lets
  at least ``detections`` D instances through in every image;
* ``set_limits(segmenter, threshold, detections)``: the model's score
  threshold and detections per image.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol

import torch

from streamseg.segment.segmenter import Segmenter
from streamseg.types import FrameBatch

__all__ = ["DispatchHooks", "Mask2FormerHooks", "MaskRCNNHooks"]

# Candidates per image the score threshold lets through, per detection wanted.
CANDIDATES_PER_DETECTION = 4


class DispatchHooks(Protocol):
    """A family's part of ``bench dispatch`` (module docstring)."""

    def options(self, proposals: int) -> dict[str, Any]: ...

    def calibrate(self, segmenter: Segmenter, frames: FrameBatch, detections: int) -> float: ...

    def set_limits(self, segmenter: Segmenter, threshold: float, detections: int) -> None: ...


class MaskRCNNHooks:
    """Mask R-CNN: ``CANDIDATES_PER_DETECTION * D`` candidates pass the threshold in
    every image (the lowest, over images, of each image's that many-th class score):
    NMS then keeps at least D."""

    def options(self, proposals: int) -> dict[str, Any]:
        return {"rpn_post_nms_top_n": proposals}

    def calibrate(self, segmenter: Segmenter, frames: FrameBatch, detections: int) -> float:
        model: Any = segmenter.model
        seen: list[torch.Tensor] = []
        hook = model.roi_heads.box_predictor.register_forward_hook(
            lambda m, i, o: seen.append(o[0].detach())
        )
        self.set_limits(segmenter, 1.0, detections)  # no candidate: stops at the scores
        try:
            segmenter.segment(frames)
        finally:
            hook.remove()
        # (images * proposals, classes), background first.
        fg = seen[0].cpu().softmax(-1)[:, 1:].reshape(len(frames), -1)
        want = min(CANDIDATES_PER_DETECTION * detections, fg.shape[1])
        return float(fg.topk(want, dim=1).values[:, -1].min())

    def set_limits(self, segmenter: Segmenter, threshold: float, detections: int) -> None:
        model: Any = segmenter.model
        heads = model.roi_heads
        heads.settings = dataclasses.replace(
            heads.settings, score_threshold=threshold, detections_per_image=detections
        )


class Mask2FormerHooks:
    """Mask2Former: D instances score above the threshold in every image (the final
    scores, class times mask score), so at least D queries are kept."""

    def options(self, proposals: int) -> dict[str, Any]:
        return {}

    def calibrate(self, segmenter: Segmenter, frames: FrameBatch, detections: int) -> float:
        model: Any = segmenter.model
        self.set_limits(segmenter, 0.0, int(model.model.config.num_queries))
        scores = [r.scores for r in segmenter.segment(frames)]
        return min(float(s.sort(descending=True).values[detections - 1]) for s in scores)

    def set_limits(self, segmenter: Segmenter, threshold: float, detections: int) -> None:
        model: Any = segmenter.model
        model.score_threshold = threshold
        model.detections_per_image = detections
