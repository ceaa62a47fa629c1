"""Reading Mask R-CNN weights: torchvision ``.pth``, detectron2 ``.pkl``, our checkpoints.

Every format is turned into our (torchvision's) key names, then checked
strictly against the model: one :class:`CheckpointError` lists every
missing, unexpected and mis-shaped key.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from torch import Tensor

from streamseg.models import InputSpec
from streamseg.models.checkpoint import CheckpointError, check_state_dict, read_checkpoint
from streamseg.models.maskrcnn.model import MaskRCNN

__all__ = ["LoadedWeights", "load_weights", "read_weights"]

# torchvision < 0.13 named the mask head's convs mask_fcn1..4.
_OLD_MASK_FCN = re.compile(r"^roi_heads\.mask_head\.mask_fcn(\d+)\.(weight|bias)$")


@dataclasses.dataclass(frozen=True)
class LoadedWeights:
    """A state dict in our key names, with what the file says about its model."""

    state_dict: dict[str, Tensor]
    source: str
    class_names: tuple[str, ...] | None = None
    input_spec: InputSpec | None = None


def read_weights(path: str | Path, arch: str) -> LoadedWeights:
    """Read ``path`` for a model of ``arch``; raise :class:`CheckpointError` if unusable."""
    path = Path(path)
    if path.suffix == ".pkl":
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
    )


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
    check_state_dict(model, state, source=loaded.source, ignore_missing=("num_batches_tracked",))
    model.load_state_dict(state, strict=False)
