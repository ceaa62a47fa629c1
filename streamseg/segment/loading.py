"""Weights file -> ready model: streamseg checkpoints, torchvision ``.pth``, detectron2 ``.pkl``.

Serving (the Segmenter and hot swap), ``eval``, ``label``, ``export`` and
``weights``' check of a file all build their model here. A streamseg checkpoint's meta (written
by the trainer, see :mod:`streamseg.models.checkpoint`) names the arch, the
classes and the build options; other files go through the model's own
converter (:func:`streamseg.models.trained.load_trained_model`).
"""

from __future__ import annotations

from typing import Any

from torch import nn

__all__ = ["load_model"]


def load_model(
    arch: str, weights: str | None, options: dict[str, Any]
) -> tuple[nn.Module, tuple[str, ...]]:
    """Build ``arch`` (eval mode, CPU) with ``weights`` and its class names.

    ``weights`` may be a streamseg trainer checkpoint (its meta rebuilds the
    model; ``options`` override it), a torchvision ``.pth`` or a detectron2
    ``.pkl`` (the model's own converter), or ``None`` for random weights.

    Raises:
        CheckpointError: the file is missing, unreadable or does not fit,
            whatever its content (empty, text, random bytes, truncated,
            another architecture's weights): ``load_trained_model`` says so.
    """
    if weights is None:
        from streamseg.models import build_model

        model = build_model(arch, **options)
        return model.eval(), tuple(getattr(model, "class_names", ()))
    from streamseg.models.trained import load_trained_model

    model, names = load_trained_model(str(weights), arch=arch, **options)
    return model.eval(), names
