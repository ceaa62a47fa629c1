"""Mask2Former (masked-attention mask transformer) for instance segmentation.

Built with ``streamseg.models.build_model("mask2former_r50" | "mask2former_swin_t")``;
the modules here are imported only then. See ``docs/mask2former.md``.
"""
