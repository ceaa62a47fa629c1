"""Loading a trained model for inference: a checkpoint (or foreign weights) -> eval-mode model.

Used by serving (the Segmenter), evaluation, labelling, ``weights verify``
and hot swap; the checkpoint's meta (written by the trainer) says how to
rebuild the model. It is the one owner of "is this checkpoint usable":
whatever is wrong with the file, the caller gets a ``CheckpointError`` that
says so and how to fix it, never a ``KeyError`` from deep inside a converter.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streamseg.errors import StartupError
from streamseg.models import build_model, class_options
from streamseg.models.checkpoint import CheckpointError, check_state_dict, read_checkpoint

if TYPE_CHECKING:
    from torch import nn

__all__ = ["load_trained_model"]


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
        CheckpointError: the file is missing, unreadable or does not fit,
            whatever its content (empty, text, random bytes, truncated,
            another architecture's weights), or no ``arch`` is known.
        StartupError: another mistake, told as it is: a missing extra
            (``MissingTransformersError``) is not the weights' fault.
    """
    try:
        return _load(weights, arch, overrides)
    except StartupError:  # CheckpointError, MissingTransformersError: already says what to do
        raise
    except Exception as exc:  # a converter that fails on an odd file, a torch.load error
        what = f"{arch!r} weights" if arch else "a model checkpoint"
        raise CheckpointError(
            f"{weights} cannot be loaded as {what} ({type(exc).__name__}: "
            f"{_first_line(exc)}); use a checkpoint of `streamseg train`, a torchvision "
            ".pth or a detectron2 .pkl of this arch"
        ) from None


def _load(
    weights: str, arch: str | None, overrides: dict[str, Any]
) -> tuple[nn.Module, tuple[str, ...]]:
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


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else "no message"


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
