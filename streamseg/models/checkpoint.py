"""Loading checkpoints safely and checking them strictly.

* ``.pth`` / ``.pt`` files load with ``torch.load(weights_only=True)``: no
  code in a checkpoint ever runs.
* pickled ``.pkl`` files (detectron2's model zoo) go through
  :class:`RestrictedUnpickler`, which builds only plain containers and
  numpy arrays.
* :func:`check_state_dict` compares a state dict with a model and raises one
  :class:`CheckpointError` listing every missing, unexpected and mis-shaped
  key, so a wrong file is named as such instead of failing deep in a forward.
"""

from __future__ import annotations

import dataclasses
import pickle
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from streamseg.errors import StartupError

__all__ = [
    "Checkpoint",
    "CheckpointError",
    "RestrictedUnpickler",
    "check_state_dict",
    "checkpoint_meta",
    "load_pickle_restricted",
    "load_state_dict_file",
    "read_checkpoint",
    "save_checkpoint",
    "unwrap_state_dict",
]

# How many keys of each kind an error message lists before summarising.
_MAX_LISTED = 12


class CheckpointError(StartupError, ValueError):
    """A checkpoint that cannot be used: the message says why and what to do."""

    default_field = "model.weights"


class RestrictedUnpickler(pickle.Unpickler):
    """An unpickler that refuses every global but plain data and numpy arrays.

    Detectron2 checkpoints are pickles of ``{"model": {name: ndarray}}``; that
    needs numpy's array reconstruction functions and dtypes, nothing else.
    """

    _ALLOWED: frozenset[tuple[str, str]] = frozenset(
        {
            ("collections", "OrderedDict"),
            ("numpy", "dtype"),
            ("numpy", "ndarray"),
            ("numpy.core.multiarray", "_reconstruct"),
            ("numpy._core.multiarray", "_reconstruct"),
            ("numpy.core.multiarray", "scalar"),
            ("numpy._core.multiarray", "scalar"),
            ("numpy.core.numeric", "_frombuffer"),
            ("numpy._core.numeric", "_frombuffer"),
            ("builtins", "bytearray"),
            ("builtins", "set"),
            ("builtins", "frozenset"),
            ("builtins", "slice"),
            ("_codecs", "encode"),
        }
    )

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in self._ALLOWED:
            return super().find_class(module, name)
        raise CheckpointError(
            f"refusing to unpickle {module}.{name}: a model checkpoint holds only arrays; "
            "this file may be corrupt or unsafe"
        )


def load_pickle_restricted(path: str | Path) -> Any:
    """Unpickle ``path`` allowing only plain containers and numpy arrays."""
    path = Path(path)
    try:
        with path.open("rb") as fh:
            return RestrictedUnpickler(fh, encoding="latin1").load()
    except CheckpointError:
        raise
    except FileNotFoundError:
        raise CheckpointError(f"checkpoint {path} does not exist") from None
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError) as exc:
        raise CheckpointError(
            f"checkpoint {path} is not a readable pickle ({exc}); is the file truncated?"
        ) from None


@dataclasses.dataclass(frozen=True)
class Checkpoint:
    """Weights plus what streamseg's trainer records about them.

    ``meta`` holds plain data only, e.g. ``{"arch": "maskrcnn_small",
    "class_names": ["__background__", ...], "iteration": 1200}``; it is empty
    for third-party files (torchvision, detectron2).
    """

    state_dict: dict[str, Tensor]
    meta: dict[str, Any]


def save_checkpoint(path: str | Path, state_dict: Mapping[str, Tensor], **meta: Any) -> None:
    """Write ``{"model": state_dict, "meta": meta}``, loadable with weights_only=True.

    ``meta`` values must be plain data (str, int, float, bool, lists, dicts).
    The file is written to a temporary name and renamed, so a crash never
    leaves a half-written checkpoint under ``path``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save({"model": dict(state_dict), "meta": dict(meta)}, tmp)
    tmp.replace(path)


# What torch.load raises on a file that is not a (whole) checkpoint; OSError
# too: a zip archive cut short makes it seek past the end (EINVAL).
_UNREADABLE = (RuntimeError, pickle.UnpicklingError, EOFError, zipfile.BadZipFile, OSError)


def read_checkpoint(path: str | Path) -> Checkpoint:
    """Like :func:`load_state_dict_file`, also returning the ``meta`` mapping."""
    path = Path(path)
    meta: dict[str, Any] = {}
    if path.suffix != ".pkl" and path.is_file():
        obj = _torch_load(path)
        if isinstance(obj, Mapping) and isinstance(obj.get("meta"), Mapping):
            meta = dict(obj["meta"])
        return Checkpoint(state_dict=unwrap_state_dict(obj, path), meta=meta)
    return Checkpoint(state_dict=load_state_dict_file(path), meta=meta)


def checkpoint_meta(path: str | Path) -> dict[str, Any]:
    """The ``meta`` of a streamseg checkpoint, read without loading its tensors
    (memory-mapped); ``{}`` for any other file, or one that cannot be read
    (loading it says why)."""
    path = Path(path)
    if path.suffix == ".pkl" or not path.is_file():
        return {}
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception:
        return {}
    meta = obj.get("meta") if isinstance(obj, Mapping) else None
    return dict(meta) if isinstance(meta, Mapping) else {}


def load_state_dict_file(path: str | Path) -> dict[str, Tensor]:
    """Read a state dict from ``.pth``/``.pt`` (weights only) or ``.pkl`` (restricted).

    Accepts a bare state dict or one wrapped as ``{"model": ...}`` or
    ``{"state_dict": ...}`` (what trainers save). numpy arrays become tensors.
    """
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"checkpoint {path} does not exist")
    if path.is_dir():
        raise CheckpointError(f"checkpoint {path} is a folder; point `weights` at the file")
    obj = load_pickle_restricted(path) if path.suffix == ".pkl" else _torch_load(path)
    return unwrap_state_dict(obj, path)


def _torch_load(path: Path) -> Any:
    """``torch.load`` of tensors only; an unreadable file is a ``CheckpointError``."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except _UNREADABLE as exc:
        raise CheckpointError(
            f"checkpoint {path} could not be read ({_first_line(exc)}); "
            "is the file truncated or not a PyTorch checkpoint?"
        ) from None


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def unwrap_state_dict(obj: Any, path: Path) -> dict[str, Tensor]:
    """The tensors of a loaded checkpoint object, numpy arrays converted.

    ``obj`` is a state dict, or one wrapped as ``{"model": ...}``,
    ``{"state_dict": ...}`` or ``{"model_state": ...}``; entries that are
    neither tensors nor arrays are left out. ``path`` names the file in errors.
    """
    for key in ("model", "state_dict", "model_state"):
        if isinstance(obj, Mapping) and key in obj and isinstance(obj[key], Mapping):
            obj = obj[key]
            break
    if not isinstance(obj, Mapping) or not obj:
        raise CheckpointError(f"checkpoint {path} holds no state dict (found {type(obj).__name__})")
    out: dict[str, Tensor] = {}
    for name, value in obj.items():
        if isinstance(value, Tensor):
            out[str(name)] = value
        elif hasattr(value, "__array__"):
            out[str(name)] = torch.as_tensor(_np_array(value))
        # Non-tensor entries (e.g. detectron2's "__author__") carry no weights.
    if not out:
        raise CheckpointError(
            f"checkpoint {path} holds no tensors or arrays (at its top level or under "
            f"'model' / 'state_dict'; found keys {', '.join(map(str, list(obj)[:6]))})"
        )
    return out


def _np_array(value: Any) -> Any:
    import numpy as np

    array = np.ascontiguousarray(value)
    # Arrays unpickled from protocol-5 bytes are read-only views; tensors want their own memory.
    return array if array.flags.writeable else array.copy()


def check_state_dict(
    model: nn.Module,
    state_dict: Mapping[str, Tensor],
    *,
    source: str,
    ignore_missing: tuple[str, ...] = (),
    key_name: Callable[[str], str] | None = None,
) -> None:
    """Raise :class:`CheckpointError` unless ``state_dict`` fits ``model`` exactly.

    Args:
        model: the module the weights are for.
        state_dict: the weights (already converted to the model's key names).
        source: how to name the checkpoint in the message (file and format).
        ignore_missing: key suffixes the model may lack weights for (e.g.
            ``num_batches_tracked``).
        key_name: how to show one of the model's keys in the message (e.g.
            under the name a converted file uses; ``source`` should say so);
            default: as it is.
    """
    show = key_name or (lambda key: key)
    expected = model.state_dict()
    missing = [show(k) for k in expected if k not in state_dict and not k.endswith(ignore_missing)]
    unexpected = [show(k) for k in state_dict if k not in expected]
    misshaped = [
        f"{show(k)}: checkpoint {tuple(state_dict[k].shape)} vs model {tuple(expected[k].shape)}"
        for k in expected
        if k in state_dict and tuple(state_dict[k].shape) != tuple(expected[k].shape)
    ]
    if not (missing or unexpected or misshaped):
        return
    parts = [f"checkpoint {source} does not match the model:"]
    for title, keys in (
        ("missing keys", missing),
        ("unexpected keys", unexpected),
        ("mis-shaped keys", misshaped),
    ):
        if keys:
            listed = ", ".join(keys[:_MAX_LISTED])
            more = f" (and {len(keys) - _MAX_LISTED} more)" if len(keys) > _MAX_LISTED else ""
            parts.append(f"  {len(keys)} {title}: {listed}{more}")
    parts.append(
        "  hint: check that `arch` (and `num_classes`) in pipeline.yaml match the file; "
        "a checkpoint for another architecture or a truncated download gives this error"
    )
    raise CheckpointError("\n".join(parts))
