"""The Mask R-CNN model: backbone + FPN -> RPN -> RoI heads, and post-processing.

The whole flow in one place (``forward``); preprocessing (resize, normalise,
pad) is the caller's, following :attr:`MaskRCNN.input_spec`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from streamseg.models import InputSpec
from streamseg.models.maskrcnn.fpn import BackboneWithFPN
from streamseg.models.maskrcnn.postprocess import to_instances
from streamseg.models.maskrcnn.roi_heads import BatchDetections, RoIHeads
from streamseg.models.maskrcnn.rpn import RPN
from streamseg.types import Instances

__all__ = ["BatchDetections", "MaskRCNN"]


class MaskRCNN(nn.Module):
    """Mask R-CNN with an FPN backbone.

    Args:
        backbone: image -> FPN levels (finest first; the last one, ``pool``,
            is used by the RPN only).
        rpn: proposals from the FPN levels.
        roi_heads: boxes, classes and masks from the proposals.
        input_spec: how input images must be prepared.
        class_names: ``class_names[0] == "__background__"``; labels index it.
        mask_threshold: mask probability above which a pixel is in the mask.
        style: ``"torchvision"`` or ``"detectron2"``: how the parts were built
            (see :mod:`streamseg.models.maskrcnn.styles`); recorded so that
            weights of one style are never swapped into a model of the other.

    Eval mode: ``model(images, image_sizes)`` -> :class:`BatchDetections`
    (the whole batch, on the model's device); ``model.postprocess(outputs,
    image_sizes, frame_sizes, mask_crops=False)`` -> list of
    :class:`~streamseg.types.Instances` on the host. Train mode: ``model(images,
    image_sizes, targets)`` -> ``{"loss_objectness", "loss_rpn_box_reg",
    "loss_classifier", "loss_box_reg", "loss_mask"}``.
    """

    def __init__(
        self,
        backbone: BackboneWithFPN,
        rpn: RPN,
        roi_heads: RoIHeads,
        *,
        input_spec: InputSpec,
        class_names: Sequence[str],
        mask_threshold: float = 0.5,
        style: str = "torchvision",
    ) -> None:
        super().__init__()
        self.backbone = backbone
        self.rpn = rpn
        self.roi_heads = roi_heads
        self.input_spec = input_spec
        self.class_names = tuple(class_names)
        self.mask_threshold = mask_threshold
        self.style = style

    def forward(
        self,
        images: Tensor,
        image_sizes: Sequence[tuple[int, int]],
        targets: Sequence[dict[str, Tensor]] | None = None,
    ) -> BatchDetections | dict[str, Tensor]:
        """Detections (eval) or losses (train; ``targets`` required).

        Args:
            images: ``float32 (B, 3, H, W)`` normalised and zero-padded.
            image_sizes: unpadded ``(h, w)`` of each image.
            targets: per image ``boxes`` float32 ``(N, 4)`` xyxy, ``labels``
                int64 ``(N,)`` (``>= 1``), ``masks`` uint8 ``(N, h, w)``, at
                the resized, unpadded size.
        """
        if self.training and targets is None:
            raise ValueError("MaskRCNN in train mode needs targets (boxes, labels, masks)")
        if len(image_sizes) != images.shape[0]:
            raise ValueError(f"got {images.shape[0]} images but {len(image_sizes)} image_sizes")
        sizes = [(int(h), int(w)) for h, w in image_sizes]
        feats = self.backbone(images)
        if targets is not None:
            _check_targets(targets, len(sizes))
        proposals, rpn_losses = self.rpn(images, feats, sizes, targets if self.training else None)
        detections, roi_losses = self.roi_heads(
            feats[:-1], proposals, sizes, targets if self.training else None
        )
        if self.training or detections is None:
            return {**rpn_losses, **roi_losses}
        return detections

    @torch.no_grad()
    def postprocess(
        self,
        outputs: BatchDetections,
        image_sizes: Sequence[tuple[int, int]],
        frame_sizes: Sequence[tuple[int, int]],
        *,
        mask_crops: bool = False,
    ) -> list[Instances]:
        """Scale detections from resized-image to frame pixels and paste the masks.

        Returns one :class:`Instances` per image, on the host (two copies
        from a GPU for the whole batch, see
        :mod:`~streamseg.models.maskrcnn.postprocess`): ``boxes`` in frame
        pixels, ``masks`` ``bool (N, H, W)`` at frame resolution, or with
        ``mask_crops`` the same masks as :class:`MaskCrops` (each pasted only
        into its box: the cost follows the objects' area, not the frame's).
        """
        return to_instances(
            outputs,
            image_sizes,
            frame_sizes,
            mask_threshold=self.mask_threshold,
            mask_crops=mask_crops,
        )

    def freeze_backbone_stages(self, stages: int) -> None:
        """Stop gradients of the backbone stem (stage 0) and stages ``1..stages-1``."""
        self.backbone.body.freeze_stages(stages)


def _check_targets(targets: Sequence[dict[str, Tensor]], count: int) -> None:
    if len(targets) != count:
        raise ValueError(f"got {len(targets)} targets for {count} images")
    for i, t in enumerate(targets):
        for key in ("boxes", "labels", "masks"):
            if key not in t:
                raise ValueError(f"targets[{i}] has no {key!r} (needs boxes, labels, masks)")
        n = t["boxes"].shape[0]
        if t["boxes"].dim() != 2 or t["boxes"].shape[1] != 4:
            raise ValueError(f"targets[{i}]['boxes'] must be (N, 4), got {tuple(t['boxes'].shape)}")
        if t["labels"].shape != (n,) or t["masks"].dim() != 3 or t["masks"].shape[0] != n:
            raise ValueError(
                f"targets[{i}]: labels must be ({n},) and masks ({n}, h, w); got "
                f"{tuple(t['labels'].shape)} and {tuple(t['masks'].shape)}"
            )
