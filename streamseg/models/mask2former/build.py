"""Builders named in ``streamseg.models.ARCHITECTURES`` and weight loading.

``mask2former_r50(**options)`` / ``mask2former_swin_t(**options)`` take:

* ``num_classes`` (object classes, NOT counting the background; default 80)
  and ``class_names`` (``num_classes + 1`` names, ``"__background__"`` first);
* ``weights``: a state dict in the Hugging Face layout
  (``facebook/mask2former-swin-tiny-coco-instance``: ``model.safetensors``
  or ``pytorch_model.bin``) or a streamseg trainer checkpoint; checked
  strictly;
* ``score_threshold`` (0.05), ``detections_per_image`` (100), ``min_size``
  (800), ``max_size`` (1333);
* training: ``num_points`` (12544 points per mask), ``no_object_weight``
  (0.1), ``drop_path_rate`` (Swin, 0.3);
* ``num_queries`` (100);
* ``task``: ``instance`` (default), ``semantic`` or ``panoptic`` (see
  ``universal.py``); ``stuff_classes``: panoptic, the class names that are
  stuff (regions), the rest being things; ``object_mask_threshold`` (0.8)
  and ``overlap_threshold`` (0.8): panoptic merging.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from torch import Tensor

from streamseg.models import TASKS
from streamseg.models.checkpoint import CheckpointError, check_state_dict, read_checkpoint
from streamseg.models.mask2former.config import hf_config
from streamseg.models.mask2former.convert import UNUSED_MODULE_KEYS, to_model_keys
from streamseg.models.mask2former.model import Mask2Former

__all__ = [
    "build_mask2former",
    "load_weights",
    "mask2former_r50",
    "mask2former_small",
    "mask2former_swin_t",
    "mask2former_tiny",
    "read_hf_state_dict",
]

log = logging.getLogger("streamseg.models")

_OPTIONS = (
    "num_classes",
    "class_names",
    "weights",
    "score_threshold",
    "detections_per_image",
    "min_size",
    "max_size",
    "num_points",
    "num_queries",
    "no_object_weight",
    "drop_path_rate",
    "task",
    "stuff_classes",
    "object_mask_threshold",
    "overlap_threshold",
)
# Options of other architectures that make no sense here, with the reason.
_NOT_HERE = {
    "nms_threshold": "Mask2Former has no NMS (each query is one instance)",
    "rpn_nms_threshold": "Mask2Former has no RPN",
    "rpn_pre_nms_top_n": "Mask2Former has no RPN",
    "rpn_post_nms_top_n": "Mask2Former has no RPN",
    "box_batch_size_per_image": "Mask2Former samples mask points instead: use num_points",
}


def mask2former_r50(**options: Any) -> Mask2Former:
    """Mask2Former with a ResNet-50 backbone."""
    return build_mask2former("r50", **options)


def mask2former_swin_t(**options: Any) -> Mask2Former:
    """Mask2Former with a Swin-Tiny backbone (``facebook/mask2former-swin-tiny-*``)."""
    return build_mask2former("swin_t", **options)


def mask2former_small(**options: Any) -> Mask2Former:
    """Mask2Former on ``maskrcnn_small``'s narrow ResNet-18 (a small, useful model).

    Its backbone can start from a trained ``maskrcnn_small`` checkpoint
    (``small.backbone_from_maskrcnn``); defaults: ``small.SMALL_DEFAULTS``.
    """
    from streamseg.models.mask2former.small import SMALL_DEFAULTS

    return build_mask2former("small", **{**SMALL_DEFAULTS, **options})


def mask2former_tiny(**options: Any) -> Mask2Former:
    """A few-channel Mask2Former for tests; not a useful model."""
    return build_mask2former("tiny", **options)


def _class_names(
    num_classes: int | None, names: Sequence[str] | None
) -> tuple[int, tuple[str, ...]]:
    if names is None:
        n = 80 if num_classes is None else int(num_classes)
        return n, ("__background__", *(f"class_{i}" for i in range(1, n + 1)))
    names = tuple(names)
    if not names or names[0] != "__background__":
        raise ValueError("class_names[0] must be '__background__' (label 0)")
    if num_classes is not None and len(names) != num_classes + 1:
        raise ValueError(
            f"class_names has {len(names)} names but num_classes is {num_classes}: for "
            "Mask2Former num_classes does not count the background, so class_names needs "
            "num_classes + 1 names"
        )
    return len(names) - 1, names


def build_mask2former(backbone: str, **options: Any) -> Mask2Former:
    """Build Mask2Former with ``backbone`` (``r50``, ``swin_t``, ``tiny``); see module doc."""
    for key in options:
        if key in _NOT_HERE:
            raise ValueError(f"option {key!r} does not apply: {_NOT_HERE[key]}")
        if key not in _OPTIONS:
            raise ValueError(f"unknown Mask2Former option {key!r}; valid: {', '.join(_OPTIONS)}")
    num_classes, names = _class_names(options.get("num_classes"), options.get("class_names"))
    if num_classes < 1:
        raise ValueError(f"num_classes must be >= 1 (object classes), got {num_classes}")
    _check_task(options, names)
    config_options = {
        k: options[k]
        for k in ("num_points", "num_queries", "no_object_weight", "drop_path_rate")
        if k in options
    }
    model = Mask2Former(
        hf_config(backbone, num_classes=num_classes, **config_options),
        class_names=names,
        encoder=_encoder(backbone),
        **{
            k: options[k]
            for k in (
                "score_threshold",
                "detections_per_image",
                "min_size",
                "max_size",
                "task",
                "stuff_classes",
                "object_mask_threshold",
                "overlap_threshold",
            )
            if k in options
        },
    )
    if options.get("weights"):
        load_weights(model, options["weights"])
    return model.eval()


def _encoder(backbone: str) -> Any:
    """streamseg's own trunk where ``backbone`` has one (``small``), else None."""
    if backbone != "small":
        return None
    from streamseg.models.mask2former.small import small_encoder

    return small_encoder()


def _check_task(options: dict[str, Any], names: Sequence[str]) -> None:
    """``ValueError`` naming the option when ``task`` / ``stuff_classes`` do not fit."""
    task = options.get("task", "instance")
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; valid: {', '.join(TASKS)}")
    stuff = list(options.get("stuff_classes") or ())
    unknown = [s for s in stuff if s not in names[1:]]
    if unknown:
        raise ValueError(
            f"stuff_classes: {unknown[0]!r} is not one of the model's classes "
            f"({', '.join(names[1:])})"
        )
    if task == "panoptic" and not stuff:
        log.warning(
            "Mask2Former task panoptic without stuff_classes: every class is a thing (no "
            "regions); name the stuff classes (model.stuff_classes in pipeline.yaml)"
        )
    for key in ("object_mask_threshold", "overlap_threshold"):
        value = options.get(key, 0.8)
        if not 0.0 <= float(value) <= 1.0:
            raise ValueError(f"{key} must be in [0, 1], got {value}")


# Weight files of a Hugging Face model folder, in the order transformers tries them.
_FOLDER_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")


def read_hf_state_dict(path: str | Path) -> dict[str, Tensor]:
    """Tensors of a ``.safetensors``/``.bin``/``.pth`` file, a trainer checkpoint, or a
    Hugging Face model folder (``model.safetensors``, sharded or not, or
    ``pytorch_model.bin``)."""
    path = Path(path)
    if path.is_dir():
        for name in _FOLDER_FILES:
            if (path / name).exists():
                return read_hf_state_dict(path / name)
        raise CheckpointError(
            f"{path} is a folder without {', '.join(_FOLDER_FILES)}; point `weights` at the "
            "weights file or a Hugging Face model folder"
        )
    if path.name.endswith(".index.json"):
        return _read_sharded(path)
    if path.suffix != ".safetensors":
        return read_checkpoint(path).state_dict
    if not path.exists():
        raise CheckpointError(f"checkpoint {path} does not exist")
    try:
        from safetensors.torch import load_file
    except ImportError:
        raise CheckpointError(
            f"reading {path} needs the `safetensors` package: pip install safetensors"
        ) from None
    try:
        return dict(load_file(str(path)))
    except Exception as exc:  # safetensors raises its own SafetensorError
        raise CheckpointError(
            f"checkpoint {path} is not a readable safetensors file ({exc})"
        ) from None


def _read_sharded(index: Path) -> dict[str, Tensor]:
    import json

    try:
        weight_map = json.loads(index.read_text())["weight_map"]
        shards = sorted(set(weight_map.values()))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CheckpointError(f"{index} is not a safetensors shard index ({exc})") from None
    state: dict[str, Tensor] = {}
    for shard in shards:
        state.update(read_hf_state_dict(index.parent / shard))
    return state


def load_weights(model: Mask2Former, path: str | Path) -> None:
    """Load Hugging Face-layout weights into ``model`` after a strict key check.

    Keys may be named as in hub files (transformers 4) or as transformers 5's
    modules (see ``convert.py``). ``criterion.empty_weight`` (the loss's class
    weights) and Swin's unused final norm may be absent.

    Raises:
        CheckpointError: unreadable file, or missing / unexpected / mis-shaped keys.
    """
    state = to_model_keys(read_hf_state_dict(path))
    check_state_dict(
        model,
        state,
        source=f"{path} (Hugging Face Mask2Former layout)",
        ignore_missing=("criterion.empty_weight", "num_batches_tracked", *UNUSED_MODULE_KEYS),
    )
    model.load_state_dict(state, strict=False)
