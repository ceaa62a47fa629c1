"""The two styles of Mask R-CNN: torchvision's and detectron2's.

Both have the same layers and parameter shapes (so one state-dict layout
serves both), but detectron2's R50-FPN computes a few things differently.
A style is a plain ``build_model`` option (``style="detectron2"``), which a
detectron2 ``.pkl`` sets by itself and the trainer stores in its checkpoints'
``model_options``, so a fine-tuned model is rebuilt the same way.

========================  ========================  ==============================
                          torchvision               detectron2
========================  ========================  ==============================
bottleneck stride         in the 3x3 conv           in the first 1x1 conv (MSRA)
input                     RGB in [0, 1], ImageNet   BGR in [0, 255], mean
                          mean/std                  (103.53, 116.28, 123.675), std 1
RoIAlign (box and mask)   ``aligned=False``,        ``aligned=True`` (half-pixel
                          2x2 samples per bin       shift), adaptive sample count
base anchors              rounded to integers       exact
anchor strides            padded size // grid size  ``2 ** level`` (P6: 64)
proposals dropped         narrower than 1e-3 px     empty (zero width or height)
proposals ranked by       sigmoid(objectness)       objectness logit
detections dropped        narrower than 1e-2 px,    empty, after NMS
                          before NMS
========================  ========================  ==============================
"""

from __future__ import annotations

import dataclasses

from streamseg.models import InputSpec

__all__ = ["DETECTRON2_INPUT", "STYLES", "Style"]

# detectron2's MSRA ResNets were trained on BGR images in [0, 255] with
# these per-channel means (B, G, R) and no division by a std.
DETECTRON2_INPUT = InputSpec(
    channel_order="BGR",
    scale=1.0,
    mean=(103.530, 116.280, 123.675),
    std=(1.0, 1.0, 1.0),
)


@dataclasses.dataclass(frozen=True)
class Style:
    """What one style fixes in the model's structure and inference.

    Attributes:
        name: ``"torchvision"`` or ``"detectron2"``.
        stride_in_1x1: bottleneck blocks stride in their first 1x1 conv
            instead of their 3x3 conv.
        input_spec: colour order, scale, mean and std of the input (the
            sizes come from the ``min_size``/``max_size`` options).
        roi_aligned: RoIAlign shifts box coordinates by half a pixel.
        roi_sampling_ratio: RoIAlign samples per bin side; 0: adaptive
            (``ceil(roi side / bins)``).
        round_anchors: base anchors are rounded to integer pixels.
        fixed_anchor_strides: anchors are placed every ``2 ** level`` pixels
            instead of every ``padded size // feature size`` pixels (these
            differ on P6 when the padded size over 32 is odd).
        rpn_min_size: proposals narrower or shorter than this are dropped
            before NMS; 0 drops only empty ones.
        rpn_rank_by_logits: proposals are ranked by objectness logits (equal
            to ranking by probability except where float32 sigmoid rounds
            several logits to 1.0).
        roi_min_box_size: detections narrower or shorter than this are
            dropped before NMS.
        roi_drop_empty: detections of zero width or height are dropped
            after NMS.
    """

    name: str
    stride_in_1x1: bool
    input_spec: InputSpec
    roi_aligned: bool
    roi_sampling_ratio: int
    round_anchors: bool
    fixed_anchor_strides: bool
    rpn_min_size: float
    rpn_rank_by_logits: bool
    roi_min_box_size: float
    roi_drop_empty: bool


STYLES: dict[str, Style] = {
    "torchvision": Style(
        name="torchvision",
        stride_in_1x1=False,
        input_spec=InputSpec(),
        roi_aligned=False,
        roi_sampling_ratio=2,
        round_anchors=True,
        fixed_anchor_strides=False,
        rpn_min_size=1e-3,
        rpn_rank_by_logits=False,
        roi_min_box_size=1e-2,
        roi_drop_empty=False,
    ),
    "detectron2": Style(
        name="detectron2",
        stride_in_1x1=True,
        input_spec=DETECTRON2_INPUT,
        roi_aligned=True,
        roi_sampling_ratio=0,
        round_anchors=False,
        fixed_anchor_strides=True,
        rpn_min_size=0.0,
        rpn_rank_by_logits=True,
        roi_min_box_size=0.0,
        roi_drop_empty=True,
    ),
}
