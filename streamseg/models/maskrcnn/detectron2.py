"""Detectron2 model-zoo ``.pkl`` checkpoints of R50-FPN Mask R-CNN.

Such a file (e.g. ``model_final_f10217.pkl`` of
``COCO-InstanceSegmentation/mask_rcnn_R_50_FPN_3x``) is a pickle of
``{"model": {name: ndarray}, "__author__": ..., ...}``, sometimes with the
arrays at its top level. It is read with
:class:`~streamseg.models.checkpoint.RestrictedUnpickler` (plain data and
numpy arrays only; nothing in the file can run code), then converted:

* names: detectron2's module paths become ours (torchvision's), table
  ``_RENAMES`` (``res2..res5`` are ``layer1..layer4``, ``fpn_lateral2..5``
  the FPN's inner blocks ``0..3``, ...);
* classes: detectron2 puts the background last in ``cls_score`` and has no
  background rows in ``bbox_pred`` nor channel in the mask predictor; we put
  it first (label 0) everywhere, so ``cls_score`` rows are reordered and
  zero rows are added for the background (never used: label 0 is never a
  detection). ``K`` classes are read from ``cls_score``'s shape; 80 gives the
  COCO names, any other count generic ``class_<i>`` names;
* structure and input: the model is built in the ``"detectron2"`` style
  (:mod:`streamseg.models.maskrcnn.styles`): BGR ``[0, 255]`` input with
  the file's ``pixel_mean`` (when it has one, else the MSRA means), std 1.

Only detectron2's R50-FPN Mask R-CNN built on the MSRA ImageNet ResNet
(every ``COCO-InstanceSegmentation/mask_rcnn_R_50_FPN_*`` model) has this
structure; another file gives one :class:`CheckpointError` listing its
missing, unexpected and mis-shaped keys under detectron2's names.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from pathlib import Path

import torch
from torch import Tensor

from streamseg.models import InputSpec
from streamseg.models.checkpoint import CheckpointError, load_pickle_restricted, unwrap_state_dict
from streamseg.models.maskrcnn.classes import COCO_CONTIGUOUS_CLASS_NAMES
from streamseg.models.maskrcnn.loaded import LoadedWeights
from streamseg.models.maskrcnn.styles import DETECTRON2_INPUT

__all__ = ["detectron2_name", "our_name", "read_detectron2"]


@dataclasses.dataclass(frozen=True)
class _Rename:
    """One naming rule; ``{n}`` is a number that differs by ``shift`` (ours = theirs - shift),
    ``{i}``/``{k}`` numbers kept as they are, ``{p}`` a parameter or buffer name."""

    theirs: str
    ours: str
    shift: int = 0


_RENAMES = (
    _Rename("backbone.bottom_up.stem.conv1.weight", "backbone.body.conv1.weight"),
    _Rename("backbone.bottom_up.stem.conv1.norm.{p}", "backbone.body.bn1.{p}"),
    _Rename(
        "backbone.bottom_up.res{n}.{i}.conv{k}.weight",
        "backbone.body.layer{n}.{i}.conv{k}.weight",
        1,
    ),
    _Rename(
        "backbone.bottom_up.res{n}.{i}.conv{k}.norm.{p}", "backbone.body.layer{n}.{i}.bn{k}.{p}", 1
    ),
    _Rename(
        "backbone.bottom_up.res{n}.{i}.shortcut.weight",
        "backbone.body.layer{n}.{i}.downsample.0.weight",
        1,
    ),
    _Rename(
        "backbone.bottom_up.res{n}.{i}.shortcut.norm.{p}",
        "backbone.body.layer{n}.{i}.downsample.1.{p}",
        1,
    ),
    _Rename("backbone.fpn_lateral{n}.{p}", "backbone.fpn.inner_blocks.{n}.0.{p}", 2),
    _Rename("backbone.fpn_output{n}.{p}", "backbone.fpn.layer_blocks.{n}.0.{p}", 2),
    _Rename("proposal_generator.rpn_head.conv.{p}", "rpn.head.conv.0.0.{p}"),
    _Rename("proposal_generator.rpn_head.objectness_logits.{p}", "rpn.head.cls_logits.{p}"),
    _Rename("proposal_generator.rpn_head.anchor_deltas.{p}", "rpn.head.bbox_pred.{p}"),
    _Rename("roi_heads.box_head.fc1.{p}", "roi_heads.box_head.fc6.{p}"),
    _Rename("roi_heads.box_head.fc2.{p}", "roi_heads.box_head.fc7.{p}"),
    _Rename("roi_heads.box_predictor.cls_score.{p}", "roi_heads.box_predictor.cls_score.{p}"),
    _Rename("roi_heads.box_predictor.bbox_pred.{p}", "roi_heads.box_predictor.bbox_pred.{p}"),
    _Rename("roi_heads.mask_head.mask_fcn{n}.{p}", "roi_heads.mask_head.{n}.0.{p}", 1),
    _Rename("roi_heads.mask_head.deconv.{p}", "roi_heads.mask_predictor.conv5_mask.{p}"),
    _Rename("roi_heads.mask_head.predictor.{p}", "roi_heads.mask_predictor.mask_fcn_logits.{p}"),
)

_FIELDS = {"n": r"(?P<n>-?\d+)", "i": r"(?P<i>\d+)", "k": r"(?P<k>\d+)", "p": r"(?P<p>[A-Za-z_]+)"}


def _pattern(template: str) -> re.Pattern[str]:
    """``template``'s literal text, with one named group per ``{field}``."""
    parts = re.split(r"\{(\w)\}", template)  # text, field, text, field, ..., text
    return re.compile("".join(_FIELDS[p] if i % 2 else re.escape(p) for i, p in enumerate(parts)))


_TO_OURS = [(_pattern(r.theirs), r.ours, -r.shift) for r in _RENAMES]
_TO_THEIRS = [(_pattern(r.ours), r.theirs, r.shift) for r in _RENAMES]

# Entries of detectron2 files that are not weights: the input normalisation
# (used for the InputSpec) and, in files of some versions, the cell anchors
# (which the "detectron2" style computes itself).
_PIXEL_MEAN, _PIXEL_STD = "pixel_mean", "pixel_std"
_CELL_ANCHORS = re.compile(r"proposal_generator\.anchor_generator\.cell_anchors\.\d+")

_CLS = "roi_heads.box_predictor.cls_score"
_BOX = "roi_heads.box_predictor.bbox_pred"
_MASK = "roi_heads.mask_predictor.mask_fcn_logits"


def _rename(name: str, rules: list[tuple[re.Pattern[str], str, int]]) -> str | None:
    for pattern, template, shift in rules:
        m = pattern.fullmatch(name)
        if m:
            fields = m.groupdict()
            if "n" in fields:
                fields["n"] = str(int(fields["n"]) + shift)
            return template.format(**fields)
    return None


def our_name(name: str) -> str | None:
    """Our key for detectron2's ``name`` (``None``: not an R50-FPN Mask R-CNN key)."""
    return _rename(name, _TO_OURS)


def detectron2_name(name: str) -> str:
    """Detectron2's key for our ``name`` (``name`` itself when it has none)."""
    return _rename(name, _TO_THEIRS) or name


def read_detectron2(path: str | Path) -> LoadedWeights:
    """Read a detectron2 ``.pkl`` into our key names and class layout.

    Raises:
        CheckpointError: unreadable or unsafe pickle, a Caffe2 Detectron file,
            an input normalisation other than MSRA's, or predictors whose
            shapes do not fit the class count.
    """
    path = Path(path)
    arrays = _read_arrays(path)
    state: dict[str, Tensor] = {}
    for name, value in arrays.items():
        if name in (_PIXEL_MEAN, _PIXEL_STD) or _CELL_ANCHORS.fullmatch(name):
            continue
        state[our_name(name) or name] = value
    num = _move_background(state, path)
    names = None
    if num is not None:
        names = COCO_CONTIGUOUS_CLASS_NAMES if num == 80 else _generic_names(num)
    return LoadedWeights(
        state_dict=state,
        source=f"{path} (detectron2 format; keys under detectron2's names)",
        class_names=names,
        input_spec=_input_spec(arrays, path),
        style="detectron2",
        key_name=detectron2_name,
    )


def _read_arrays(path: Path) -> dict[str, Tensor]:
    obj = load_pickle_restricted(path)
    if isinstance(obj, Mapping) and "blobs" in obj:
        raise CheckpointError(
            f"checkpoint {path} is a Caffe2 Detectron (v1) file ('blobs'), not a detectron2 "
            "one; only detectron2 model-zoo .pkl files of R50-FPN Mask R-CNN load"
        )
    return unwrap_state_dict(obj, path)


def _input_spec(arrays: Mapping[str, Tensor], path: Path) -> InputSpec:
    spec = DETECTRON2_INPUT
    std = arrays.get(_PIXEL_STD)
    if std is not None and not torch.allclose(std.double().flatten(), torch.ones(3).double()):
        raise CheckpointError(
            f"checkpoint {path} normalises its input with pixel_std "
            f"{[round(float(v), 3) for v in std.flatten()]}: its backbone is not detectron2's "
            "MSRA ResNet (std 1, stride in the 1x1 conv); only MSRA-based R50-FPN models load"
        )
    mean = arrays.get(_PIXEL_MEAN)
    if mean is not None:
        if mean.numel() != 3:
            raise CheckpointError(f"checkpoint {path}: pixel_mean has {mean.numel()} values, not 3")
        values = tuple(float(v) for v in mean.double().flatten())
        spec = dataclasses.replace(spec, mean=(values[0], values[1], values[2]))
    return spec


def _move_background(state: dict[str, Tensor], path: Path) -> int | None:
    """Put the background first in the predictors (in place); the class count ``K``.

    ``None`` when there is no ``cls_score`` to count from (the strict check
    then lists what is missing).
    """
    weight = state.get(f"{_CLS}.weight")
    if weight is None or weight.dim() != 2:
        return None
    num = int(weight.shape[0]) - 1
    if num < 1:
        raise CheckpointError(f"checkpoint {path}: cls_score has {num + 1} rows, no class")
    order = torch.tensor([num, *range(num)])
    for part in ("weight", "bias"):
        key = f"{_CLS}.{part}"
        if key in state:
            state[key] = state[key][order]
    for key, per_class, what in (
        (f"{_BOX}.weight", 4, "4 box deltas"),
        (f"{_BOX}.bias", 4, "4 box deltas"),
        (f"{_MASK}.weight", 1, "one mask"),
        (f"{_MASK}.bias", 1, "one mask"),
    ):
        if key in state:
            state[key] = _with_background(state[key], per_class, num, key, what, path)
    return num


def _with_background(
    value: Tensor, per_class: int, num: int, key: str, what: str, path: Path
) -> Tensor:
    rows = int(value.shape[0]) if value.dim() else 0
    if rows != per_class * num:
        raise CheckpointError(
            f"checkpoint {path}: {detectron2_name(key)} has {rows} rows, but cls_score's "
            f"{num + 1} rows mean {num} classes with {what} each ({per_class * num} rows); "
            "class-agnostic heads are not supported"
        )
    pad = value.new_zeros((per_class, *value.shape[1:]))
    return torch.cat([pad, value])


def _generic_names(num: int) -> tuple[str, ...]:
    return ("__background__", *(f"class_{i}" for i in range(1, num + 1)))
