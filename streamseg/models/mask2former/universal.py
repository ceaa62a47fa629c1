"""Mask2Former semantic and panoptic inference: queries x classes -> a frame's classes.

Both read the last decoder layer's ``class_logits (Q, K+1)`` (the last
column is "no object") and ``mask_logits (Q, h, w)`` at 1/4 of the padded
input, and work on all of a frame's queries at once (no loop over queries
or segments: a handful of tensor operations per frame).

**Semantic** (``task: semantic``): the score of class ``c`` at a pixel is
``sum_q softmax(class_logits_q)[c] * sigmoid(mask_logit_q)``; each pixel
takes its best class. The scores are formed at the mask resolution and
resized to the frame bilinearly (as transformers' post-processing resizes
class scores), so the cost of the sum does not grow with the frame. Only the
classes that can win somewhere are resized: a bilinear resize of the 4x mask
grid (to the padded input, crop, then to the frame) mixes values of a 3x3
cell neighbourhood at most, so a class whose neighbourhood maximum is below
the best neighbourhood minimum of another class everywhere can never be the
argmax (:func:`_possible_winners`); the result is exactly that of resizing
every class.

**Panoptic** (``task: panoptic``), the merge of the Mask2Former paper:

1. each query's class is its most likely one; queries whose class is "no
   object" or whose probability is not above ``object_mask_threshold`` are
   dropped;
2. their mask probabilities are resized to the frame; each pixel goes to the
   query with the highest ``class probability x mask probability``, if that
   query's own mask probability there is at least 0.5;
3. a query keeps its segment only when the pixels it won are at least
   ``overlap_threshold`` of the pixels its mask covers (``>= 0.5``) on its
   own (a mostly hidden segment is a duplicate, not an object);
4. thing classes give one instance per kept query; the segments of a stuff
   class are one region.

The output is one :class:`~streamseg.types.Instances` per frame: the things
(none in semantic mode) with ``regions`` holding the label map of the
stuff (every class in semantic mode).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from streamseg.models.mask2former.postprocess import masks_to_boxes
from streamseg.types import Instances, Regions

__all__ = ["panoptic_inference", "resize_to_frame", "semantic_inference"]


def resize_to_frame(
    maps: Tensor,
    padded_size: tuple[int, int],
    image_size: tuple[int, int],
    frame_size: tuple[int, int],
) -> Tensor:
    """``(n, h4, w4)`` maps over the padded input -> ``(n, fh, fw)`` float32 over the frame.

    Bilinear to ``padded_size``, cropped to ``image_size`` (the resized image
    inside the padding), bilinear to ``frame_size``.
    """
    x = F.interpolate(maps[:, None].float(), size=padded_size, mode="bilinear", align_corners=False)
    x = x[:, :, : image_size[0], : image_size[1]]
    if tuple(image_size) != tuple(frame_size):
        x = F.interpolate(x, size=frame_size, mode="bilinear", align_corners=False)
    return x[:, 0]


def _possible_winners(scores: Tensor) -> Tensor:
    """Classes of ``scores (K, h, w)`` that can be the argmax somewhere once resized.

    Returns their indices, ascending (int64). See the module docstring: over
    each 3x3 neighbourhood, class ``c`` can win only if its maximum reaches
    the largest minimum of any class.
    """
    highest = F.max_pool2d(scores[None], 3, stride=1, padding=1)[0]
    lowest = -F.max_pool2d(-scores[None], 3, stride=1, padding=1)[0]
    bar = lowest.amax(0, keepdim=True)
    return (highest >= bar).flatten(1).any(1).nonzero().flatten()


def semantic_inference(
    class_logits: Tensor,
    mask_logits: Tensor,
    *,
    padded_size: tuple[int, int],
    image_size: tuple[int, int],
    frame_size: tuple[int, int],
) -> Instances:
    """A frame's class map from Mask2Former's outputs (no instances).

    Args:
        class_logits: ``(Q, K + 1)``; mask_logits: ``(Q, h, w)`` at 1/4 of
            ``padded_size``; padded_size / image_size / frame_size as in
            :func:`resize_to_frame`.

    Returns:
        empty Instances whose ``regions`` label every pixel with its class
        (``1..K``).
    """
    probs = class_logits.float().softmax(-1)[:, :-1]
    scores = torch.einsum("qk,qhw->khw", probs, mask_logits.float().sigmoid())
    classes = _possible_winners(scores)
    frame_scores = resize_to_frame(scores[classes], padded_size, image_size, frame_size)
    label_map = classes[frame_scores.argmax(0)] + 1
    inst = Instances.empty(frame_size, device=class_logits.device)
    return inst.replace(regions=Regions.from_label_map(label_map))


def panoptic_inference(
    class_logits: Tensor,
    mask_logits: Tensor,
    *,
    is_thing: Tensor,
    padded_size: tuple[int, int],
    image_size: tuple[int, int],
    frame_size: tuple[int, int],
    object_mask_threshold: float = 0.8,
    overlap_threshold: float = 0.8,
    detections_per_image: int = 100,
) -> Instances:
    """A frame's panoptic segmentation from Mask2Former's outputs (module docstring).

    Args:
        class_logits / mask_logits / sizes: as :func:`semantic_inference`.
        is_thing: ``bool (K,)``: which classes are things (the rest are stuff).
        object_mask_threshold: least class probability of a kept query.
        overlap_threshold: least share of its own mask a query must win.
        detections_per_image: at most this many things (best scores first).

    Returns:
        Instances of the thing segments (labels ``1..K``, frame-size masks,
        score = class probability x mean mask probability over the segment),
        best first, with ``regions`` holding the stuff segments.
    """
    num_classes = class_logits.shape[1] - 1
    device = class_logits.device
    probs, labels = class_logits.float().softmax(-1).max(-1)
    queries = ((labels < num_classes) & (probs > object_mask_threshold)).nonzero().flatten()
    if queries.numel() == 0:
        inst = Instances.empty(frame_size, device=device)
        return inst.replace(regions=Regions.empty(frame_size, device=device))
    probs, labels = probs[queries], labels[queries]
    masks = resize_to_frame(mask_logits[queries], padded_size, image_size, frame_size).sigmoid()
    owner = (masks * probs[:, None, None]).argmax(0)
    owned = masks.gather(0, owner[None])[0] >= 0.5
    n = len(queries)
    won = torch.bincount(owner.flatten(), minlength=n)
    kept_area = torch.bincount(owner[owned], minlength=n)
    alone = (masks >= 0.5).flatten(1).sum(1)
    keep = (kept_area > 0) & (alone > 0) & (won.double() >= overlap_threshold * alone.double())
    thing = is_thing.to(device)[labels]
    segment = owned & keep[owner]
    label_map = torch.where(segment & ~thing[owner], labels[owner] + 1, 0)
    things = (keep & thing).nonzero().flatten()
    inst_masks = (owner[None] == things[:, None, None]) & segment[None]
    mask_scores = (masks[things] * inst_masks).flatten(1).sum(1) / kept_area[things]
    scores = probs[things] * mask_scores
    order = scores.argsort(descending=True)[:detections_per_image]
    inst_masks = inst_masks[order]
    return Instances(
        image_size=frame_size,
        boxes=masks_to_boxes(inst_masks),
        scores=scores[order],
        labels=labels[things][order] + 1,
        masks=inst_masks,
        regions=Regions.from_label_map(label_map),
    )
