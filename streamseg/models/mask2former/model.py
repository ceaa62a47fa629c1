"""Mask2Former following streamseg's model contract.

The network is transformers' ``Mask2FormerModel`` (backbone, multi-scale
deformable-attention pixel decoder, masked-attention transformer decoder);
around it this module adds the class head, streamseg's input/output contract,
instance post-processing and the training loss. Attribute names follow
``Mask2FormerForUniversalSegmentation`` (``model``, ``class_predictor``,
``criterion``), so the state dict has exactly the Hugging Face key layout.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from streamseg.models import InputSpec
from streamseg.models.mask2former.criterion import SetCriterion, Target
from streamseg.models.mask2former.postprocess import batch_inference
from streamseg.models.mask2former.universal import panoptic_inference, semantic_inference
from streamseg.types import Instances

__all__ = ["Mask2Former"]

# Mask logits come out at 1/4 of the padded input.
_MASK_STRIDE = 4


class DecoderHead(nn.Module):
    """Masked-attention decoder + class head with batch-first inputs and outputs.

    ``forward(multi_scale_features (3 x (B, C, h, w)), mask_features (B, C, H/4, W/4))``
    returns the last layer's ``(class_logits (B, Q, K+1), mask_logits (B, Q, H/4, W/4))``.
    """

    def __init__(self, transformer_module: nn.Module, class_predictor: nn.Module) -> None:
        super().__init__()
        self.transformer_module = transformer_module
        self.class_predictor = class_predictor

    def forward(
        self, multi_scale_features: tuple[Tensor, ...], mask_features: Tensor
    ) -> tuple[Tensor, Tensor]:
        out = self.transformer_module(list(multi_scale_features), mask_features, True)
        last = out.intermediate_hidden_states[-1].transpose(0, 1)
        return self.class_predictor(last), out.masks_queries_logits[-1]


class Mask2Former(nn.Module):
    """Mask2Former for instance, semantic or panoptic segmentation.

    Args:
        config: a ``transformers.Mask2FormerConfig`` (see ``config.hf_config``).
        class_names: ``K + 1`` names, ``"__background__"`` first.
        score_threshold: keep instances scoring at least this (instance task).
        detections_per_image: at most this many instances per image.
        min_size / max_size: resize rule for the Segmenter and the trainer.
        task: ``instance``, ``semantic`` or ``panoptic`` (what ``postprocess``
            gives; the network and its training are the same for all three).
        stuff_classes: panoptic: the class names that are stuff (regions);
            the others are things (instances).
        object_mask_threshold / overlap_threshold: panoptic merging (see
            ``universal.py``).
        encoder: a backbone in the place of the one ``config`` describes
            (``small.ResNetEncoder``), with the same stage widths.

    Eval ``forward(images (B,3,H,W), image_sizes)`` returns ``{"pred_logits":
    (B, Q, K+1), "pred_masks": (B, Q, H/4, W/4)}``; train ``forward(images,
    image_sizes, targets)`` returns ``{"loss_class", "loss_mask", "loss_dice"}``.
    """

    def __init__(
        self,
        config: Any,
        *,
        class_names: Sequence[str],
        score_threshold: float = 0.05,
        detections_per_image: int = 100,
        min_size: int = 800,
        max_size: int = 1333,
        task: str = "instance",
        stuff_classes: Sequence[str] = (),
        object_mask_threshold: float = 0.8,
        overlap_threshold: float = 0.8,
        encoder: nn.Module | None = None,
    ) -> None:
        super().__init__()
        from transformers.models.mask2former.modeling_mask2former import Mask2FormerModel

        self.num_classes = int(config.num_labels)
        self.model = Mask2FormerModel(config)
        if encoder is not None:
            self.model.pixel_level_module.encoder = encoder
        self.class_predictor = nn.Linear(config.hidden_dim, self.num_classes + 1)
        self.criterion = SetCriterion(
            self.num_classes,
            num_points=config.train_num_points,
            no_object_weight=config.no_object_weight,
            class_weight=config.class_weight,
            mask_weight=config.mask_weight,
            dice_weight=config.dice_weight,
            oversample_ratio=config.oversample_ratio,
            importance_sample_ratio=config.importance_sample_ratio,
        )
        # Not registered as a submodule: its weights are model.transformer_module's
        # and class_predictor's, and the state dict keeps the Hugging Face keys.
        self.head: DecoderHead
        object.__setattr__(
            self, "head", DecoderHead(self.model.transformer_module, self.class_predictor)
        )
        self.class_names = tuple(class_names)
        self.score_threshold = score_threshold
        self.detections_per_image = detections_per_image
        self.task = task
        self.stuff_classes = tuple(stuff_classes)
        self.object_mask_threshold = object_mask_threshold
        self.overlap_threshold = overlap_threshold
        # (K,) bool over the classes (no background): a plain tensor, not a
        # buffer, so the state dict keeps the Hugging Face keys.
        stuff = set(self.stuff_classes)
        self.is_thing = torch.tensor([n not in stuff for n in self.class_names[1:]])
        self.input_spec = InputSpec(
            channel_order="RGB",
            scale=255.0,
            mean=(0.485, 0.456, 0.406),
            std=(0.229, 0.224, 0.225),
            min_size=min_size,
            max_size=max_size,
            size_divisibility=32,
        )

    @property
    def backbone(self) -> nn.Module:
        """The transformers backbone (``ResNetBackbone`` or ``SwinBackbone``)."""
        encoder: nn.Module = self.model.pixel_level_module.encoder
        return encoder

    def predictions(self, images: Tensor) -> list[tuple[Tensor, Tensor]]:
        """``(class_logits (B,Q,K+1), mask_logits (B,Q,H/4,W/4))`` of every decoder layer."""
        pixel = self.model.pixel_level_module(images)
        out = self.model.transformer_module(
            list(pixel.decoder_hidden_states), pixel.decoder_last_hidden_state, True
        )
        states, masks = out.intermediate_hidden_states, out.masks_queries_logits
        return [
            (self.class_predictor(s.transpose(0, 1)), m) for s, m in zip(states, masks, strict=True)
        ]

    def dense_parts(self) -> list[tuple[str, str]]:
        """Submodules a compiled backend compiles (batch-first inputs and outputs).

        ``model.pixel_level_module`` (backbone + pixel decoder) and ``head``
        (transformer decoder + class head, last layer only).
        """
        return [("model.pixel_level_module", "image"), ("head", "image")]

    def forward(
        self,
        images: Tensor,
        image_sizes: Sequence[tuple[int, int]],
        targets: Sequence[dict[str, Tensor]] | None = None,
    ) -> dict[str, Tensor]:
        if targets is None:
            # Two positional calls of batch-first parts, so that a compiled
            # backend can swap either one's forward (see dense_parts).
            pixel = self.model.pixel_level_module(images)
            logits, masks = self.head(
                tuple(pixel.decoder_hidden_states), pixel.decoder_last_hidden_state
            )
            return {"pred_logits": logits, "pred_masks": masks}
        padded = (int(images.shape[-2]), int(images.shape[-1]))
        prepared = [self._target(t, padded, i) for i, t in enumerate(targets)]
        return dict(self.criterion(self.predictions(images), prepared))

    def _target(self, target: dict[str, Tensor], padded: tuple[int, int], index: int) -> Target:
        labels = target["labels"].long()
        if labels.numel() and (int(labels.min()) < 1 or int(labels.max()) > self.num_classes):
            raise ValueError(
                f"targets[{index}]['labels'] must be in 1..{self.num_classes} (0 is background), "
                f"got {sorted(set(labels.tolist()))}; check num_classes / class_names"
            )
        masks = target["masks"]
        h, w = masks.shape[-2:]
        if h > padded[0] or w > padded[1]:
            raise ValueError(
                f"targets[{index}]['masks'] are {h}x{w}, larger than the padded images "
                f"{padded[0]}x{padded[1]}; masks must be at the resized image size"
            )
        masks = F.pad(masks.float(), (0, padded[1] - w, 0, padded[0] - h))
        return labels - 1, masks

    def postprocess(
        self,
        outputs: dict[str, Tensor],
        image_sizes: Sequence[tuple[int, int]],
        frame_sizes: Sequence[tuple[int, int]],
        *,
        mask_crops: bool = False,
    ) -> list[Instances]:
        """Instances per image at frame resolution, on the host, by ``task``.

        ``instance``: see ``postprocess.py``; ``semantic`` and ``panoptic``:
        see ``universal.py`` (their class regions are ``Instances.regions``).
        The masks are frame-size whatever ``mask_crops`` says: they come from
        one upsampling of the whole frame's mask logits.
        """
        mask_logits = outputs["pred_masks"]
        padded = (mask_logits.shape[-2] * _MASK_STRIDE, mask_logits.shape[-1] * _MASK_STRIDE)
        if self.task == "instance":
            return batch_inference(
                outputs["pred_logits"],
                mask_logits,
                padded_size=padded,
                image_sizes=image_sizes,
                frame_sizes=frame_sizes,
                score_threshold=self.score_threshold,
                detections_per_image=self.detections_per_image,
            )
        return [
            self._regions(
                outputs["pred_logits"][i],
                mask_logits[i],
                padded_size=padded,
                image_size=(int(image_sizes[i][0]), int(image_sizes[i][1])),
                frame_size=(int(frame_sizes[i][0]), int(frame_sizes[i][1])),
            )
            for i in range(len(image_sizes))
        ]

    def _regions(self, class_logits: Tensor, mask_logits: Tensor, **sizes: Any) -> Instances:
        """One image's semantic or panoptic result (``universal.py``)."""
        if self.task == "semantic":
            return semantic_inference(class_logits, mask_logits, **sizes)
        return panoptic_inference(
            class_logits,
            mask_logits,
            is_thing=self.is_thing,
            object_mask_threshold=self.object_mask_threshold,
            overlap_threshold=self.overlap_threshold,
            detections_per_image=self.detections_per_image,
            **sizes,
        )

    def freeze_backbone_stages(self, stages: int) -> None:
        """Stop gradients of the stem (stage 0) and backbone stages ``1..stages-1``."""
        # transformers' ResNetBackbone: embedder + encoder.stages; SwinBackbone:
        # swin.embeddings + swin.encoder.layers.
        trunk: Any = getattr(self.backbone, "body", None)
        if trunk is not None:  # small.ResNetEncoder: streamseg's own ResNet
            trunk.freeze_stages(stages)
            return
        backbone: Any = getattr(self.backbone, "swin", self.backbone)
        stem = getattr(backbone, "embedder", None) or getattr(backbone, "embeddings", None)
        blocks = getattr(backbone.encoder, "stages", None) or backbone.encoder.layers
        frozen: list[nn.Module] = [stem] if stages > 0 and stem is not None else []
        frozen += list(blocks)[: max(0, stages - 1)]
        for module in frozen:
            for p in module.parameters():
                p.requires_grad_(False)

    def train(self, mode: bool = True) -> Mask2Former:
        """Train mode, but the backbone's batch norms keep their statistics (frozen BN)."""
        super().train(mode)
        if mode:
            for m in self.backbone.modules():
                if isinstance(m, nn.BatchNorm2d):
                    m.eval()
        return self
