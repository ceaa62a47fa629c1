"""Reading Mask R-CNN weights: torchvision ``.pth``, detectron2 ``.pkl``, our checkpoints.

Every format is turned into our (torchvision's) key names, then checked
strictly against the model: one :class:`CheckpointError` lists every
missing, unexpected and mis-shaped key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from torch import Tensor

from streamseg.models.checkpoint import CheckpointError, check_state_dict, read_checkpoint
from streamseg.models.maskrcnn.loaded import LoadedWeights
from streamseg.models.maskrcnn.model import MaskRCNN

__all__ = ["load_weights", "read_weights", "recorded_style", "weights_style"]

# torchvision < 0.13 named the mask head's convs mask_fcn1..4.
_OLD_MASK_FCN = re.compile(r"^roi_heads\.mask_head\.mask_fcn(\d+)\.(weight|bias)$")


# Detectron2 model-zoo files hold this architecture (see detectron2.py).
DETECTRON2_ARCH = "maskrcnn_r50_fpn"


def read_weights(path: str | Path, arch: str) -> LoadedWeights:
    """Read ``path`` for a model of ``arch``; raise :class:`CheckpointError` if unusable."""
    path = Path(path)
    if path.suffix == ".pkl":
        if arch != DETECTRON2_ARCH:
            raise CheckpointError(
                f"checkpoint {path} is a detectron2 .pkl, which loads into {DETECTRON2_ARCH} "
                f"only (detectron2's R50-FPN Mask R-CNN), not {arch!r}"
            )
        from streamseg.models.maskrcnn.detectron2 import read_detectron2

        return read_detectron2(path)
    ckpt = read_checkpoint(path)
    meta_arch = ckpt.meta.get("arch")
    if meta_arch is not None and meta_arch != arch:
        raise CheckpointError(
            f"checkpoint {path} holds a {meta_arch!r} model, not {arch!r}; "
            "set model.arch to match the file"
        )
    names = ckpt.meta.get("class_names")
    return LoadedWeights(
        state_dict=upgrade_torchvision_keys(ckpt.state_dict),
        source=f"{path} ({'streamseg' if meta_arch else 'torchvision'} format)",
        class_names=tuple(names) if names else None,
        style=recorded_style(ckpt.meta),
    )


def recorded_style(meta: Mapping[str, Any]) -> str | None:
    """The style a streamseg checkpoint's meta records (``None`` for other files).

    Checkpoints written before styles existed are torchvision-style.
    """
    if "arch" not in meta:
        return None
    options = meta.get("model_options") or {}
    return str(options.get("style") or "torchvision")


def weights_options(path: str | Path) -> dict[str, str]:
    """The ``build_model`` options weights at ``path`` fix: ``style`` when they say
    one (the family's ``Family.weights_options``, for a fine-tune's start)."""
    style = weights_style(path)
    return {"style": style} if style else {}


def weights_style(path: str | Path) -> str | None:
    """The style weights at ``path`` fix, without converting them.

    A ``.pkl`` is detectron2's; a streamseg checkpoint says in its meta;
    anything else, or a file that cannot be read, says nothing (``None``).
    """
    path = Path(path)
    if path.suffix == ".pkl":
        return "detectron2"
    try:
        return recorded_style(read_checkpoint(path).meta)
    except CheckpointError:
        return None


def upgrade_torchvision_keys(state: dict[str, Tensor]) -> dict[str, Tensor]:
    """Rename old torchvision keys (``mask_fcn{k}``) to the current layout."""
    out = {}
    for key, value in state.items():
        m = _OLD_MASK_FCN.match(key)
        if m:
            key = f"roi_heads.mask_head.{int(m.group(1)) - 1}.0.{m.group(2)}"
        out[key] = value
    return out


def load_weights(model: MaskRCNN, loaded: LoadedWeights) -> None:
    """Check ``loaded`` against ``model`` strictly, then copy it in."""
    expected = model.state_dict()
    state = {
        k: v
        for k, v in loaded.state_dict.items()
        if not (k.endswith("num_batches_tracked") and k not in expected)
    }
    check_state_dict(
        model,
        state,
        source=loaded.source,
        ignore_missing=("num_batches_tracked",),
        key_name=loaded.key_name,
    )
    model.load_state_dict(state, strict=False)
