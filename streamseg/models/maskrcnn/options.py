"""``model.maskrcnn:``: the options of pipeline.yaml's model section that only Mask R-CNN has.

The family's row (``streamseg.models.FAMILIES["maskrcnn"].options``) names
this model; ``streamseg.segment.config.ModelConfig`` gives every family
with one its own section, named after the family::

    model:
      arch: maskrcnn_r50_fpn_v2
      maskrcnn:
        rpn_nms_threshold: 0.6

Unset options keep the architecture's own defaults. Importing it imports no
torch.
"""

from __future__ import annotations

from pydantic import Field

from streamseg.configbase.base import StrictModel

__all__ = ["MaskRCNNOptions"]


class MaskRCNNOptions(StrictModel):
    """Mask R-CNN's own serving options (``build_model`` keyword arguments)."""

    rpn_nms_threshold: float | None = Field(
        default=None, gt=0, le=1, description="IoU above which the RPN drops a proposal"
    )
