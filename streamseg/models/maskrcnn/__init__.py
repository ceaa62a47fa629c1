"""Mask R-CNN (ResNet + FPN) in plain PyTorch, with torchvision's key names.

``build.py`` holds the builders of ``maskrcnn_r50_fpn``, ``maskrcnn_r50_fpn_v2``
and ``maskrcnn_small`` (use :func:`streamseg.models.build_model`); the parts
are one module each: ``backbone`` (ResNet, frozen BN), ``fpn``, ``rpn``
(anchors, head, proposals, losses), ``heads`` and ``roi_heads`` (boxes,
masks, losses), ``model`` (the flow and post-processing), ``weights``
(checkpoint formats).
"""
