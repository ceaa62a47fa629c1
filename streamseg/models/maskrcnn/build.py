"""Builders of the three Mask R-CNN architectures, with their options.

``maskrcnn_r50_fpn`` and ``maskrcnn_r50_fpn_v2`` are torchvision's two
COCO models (same structure and key names, so their ``.pth`` files load);
``maskrcnn_small`` is a narrow ResNet-18-style variant with the same heads
for real time on a CPU and for tests. Every builder takes the same keyword
options (``None`` keeps the default):

``num_classes`` (with background), ``class_names``, ``weights``,
``score_threshold``, ``nms_threshold``, ``rpn_nms_threshold``,
``rpn_pre_nms_top_n`` / ``rpn_post_nms_top_n`` (test time; per level /
per image), ``rpn_pre_nms_top_n_train`` / ``rpn_post_nms_top_n_train``,
``detections_per_image``, ``min_size``, ``max_size``,
``box_batch_size_per_image``, ``mask_threshold``, and ``style``:
``"torchvision"`` (the default) or ``"detectron2"`` (see
:mod:`streamseg.models.maskrcnn.styles`). Weights that say their style (a
detectron2 ``.pkl``, a checkpoint the trainer wrote) set it when it is not
given; a ``style`` that contradicts the weights is a ``CheckpointError``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from streamseg.models import InputSpec
from streamseg.models.maskrcnn.backbone import BasicBlock, Bottleneck, ResNet
from streamseg.models.maskrcnn.classes import COCO_CLASS_NAMES
from streamseg.models.maskrcnn.fpn import BackboneWithFPN
from streamseg.models.maskrcnn.heads import (
    BoxPredictor,
    ConvFCHead,
    MaskHead,
    MaskPredictor,
    TwoMLPHead,
)
from streamseg.models.maskrcnn.model import MaskRCNN
from streamseg.models.maskrcnn.roi_heads import RoIHeads, RoISettings
from streamseg.models.maskrcnn.rpn import RPN, AnchorGenerator, RPNHead, RPNSettings
from streamseg.models.maskrcnn.styles import STYLES, Style

__all__ = ["ArchSpec", "build", "maskrcnn_r50_fpn", "maskrcnn_r50_fpn_v2", "maskrcnn_small"]

SYNTHETIC_CLASS_NAMES = ("__background__", "disc", "square", "triangle", "star")


@dataclasses.dataclass(frozen=True)
class ArchSpec:
    """The structure of one architecture and its default options."""

    name: str
    bottleneck: bool = True
    depths: tuple[int, ...] = (3, 4, 6, 3)
    widths: tuple[int, ...] = (64, 128, 256, 512)
    stem_width: int = 64
    stem_kernel: int = 7
    fpn_stages: tuple[int, ...] = (1, 2, 3, 4)
    fpn_channels: int = 256
    v2: bool = False  # BN in FPN and heads, 2-conv RPN head, 4conv1fc box head
    box_hidden: int = 1024
    mask_channels: int = 256
    mask_layers: int = 4
    anchor_sizes: tuple[int, ...] = (32, 64, 128, 256, 512)
    class_names: tuple[str, ...] = COCO_CLASS_NAMES
    defaults: tuple[tuple[str, Any], ...] = ()


_R50 = ArchSpec(name="maskrcnn_r50_fpn")
_R50_V2 = dataclasses.replace(_R50, name="maskrcnn_r50_fpn_v2", v2=True)
SMALL_SPEC = ArchSpec(
    name="maskrcnn_small",
    bottleneck=False,
    depths=(1, 1, 2, 1),
    widths=(24, 48, 96, 192),
    stem_width=24,
    stem_kernel=3,
    fpn_stages=(2, 3, 4),
    fpn_channels=64,
    box_hidden=256,
    mask_channels=32,
    mask_layers=4,
    anchor_sizes=(16, 32, 64, 128),
    class_names=SYNTHETIC_CLASS_NAMES,
    defaults=(
        ("min_size", 360),
        ("max_size", 640),
        ("rpn_pre_nms_top_n", 300),
        ("rpn_post_nms_top_n", 100),
        ("rpn_pre_nms_top_n_train", 500),
        ("rpn_post_nms_top_n_train", 250),
        ("box_batch_size_per_image", 128),
        ("score_threshold", 0.3),
        ("detections_per_image", 50),
    ),
)

_OPTION_DEFAULTS: dict[str, Any] = {
    "score_threshold": 0.05,
    "nms_threshold": 0.5,
    "rpn_nms_threshold": 0.7,
    "rpn_pre_nms_top_n": 1000,
    "rpn_post_nms_top_n": 1000,
    "rpn_pre_nms_top_n_train": 2000,
    "rpn_post_nms_top_n_train": 2000,
    "detections_per_image": 100,
    "min_size": 800,
    "max_size": 1333,
    "box_batch_size_per_image": 512,
    "mask_threshold": 0.5,
}


def maskrcnn_r50_fpn(**options: Any) -> MaskRCNN:
    """torchvision's ``maskrcnn_resnet50_fpn`` (v1); 91 COCO classes by default."""
    return build(_R50, **options)


def maskrcnn_r50_fpn_v2(**options: Any) -> MaskRCNN:
    """torchvision's ``maskrcnn_resnet50_fpn_v2``; 91 COCO classes by default."""
    return build(_R50_V2, **options)


def maskrcnn_small(**options: Any) -> MaskRCNN:
    """A narrow ResNet-18 FPN Mask R-CNN for CPU real time (synthetic classes by default)."""
    return build(SMALL_SPEC, **options)


def build(
    spec: ArchSpec,
    *,
    num_classes: int | None = None,
    class_names: Sequence[str] | None = None,
    weights: str | None = None,
    style: str | None = None,
    **options: Any,
) -> MaskRCNN:
    """Build ``spec`` with ``options`` (see the module docstring); load ``weights``."""
    from streamseg.models.maskrcnn.weights import load_weights, read_weights

    unknown = sorted(set(options) - set(_OPTION_DEFAULTS))
    if unknown:
        raise ValueError(
            f"unknown {spec.name} option(s): {', '.join(unknown)}; valid: num_classes, "
            f"class_names, weights, style, {', '.join(sorted(_OPTION_DEFAULTS))}"
        )
    if style is not None and style not in STYLES:
        raise ValueError(f"style must be one of {', '.join(STYLES)}, got {style!r}")
    loaded = None
    if weights is not None:
        loaded = read_weights(weights, spec.name)
        if num_classes is None and class_names is None and loaded.class_names:
            class_names = loaded.class_names
        style = _weights_style(style, loaded.style, loaded.source)
    names = _class_names(spec, num_classes, class_names)
    opts = {**_OPTION_DEFAULTS, **dict(spec.defaults)}
    opts.update({k: v for k, v in options.items() if v is not None})
    chosen = STYLES[style or "torchvision"]
    model = _assemble(spec, names, opts, chosen, loaded.input_spec if loaded else None)
    if loaded is not None:
        load_weights(model, loaded)
    model.eval()
    return model


def _weights_style(asked: str | None, recorded: str | None, source: str) -> str | None:
    """The style to build: the one asked for, else the one the weights record."""
    from streamseg.models.checkpoint import CheckpointError

    if asked is not None and recorded is not None and asked != recorded:
        raise CheckpointError(
            f"checkpoint {source} holds a {recorded}-style model but style={asked!r} was "
            f"asked for; leave style out (the file sets it) or set it to {recorded!r}"
        )
    return asked or recorded


def _class_names(
    spec: ArchSpec, num_classes: int | None, class_names: Sequence[str] | None
) -> tuple[str, ...]:
    if class_names is not None:
        names = tuple(str(n) for n in class_names)
        if not names or names[0] != "__background__":
            raise ValueError("class_names[0] must be '__background__' (label 0)")
        if num_classes is not None and num_classes != len(names):
            raise ValueError(
                f"num_classes={num_classes} but class_names has {len(names)} names "
                "(both count the background)"
            )
        return names
    if num_classes is None or num_classes == len(spec.class_names):
        return spec.class_names
    if num_classes < 2:
        raise ValueError(f"num_classes must be >= 2 (background + 1 class), got {num_classes}")
    return ("__background__", *(f"class_{i}" for i in range(1, num_classes)))


def _anchor_strides(spec: ArchSpec) -> tuple[int, ...]:
    """Pixels per location on each RPN level: the FPN stages', then the pooled level's."""
    strides = [2 ** (stage + 1) for stage in spec.fpn_stages]
    return (*strides, strides[-1] * 2)


def _assemble(
    spec: ArchSpec,
    names: tuple[str, ...],
    o: dict[str, Any],
    style: Style,
    input_spec: InputSpec | None,
) -> MaskRCNN:
    block = Bottleneck if spec.bottleneck else BasicBlock
    body = ResNet(
        block,
        spec.depths,
        spec.widths,
        spec.stem_width,
        spec.stem_kernel,
        stride_in_1x1=style.stride_in_1x1,
    )
    c = spec.fpn_channels
    backbone = BackboneWithFPN(body, c, norm=spec.v2, stages=spec.fpn_stages)
    anchors = AnchorGenerator(
        spec.anchor_sizes,
        rounded=style.round_anchors,
        strides=_anchor_strides(spec) if style.fixed_anchor_strides else None,
    )
    rpn = RPN(
        anchors,
        RPNHead(c, anchors.num_anchors, conv_depth=2 if spec.v2 else 1),
        RPNSettings(
            pre_nms_top_n_test=int(o["rpn_pre_nms_top_n"]),
            post_nms_top_n_test=int(o["rpn_post_nms_top_n"]),
            pre_nms_top_n_train=int(o["rpn_pre_nms_top_n_train"]),
            post_nms_top_n_train=int(o["rpn_post_nms_top_n_train"]),
            nms_threshold=float(o["rpn_nms_threshold"]),
            min_size=style.rpn_min_size,
            rank_by_logits=style.rpn_rank_by_logits,
        ),
    )
    box_head: ConvFCHead | TwoMLPHead
    if spec.v2:
        box_head = ConvFCHead(c, 7, 4, spec.box_hidden)
    else:
        box_head = TwoMLPHead(c * 7 * 7, spec.box_hidden)
    roi = RoIHeads(
        box_head,
        BoxPredictor(spec.box_hidden, len(names)),
        MaskHead(c, spec.mask_channels, spec.mask_layers, norm=spec.v2),
        MaskPredictor(spec.mask_channels, spec.mask_channels, len(names)),
        RoISettings(
            score_threshold=float(o["score_threshold"]),
            nms_threshold=float(o["nms_threshold"]),
            detections_per_image=int(o["detections_per_image"]),
            batch_size_per_image=int(o["box_batch_size_per_image"]),
            sampling_ratio=style.roi_sampling_ratio,
            aligned=style.roi_aligned,
            min_box_size=style.roi_min_box_size,
            drop_empty=style.roi_drop_empty,
        ),
    )
    base = input_spec or style.input_spec
    spec_in = dataclasses.replace(base, min_size=int(o["min_size"]), max_size=int(o["max_size"]))
    if spec_in.max_size < spec_in.min_size:
        raise ValueError(f"max_size ({spec_in.max_size}) must be >= min_size ({spec_in.min_size})")
    return MaskRCNN(
        backbone,
        rpn,
        roi,
        input_spec=spec_in,
        class_names=names,
        mask_threshold=float(o["mask_threshold"]),
        style=style.name,
    )
