"""Training checkpoints (exact resume) and the starting weights of a fine-tune.

A resumable checkpoint (``last.pth``) is the model checkpoint format of
:mod:`streamseg.models.checkpoint` (``{"model": state_dict, "meta": {...}}``,
readable by ``read_checkpoint`` and ``Segmenter.load_weights``) plus one more
key, ``"train_state"``: optimiser, scheduler and gradient-scaler states, the
python / numpy / torch (and CUDA) RNG states, the data position (iteration,
epoch, seed) and the hooks' state (best metric so far). Everything loads with
``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from streamseg.models.checkpoint import CheckpointError, read_checkpoint, save_checkpoint
from streamseg.models.class_rows import remap_class_rows

__all__ = [
    "capture_rng",
    "check_style",
    "load_initial_weights",
    "read_training_state",
    "restore_rng",
    "save_training_checkpoint",
]

log = logging.getLogger("streamseg.train")


def capture_rng() -> dict[str, Any]:
    """RNG states of python, numpy, torch (CPU and every CUDA device)."""
    version, mt_state, gauss = random.getstate()
    np_state: Any = np.random.get_state()
    state: dict[str, Any] = {
        "python": [int(version), [int(v) for v in mt_state], gauss],
        "numpy": {
            "keys": torch.from_numpy(np.asarray(np_state[1], dtype=np.int64)),
            "pos": int(np_state[2]),
            "has_gauss": int(np_state[3]),
            "cached_gaussian": float(np_state[4]),
        },
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng(state: Mapping[str, Any]) -> None:
    version, mt_state, gauss = state["python"]
    random.setstate((int(version), tuple(int(v) for v in mt_state), gauss))
    npk = state["numpy"]
    np.random.set_state(
        (
            "MT19937",
            npk["keys"].numpy().astype(np.uint32),
            int(npk["pos"]),
            int(npk["has_gauss"]),
            float(npk["cached_gaussian"]),
        )
    )
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_training_checkpoint(
    path: str | Path,
    *,
    model_state: Mapping[str, Tensor],
    meta: Mapping[str, Any],
    train_state: Mapping[str, Any],
) -> None:
    """Write a resumable checkpoint atomically (temporary file, then rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save(
        {"model": dict(model_state), "meta": dict(meta), "train_state": dict(train_state)}, tmp
    )
    tmp.replace(path)


def read_training_state(
    path: str | Path,
) -> tuple[dict[str, Tensor], dict[str, Any], dict[str, Any]]:
    """``(model state, meta, train_state)`` of a resumable checkpoint."""
    path = Path(path)
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise CheckpointError(f"checkpoint {path} does not exist") from None
    except Exception as exc:
        raise CheckpointError(
            f"checkpoint {path} could not be read ({type(exc).__name__}: {exc}); "
            "delete it to start over"
        ) from None
    if not isinstance(obj, Mapping) or "train_state" not in obj:
        raise CheckpointError(
            f"{path} is a weights-only checkpoint; resuming needs the run's last.pth"
        )
    return dict(obj["model"]), dict(obj.get("meta", {})), dict(obj["train_state"])


def save_model_checkpoint(path: str | Path, model: nn.Module, meta: Mapping[str, Any]) -> None:
    """Weights plus meta, without training state (what ``serve`` loads)."""
    save_checkpoint(path, model.state_dict(), **dict(meta))


def load_initial_weights(
    model: nn.Module,
    *,
    arch: str,
    weights: str | Path,
    source_options: Mapping[str, Any],
) -> list[str]:
    """Load ``weights`` into ``model``; layers whose shape changed keep their init.

    Where the model's classes differ from the checkpoint's, the layers with
    rows per class keep the rows of the classes both have, matched by name
    (:func:`streamseg.models.class_rows.remap_class_rows`): only new
    classes start from their initialisation, and dropped classes' rows go.
    Streamseg checkpoints load directly. Other formats (torchvision,
    detectron2, Hugging Face) are converted by building ``arch`` from them
    with the model's own loader (``build_model(arch, weights=...)``) first.

    Returns:
        lines describing what was re-initialised or not found, and which
        classes were kept, added and dropped, for the log.

    Raises:
        CheckpointError: unreadable file, another architecture, or no
            parameter in common.
    """
    from streamseg.models import build_model

    # A detectron2 .pkl has no meta; only the model's converter needs to read it.
    ckpt = None if Path(weights).suffix == ".pkl" else read_checkpoint(weights)
    meta_arch = ckpt.meta.get("arch") if ckpt is not None else None
    if meta_arch is not None and meta_arch != arch:
        raise CheckpointError(
            f"checkpoint {weights} is a {meta_arch!r} model but model.arch is {arch!r}; "
            "start from a checkpoint of the same architecture"
        )
    if ckpt is not None and meta_arch is not None:
        check_style(model, ckpt.meta, str(weights))
        source = ckpt.state_dict
        source_names = ckpt.meta.get("class_names")
    else:
        converted = build_model(arch, weights=str(weights), **source_options)
        source = converted.state_dict()
        source_names = getattr(converted, "class_names", None)
    report: list[str] = []
    target_names = getattr(model, "class_names", None)
    if source_names and target_names:
        source, change = remap_class_rows(
            arch, source, tuple(source_names), model.state_dict(), tuple(target_names)
        )
        report = change.describe()
    return copy_matching(model, source, str(weights)) + report


def check_style(model: nn.Module, meta: Mapping[str, Any], name: str) -> None:
    """Refuse a streamseg checkpoint of another Mask R-CNN style than ``model``'s.

    Both styles have the same tensors, so copying would succeed and compute
    something else; the style is in the checkpoint's ``model_options``
    (absent: written before styles existed, torchvision's).
    """
    style = getattr(model, "style", None)
    if style is None:
        return
    saved = (meta.get("model_options") or {}).get("style") or "torchvision"
    if saved != style:
        raise CheckpointError(
            f"checkpoint {name} holds a {saved}-style model but the model being trained is "
            f"{style}-style; remove model.options.style (the checkpoint sets it) or set it "
            f"to {saved!r}"
        )


def copy_matching(model: nn.Module, source: Mapping[str, Tensor], name: str) -> list[str]:
    """Copy every tensor of ``source`` whose key and shape match ``model``."""
    target = model.state_dict()
    loaded, reshaped, absent = [], [], []
    for key, value in target.items():
        if key not in source:
            absent.append(key)
        elif tuple(source[key].shape) != tuple(value.shape):
            reshaped.append(f"{key} {tuple(source[key].shape)}->{tuple(value.shape)}")
        else:
            loaded.append(key)
    if not loaded:
        raise CheckpointError(
            f"checkpoint {name} shares no parameter with the model; is it for another architecture?"
        )
    new_state = {k: source[k] for k in loaded}
    model.load_state_dict(new_state, strict=False)
    report = [f"loaded {len(loaded)}/{len(target)} tensors from {name}"]
    if reshaped:
        report.append(
            f"re-initialised {len(reshaped)} tensors whose shape changed (new class count): "
            + ", ".join(reshaped)
        )
    if absent:
        report.append(
            f"{len(absent)} tensors not in the checkpoint keep their init: " + _listing(absent)
        )
    unused = [k for k in source if k not in target]
    if unused:
        report.append(f"{len(unused)} checkpoint tensors unused: " + _listing(unused))
    return report


def _listing(keys: Sequence[str], limit: int = 8) -> str:
    more = f" (and {len(keys) - limit} more)" if len(keys) > limit else ""
    return ", ".join(keys[:limit]) + more
