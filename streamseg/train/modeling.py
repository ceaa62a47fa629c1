"""The model a training run starts from, and the meta its checkpoints carry."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from torch import nn

from streamseg.config.model import arch_family, class_options
from streamseg.models import InputSpec
from streamseg.train.config import ModelConfig, TrainConfig
from streamseg.train.freeze import freeze_backbone_stages

__all__ = [
    "build_train_model",
    "class_options",
    "input_spec",
    "load_trained_model",
    "model_meta",
    "weights_options",
]

log = logging.getLogger("streamseg.train")

# The build_model option each family calls "RoI samples per image".
_ROI_OPTION = {"maskrcnn": "box_batch_size_per_image", "mask2former": "num_points"}


def input_spec(model: nn.Module) -> InputSpec:
    """The model's :class:`InputSpec` (how it wants its images)."""
    spec = getattr(model, "input_spec", None)
    if not isinstance(spec, InputSpec):
        raise TypeError(f"{type(model).__name__} has no input_spec: not a streamseg model")
    return spec


def build_train_model(
    cfg: ModelConfig, class_names: Sequence[str], *, load_weights: bool = True
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
    if cfg.roi_samples_per_image is not None:
        options[_ROI_OPTION[arch_family(cfg.arch)]] = cfg.roi_samples_per_image
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
    """``build_model`` options that the starting weights fix (Mask R-CNN's ``style``).

    A fine-tune must have the structure its weights were trained with: a
    detectron2 ``.pkl`` (or a checkpoint fine-tuned from one) gives a
    detectron2-style model. Options in the config take precedence, and a
    contradiction is reported when the weights are loaded.
    """
    if arch_family(arch) != "maskrcnn":
        return {}
    from streamseg.models.maskrcnn.weights import weights_style

    style = weights_style(weights)
    return {"style": style} if style else {}


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


def load_trained_model(
    weights: str, *, arch: str | None = None, **overrides: Any
) -> tuple[nn.Module, tuple[str, ...]]:
    """Build the model a checkpoint describes and load it strictly (eval mode).

    A streamseg checkpoint carries ``arch``, ``class_names`` and the build
    options in its meta; other files and folders (a Hugging Face
    Mask2Former download) need ``arch`` and load through the model's own
    converter. ``overrides`` are further ``build_model`` options (e.g.
    ``score_threshold``); classes given there win over the checkpoint's.

    Returns:
        the model and its class names (``__background__`` first).

    Raises:
        CheckpointError: unreadable, mismatched, or no ``arch`` known.
    """
    from streamseg.models import build_model
    from streamseg.models.checkpoint import CheckpointError, check_state_dict, read_checkpoint

    # A detectron2 .pkl or a folder (a Hugging Face model download) carries no
    # streamseg meta: the model's own converter reads it (once).
    path = Path(weights)
    ckpt = None if path.suffix == ".pkl" or path.is_dir() else read_checkpoint(weights)
    meta: dict[str, Any] = ckpt.meta if ckpt is not None else {}
    meta_arch = meta.get("arch")
    if arch is not None and meta_arch is not None and arch != meta_arch:
        raise CheckpointError(f"{weights} holds a {meta_arch!r} model, not {arch!r}")
    arch = arch or meta_arch
    if arch is None:
        raise CheckpointError(f"{weights} does not say its architecture; pass --arch")
    if ckpt is None or meta_arch is None:
        model = build_model(arch, weights=weights, **overrides)
    else:
        options = {
            k: v
            for k, v in meta.get("model_options", {}).items()
            if k not in ("num_classes", "class_names")
        }
        saved_style = options.get("style")
        if overrides.get("style") not in (None, saved_style or "torchvision"):
            raise CheckpointError(
                f"{weights} holds a {saved_style or 'torchvision'}-style model, "
                f"not style={overrides['style']!r}"
            )
        options.update(_checkpoint_classes(arch, meta["class_names"], overrides))
        options.update(overrides)
        model = build_model(arch, **options)
        check_state_dict(model, ckpt.state_dict, source=str(weights))
        model.load_state_dict(ckpt.state_dict)
    model.eval()
    names = tuple(getattr(model, "class_names", meta.get("class_names", ())))
    return model, names


def _checkpoint_classes(
    arch: str, names: Sequence[str], overrides: dict[str, Any]
) -> dict[str, Any]:
    """The checkpoint's class options, unless ``overrides`` name other classes.

    Then the caller's classes win and the strict key check says whether the
    weights fit them (e.g. ``class_predictor.weight: checkpoint (3, 256) vs
    model (5, 256)``), rather than an error about two class lists.
    """
    own = class_options(arch, names)
    if (
        "class_names" in overrides
        or overrides.get("num_classes", own["num_classes"]) != own["num_classes"]
    ):
        return {}
    return own
