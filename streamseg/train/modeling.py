"""The model a training run starts from, and the meta its checkpoints carry."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from torch import nn

from streamseg.models import FAMILIES, InputSpec, arch_family, class_options
from streamseg.registry import load
from streamseg.train.config import TrainConfig, TrainModelConfig
from streamseg.train.freeze import freeze_backbone_stages

__all__ = [
    "build_train_model",
    "class_options",
    "input_spec",
    "model_meta",
    "weights_options",
]

log = logging.getLogger("streamseg.train")


def input_spec(model: nn.Module) -> InputSpec:
    """The model's :class:`InputSpec` (how it wants its images)."""
    spec = getattr(model, "input_spec", None)
    if not isinstance(spec, InputSpec):
        raise TypeError(f"{type(model).__name__} has no input_spec: not a streamseg model")
    return spec


def build_train_model(
    cfg: TrainModelConfig, class_names: Sequence[str], *, load_weights: bool = True
) -> tuple[nn.Module, dict[str, Any]]:
    """Build ``cfg.arch`` for ``class_names``, load the starting weights, freeze.

    Returns:
        the model (train mode, CPU) and the ``build_model`` options that
        rebuild it (stored in checkpoint meta).
    """
    from streamseg.models import build_model
    from streamseg.train.checkpointing import load_initial_weights

    options: dict[str, Any] = dict(cfg.options)
    if cfg.weights:
        options = {**weights_options(cfg.arch, cfg.weights), **options}
    options.update(class_options(cfg.arch, class_names))
    roi_option = FAMILIES[arch_family(cfg.arch)].roi_samples_option
    if cfg.roi_samples_per_image is not None and roi_option is not None:
        options[roi_option] = cfg.roi_samples_per_image
    model = build_model(cfg.arch, **options)
    style = getattr(model, "style", None)
    if style is not None:
        options["style"] = style  # recorded in the checkpoints' meta, which rebuild from it
    if cfg.weights and load_weights:
        source_options = {
            k: v for k, v in cfg.options.items() if k not in ("num_classes", "class_names")
        }
        for line in load_initial_weights(
            model, arch=cfg.arch, weights=cfg.weights, source_options=source_options
        ):
            log.info("%s", line)
    frozen = freeze_backbone_stages(model, cfg.freeze_backbone_stages)
    if frozen:
        log.info(
            "froze %d backbone parameters (stages < %d)", len(frozen), cfg.freeze_backbone_stages
        )
    model.train()
    return model, options


def weights_options(arch: str, weights: str) -> dict[str, Any]:
    """``build_model`` options that the starting weights fix, as the arch's family says
    (``Family.weights_options``; Mask R-CNN's ``style``).

    A fine-tune must have the structure its weights were trained with: a
    detectron2 ``.pkl`` (or a checkpoint fine-tuned from one) gives a
    detectron2-style model. Options in the config take precedence, and a
    contradiction is reported when the weights are loaded.
    """
    hook = FAMILIES[arch_family(arch)].weights_options
    fixed: dict[str, Any] = {} if hook is None else load(hook)(weights)
    return fixed


def model_meta(
    cfg: TrainConfig,
    class_names: Sequence[str],
    options: dict[str, Any],
    iteration: int,
    metrics: dict[str, Any],
) -> dict[str, Any]:
    """Plain-data meta of a checkpoint (see ``streamseg.models.checkpoint``)."""
    plain_options = {
        k: (list(v) if isinstance(v, tuple) else v)
        for k, v in options.items()
        if isinstance(v, str | int | float | bool | list | tuple | type(None))
    }
    return {
        "arch": cfg.model.arch,
        "class_names": list(class_names),
        "num_classes": len(class_names),  # with the background, for every family
        "iteration": iteration,
        "metrics": metrics,
        "model_options": plain_options,
        "train_config": cfg.model_dump(mode="json"),
    }
