"""Detections of two Mask R-CNNs on the same frames, compared (streamseg's and torchvision's).

``scripts/gpu-check.sh`` runs :func:`main` on a GPU: streamseg's
``maskrcnn_r50_fpn`` (the :class:`Segmenter`, as ``serve`` runs it) and
torchvision's ``maskrcnn_resnet50_fpn`` built as its builder builds it for
COCO weights (FrozenBatchNorm2d in the backbone), both loaded with the
same weights (:func:`parity_weights`; torchvision's key names are
streamseg's), on the same 1080p frames already on the GPU:

* fp32 with TF32 off on both sides (``ieee`` matmuls and convolutions,
  deterministic cuDNN) must give the same detections
  (:func:`compare_same`: count, labels, boxes within 0.5 px, mask IoU at
  least 0.99);
* bf16 (autocast, both sides) must find what fp32 finds
  (:func:`compare_finds`: every fp32 detection matched, mask IoU at least 0.9);
* with each library's defaults (torch's: TF32 convolutions) the same
  comparison is reported, not judged.

The matching and the figures are plain functions of two :class:`Detections`,
tested on the CPU (tests/segment/test_parity.py) on streamseg against itself.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import zlib
from collections.abc import Iterator, Mapping
from typing import Any

import torch
from torch import Tensor

from streamseg.types import Instances

__all__ = [
    "Detections",
    "compare_finds",
    "compare_same",
    "fp32_precision",
    "match",
    "parity_weights",
    "torchvision_maskrcnn",
]


@dataclasses.dataclass(frozen=True)
class Detections:
    """One frame's detections on the CPU: ``boxes (N, 4)`` float32 xyxy frame pixels,
    ``labels (N,)`` int64, ``scores (N,)`` float32, ``masks (N, H, W)`` bool."""

    boxes: Tensor
    labels: Tensor
    scores: Tensor
    masks: Tensor

    def __len__(self) -> int:
        return int(self.boxes.shape[0])

    @classmethod
    def from_instances(cls, inst: Instances) -> Detections:
        """streamseg's :class:`Instances` (frame-size masks or crops)."""
        masks = inst.frame_masks()
        if masks is None:
            raise ValueError("these instances have no masks")
        return cls(
            inst.boxes.float().cpu(), inst.labels.cpu(), inst.scores.float().cpu(), masks.cpu()
        )

    @classmethod
    def from_torchvision(cls, out: Mapping[str, Tensor], threshold: float = 0.5) -> Detections:
        """One image of torchvision's output (masks ``(N, 1, H, W)``, probabilities)."""
        return cls(
            out["boxes"].float().cpu(),
            out["labels"].cpu(),
            out["scores"].float().cpu(),
            (out["masks"][:, 0] > threshold).cpu(),
        )


def _box_iou(a: Tensor, b: Tensor) -> Tensor:
    area_a = (a[:, 2] - a[:, 0]).clamp(min=0) * (a[:, 3] - a[:, 1]).clamp(min=0)
    area_b = (b[:, 2] - b[:, 0]).clamp(min=0) * (b[:, 3] - b[:, 1]).clamp(min=0)
    lt = torch.maximum(a[:, None, :2], b[None, :, :2])
    rb = torch.minimum(a[:, None, 2:], b[None, :, 2:])
    inter = (rb - lt).clamp(min=0).prod(dim=2)
    return inter / (area_a[:, None] + area_b[None, :] - inter).clamp(min=1e-9)


def match(ref: Detections, got: Detections) -> list[tuple[int, int]]:
    """One-to-one pairs ``(i in ref, j in got)`` of the same label, best box IoU first.

    Greedy on the pairwise box IoU (pairs of different labels, or of no
    overlap, never match); ``ref`` detections left without a partner are
    absent from the list.
    """
    if len(ref) == 0 or len(got) == 0:
        return []
    iou = _box_iou(ref.boxes.double(), got.boxes.double())
    iou[ref.labels[:, None] != got.labels[None, :]] = 0
    pairs = []
    flat = iou.flatten()
    order = torch.argsort(flat, descending=True, stable=True)
    used_i: set[int] = set()
    used_j: set[int] = set()
    cols = iou.shape[1]
    for k in order.tolist():
        if flat[k] <= 0 or len(used_i) == len(ref):
            break
        i, j = divmod(k, cols)
        if i not in used_i and j not in used_j:
            used_i.add(i)
            used_j.add(j)
            pairs.append((i, j))
    return sorted(pairs)


def _mask_ious(ref: Detections, got: Detections, pairs: list[tuple[int, int]]) -> list[float]:
    if ref.masks.shape[1:] != got.masks.shape[1:]:
        raise ValueError(
            f"masks of frames of different sizes: {tuple(ref.masks.shape[1:])} and "
            f"{tuple(got.masks.shape[1:])}"
        )
    out = []
    for i, j in pairs:
        a, b = ref.masks[i], got.masks[j]
        union = int((a | b).sum())
        out.append(1.0 if union == 0 else int((a & b).sum()) / union)
    return out


def compare_same(
    ref: Detections, got: Detections, *, box_tol: float = 0.5, min_mask_iou: float = 0.99
) -> dict[str, Any]:
    """Are these the same detections? Equal counts, every detection matched with the
    same label, boxes within ``box_tol`` pixels (largest coordinate difference) and
    masks with IoU at least ``min_mask_iou``."""
    pairs = match(ref, got)
    box_diff = [float((ref.boxes[i] - got.boxes[j]).abs().max()) for i, j in pairs]
    score_diff = [float((ref.scores[i] - got.scores[j]).abs()) for i, j in pairs]
    ious = _mask_ious(ref, got, pairs)
    matched = len(pairs) == len(ref) == len(got)
    result = {
        "count": [len(ref), len(got)],
        "matched": len(pairs),
        "max_box_diff_px": round(max(box_diff), 4) if box_diff else None,
        "min_mask_iou": round(min(ious), 4) if ious else None,
        "mean_mask_iou": round(sum(ious) / len(ious), 4) if ious else None,
        "max_score_diff": round(max(score_diff), 6) if score_diff else None,
    }
    result["passed"] = (
        matched and all(d <= box_tol for d in box_diff) and all(v >= min_mask_iou for v in ious)
    )
    return result


def compare_finds(ref: Detections, got: Detections, *, min_mask_iou: float = 0.9) -> dict[str, Any]:
    """Does ``got`` find what ``ref`` finds? Every ``ref`` detection matched by one of
    ``got`` with the same label and mask IoU at least ``min_mask_iou``."""
    pairs = match(ref, got)
    ious = _mask_ious(ref, got, pairs)
    found = sum(v >= min_mask_iou for v in ious)
    return {
        "count": [len(ref), len(got)],
        "found": found,
        "min_mask_iou": round(min(ious), 4) if ious else None,
        "mean_mask_iou": round(sum(ious) / len(ious), 4) if ious else None,
        "passed": found == len(ref),
    }


# --------------------------------------------------------------------------- weights

# Final layers scaled so that the random model's decisions have margins: its
# objectness, class scores and mask logits spread far from their thresholds
# (with the plain rule, the 100 best scores sit within 1e-5 of each other and
# any rounding difference changes which detections are kept).
SHARPEN = {
    "rpn.head.cls_logits.": 4.0,
    "roi_heads.box_predictor.cls_score.": 6.0,
    "roi_heads.mask_predictor.mask_fcn_logits.": 6.0,
}


def parity_weights(state: Mapping[str, Tensor], sharpen: bool = True) -> dict[str, Tensor]:
    """Weights for ``state``'s keys (torchvision's names) that anyone can rebuild.

    Each float tensor is drawn from a ``torch.Generator`` seeded with the
    CRC-32 of its key, by the rule of ``tests/data/torchvision-maskrcnn``
    (its README); with ``sharpen``, the layers of :data:`SHARPEN` are then
    scaled by their factor.
    """
    out = {}
    for key, value in state.items():
        if not value.is_floating_point():
            out[key] = value.clone()
            continue
        g = torch.Generator().manual_seed(zlib.crc32(key.encode()) & 0xFFFFFFFF)
        shape = tuple(value.shape)
        if key.endswith("running_var"):
            t = 1.0 + 0.1 * torch.rand(shape, generator=g)
        elif key.endswith(("running_mean", ".bias")):
            t = 0.05 * torch.randn(shape, generator=g)
        elif len(shape) == 1:
            t = 1.0 + 0.1 * torch.randn(shape, generator=g)
        else:
            t = torch.randn(shape, generator=g) * math.sqrt(1.0 / math.prod(shape[1:]))
        if sharpen:
            t = t * next((f for p, f in SHARPEN.items() if key.startswith(p)), 1.0)
        out[key] = t
    return out


def torchvision_maskrcnn(state: Mapping[str, Tensor]) -> torch.nn.Module:
    """torchvision's ``maskrcnn_resnet50_fpn`` as its builder makes it for COCO weights
    (ResNet-50 with ``FrozenBatchNorm2d``, 3 trainable layers, 91 classes), loaded with
    ``state``, in eval mode. Raises ``ImportError`` without torchvision."""
    from torchvision.models.detection.backbone_utils import _resnet_fpn_extractor
    from torchvision.models.detection.mask_rcnn import MaskRCNN
    from torchvision.models.resnet import resnet50
    from torchvision.ops import misc

    backbone = resnet50(weights=None, norm_layer=misc.FrozenBatchNorm2d)
    model = MaskRCNN(_resnet_fpn_extractor(backbone, 3), num_classes=91)
    model.load_state_dict(dict(state))
    return model.eval()


@contextlib.contextmanager
def fp32_precision(mode: str) -> Iterator[None]:
    """Run with float32 matmuls and convolutions in ``mode`` (``ieee``: full fp32, cuDNN
    deterministic; ``tf32``), then restore the settings found."""
    cudnn: Any = torch.backends.cudnn  # conv.fp32_precision (torch >= 2.9) is not in the stubs
    conv = cudnn.conv
    before = (torch.backends.cuda.matmul.fp32_precision, conv.fp32_precision)
    deterministic, benchmark = cudnn.deterministic, cudnn.benchmark
    try:
        torch.backends.cuda.matmul.fp32_precision = mode
        conv.fp32_precision = mode
        cudnn.deterministic, cudnn.benchmark = mode == "ieee", False
        yield
    finally:
        torch.backends.cuda.matmul.fp32_precision = before[0]
        conv.fp32_precision = before[1]
        cudnn.deterministic, cudnn.benchmark = deterministic, benchmark
