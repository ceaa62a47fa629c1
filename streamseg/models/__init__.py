"""Models: Mask R-CNN and Mask2Former in plain PyTorch, and checkpoint loading.

``build_model(arch, **options)`` is the one entry point. :data:`ARCHITECTURES`
is the one list of architectures (the ``model.arch`` values of
``pipeline.yaml`` and the ``--arch`` choices of the CLI are derived from it):
each name maps to the ``"module:function"`` that builds it and to its
family, whose :class:`Family` says how it counts classes. Modules are
imported only when their model is built, and importing this package does not
import torch. :data:`PRECISIONS` is the one list of numeric precisions,
:data:`TASKS` the one list of segmentation tasks (``model.task``); each
family says which tasks it runs (:attr:`Family.tasks`).

Every model follows one contract (see ``docs/architecture.md``):

* ``model.input_spec``: an :class:`InputSpec` (colour order, value scale,
  mean/std, min/max size, size divisibility) that the Segmenter's
  preprocessing follows;
* ``model(images, image_sizes)`` in eval mode: ``images`` is ``float32
  (B, 3, H, W)`` normalised and padded, ``image_sizes`` the unpadded
  ``(h, w)`` of each; returns raw per-image outputs;
* ``model.postprocess(outputs, image_sizes, frame_sizes, mask_crops=False)``
  -> list of :class:`streamseg.types.Instances` at frame resolution; with
  ``mask_crops`` a model may give its masks as ``MaskCrops`` (Mask R-CNN
  does; Mask2Former's are frame-size either way);
* ``model(images, image_sizes, targets)`` in train mode -> dict of scalar
  losses.

Adding an architecture: a builder function in its own file, plus one line in
:data:`ARCHITECTURES` (and one in :data:`FAMILIES` for a new family).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from streamseg.registry import Table, load

if TYPE_CHECKING:
    import torch
    from torch import nn

__all__ = [
    "ARCHITECTURES",
    "FAMILIES",
    "PRECISIONS",
    "TASKS",
    "Arch",
    "Family",
    "InputSpec",
    "arch_family",
    "archs_of",
    "build_model",
    "class_options",
    "precision_dtype",
    "task_problem",
]


@dataclasses.dataclass(frozen=True)
class InputSpec:
    """How a model wants its input images.

    Attributes:
        channel_order: ``"RGB"`` (torchvision, transformers) or ``"BGR"``
            (detectron2's caffe-style weights).
        scale: images are divided by this before normalising (255.0 for
            inputs in ``[0, 1]`` like torchvision, 1.0 for ``[0, 255]``).
        mean / std: per-channel, applied after scaling, in ``channel_order``.
        min_size / max_size: shorter side resized to ``min_size`` unless the
            longer side would pass ``max_size``.
        size_divisibility: padded height and width are multiples of this.
    """

    channel_order: str = "RGB"
    scale: float = 255.0
    mean: tuple[float, float, float] = (0.485, 0.456, 0.406)
    std: tuple[float, float, float] = (0.229, 0.224, 0.225)
    min_size: int = 800
    max_size: int = 1333
    size_divisibility: int = 32


@dataclasses.dataclass(frozen=True)
class Family:
    """What the architectures of one family share.

    Attributes:
        counts_background: the builder's ``num_classes`` counts the
            background class (Mask R-CNN) or not (Mask2Former, whose "no
            object" class is separate).
        tasks: the :data:`TASKS` its models run (the builder's ``task``
            option; ``instance`` needs no option).
        class_layers: state-dict key prefixes of the layers with rows per
            class (dim 0: ``rows`` per class slot, in the order of
            :func:`streamseg.models.class_rows.class_slots`); a fine-tune
            that changes the classes keeps the rows of the classes it kept.
        options: ``"module:Class"`` of the pydantic model of the family's own
            section of pipeline.yaml's ``model:`` (``model.<family>:``),
            options only its architectures take (``None``: no section).
        roi_samples_option: the ``build_model`` option that training's
            ``roi_samples_per_image`` sets (what the family samples per
            image for its losses).
        weights_options: ``"module:function"`` giving, for a training run's
            starting weights (a path), the ``build_model`` options they fix
            (``None``: none).
        dispatch: ``"module:Class"`` of the family's hooks for ``bench
            dispatch`` (its build options, score calibration and limits;
            ``streamseg.bench.dispatch``); ``None``: it cannot be counted.
    """

    counts_background: bool
    tasks: tuple[str, ...] = ("instance",)
    class_layers: tuple[str, ...] = ()
    options: str | None = None
    roi_samples_option: str | None = None
    weights_options: str | None = None
    dispatch: str | None = None


@dataclasses.dataclass(frozen=True)
class Arch:
    """One architecture: its builder (``"module:function"``) and family."""

    builder: str
    family: str


# task name -> what the model's post-processing gives per frame.
TASKS: dict[str, str] = {
    "instance": "instances (boxes, scores, labels, masks) of every class",
    "semantic": "a class for every pixel: regions of every class, no instances",
    "panoptic": "instances of the thing classes and regions of the stuff classes",
}

FAMILIES: Table[Family] = Table(
    "model family",
    {
        "maskrcnn": Family(
            counts_background=True,
            class_layers=(
                "roi_heads.box_predictor.cls_score.",
                "roi_heads.box_predictor.bbox_pred.",  # 4 rows (box deltas) per class
                "roi_heads.mask_predictor.mask_fcn_logits.",
            ),
            options="streamseg.models.maskrcnn.options:MaskRCNNOptions",
            roi_samples_option="box_batch_size_per_image",
            weights_options="streamseg.models.maskrcnn.weights:weights_options",
            dispatch="streamseg.bench.dispatch_hooks:MaskRCNNHooks",
        ),
        "mask2former": Family(
            counts_background=False,
            tasks=tuple(TASKS),
            class_layers=("class_predictor.", "criterion.empty_weight"),
            roi_samples_option="num_points",
            dispatch="streamseg.bench.dispatch_hooks:Mask2FormerHooks",
        ),
    },
)

# arch name -> builder and family. The builder takes keyword options
# (num_classes, thresholds, ...) and returns an nn.Module following the contract.
ARCHITECTURES: Table[Arch] = Table(
    "architecture",
    {
        "maskrcnn_r50_fpn": Arch("streamseg.models.maskrcnn.build:maskrcnn_r50_fpn", "maskrcnn"),
        "maskrcnn_r50_fpn_v2": Arch(
            "streamseg.models.maskrcnn.build:maskrcnn_r50_fpn_v2", "maskrcnn"
        ),
        "maskrcnn_small": Arch("streamseg.models.maskrcnn.build:maskrcnn_small", "maskrcnn"),
        "mask2former_r50": Arch(
            "streamseg.models.mask2former.build:mask2former_r50", "mask2former"
        ),
        "mask2former_swin_t": Arch(
            "streamseg.models.mask2former.build:mask2former_swin_t", "mask2former"
        ),
        # A few-channel Mask2Former for tests and smoke runs of every command
        # (serve, bench, train, export); like maskrcnn_small it runs in seconds
        # on a CPU, but unlike it, it is not meant for real use.
        "mask2former_tiny": Arch(
            "streamseg.models.mask2former.build:mask2former_tiny", "mask2former"
        ),
        # Mask2Former on maskrcnn_small's narrow ResNet-18 (its backbone can start
        # from the Mask R-CNN demo model): the small Mask2Former for real use.
        "mask2former_small": Arch(
            "streamseg.models.mask2former.build:mask2former_small", "mask2former"
        ),
    },
)

# precision name -> the torch dtype name (``torch.<name>``) that autocast
# runs in; ``fp32`` runs without autocast.
PRECISIONS: dict[str, str] = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def _arch(arch: str) -> Arch:
    if arch not in ARCHITECTURES:
        known = ", ".join(ARCHITECTURES)
        raise ValueError(f"unknown model arch {arch!r}; choose one of: {known}")
    return ARCHITECTURES[arch]


def arch_family(arch: str) -> str:
    """The family of ``arch`` (``"maskrcnn"``, ``"mask2former"``): whose conventions it follows."""
    return _arch(arch).family


def archs_of(family: str) -> tuple[str, ...]:
    """The architectures of ``family``, in registry order."""
    return tuple(name for name, a in ARCHITECTURES.items() if a.family == family)


def class_options(
    arch: str, class_names: Sequence[str] | None = None, num_classes: int | None = None
) -> dict[str, Any]:
    """``build_model``'s ``num_classes`` / ``class_names`` for ``arch``.

    pipeline.yaml, training checkpoints and the CLI have one convention:
    ``num_classes`` counts the background, like ``class_names`` (whose first
    name is ``__background__``). The build option follows the family's
    :attr:`Family.counts_background`: one less where it is ``False``.
    ``num_classes`` is only used without ``class_names``; neither given:
    ``{}`` (the model's default classes).
    """
    if class_names is not None:
        names: tuple[str, ...] | None = tuple(class_names)
        count = len(class_names)
    elif num_classes is not None:
        names, count = None, int(num_classes)
    else:
        return {}
    counts_background = FAMILIES[arch_family(arch)].counts_background
    options: dict[str, Any] = {"num_classes": count if counts_background else count - 1}
    if names is not None:
        options["class_names"] = names
    return options


def task_problem(arch: str, task: str) -> str | None:
    """Why ``arch`` cannot run ``task`` (``None``: it can)."""
    if task not in TASKS:
        return f"unknown task {task!r}; valid: {', '.join(TASKS)}"
    family = arch_family(arch)
    if task not in FAMILIES[family].tasks:
        runs = [a for a, spec in ARCHITECTURES.items() if task in FAMILIES[spec.family].tasks]
        return (
            f"{arch} ({family}) runs only {', '.join(FAMILIES[family].tasks)}; "
            f"task {task!r} needs one of: {', '.join(runs)}"
        )
    return None


def precision_dtype(precision: str) -> torch.dtype:
    """The torch dtype of ``precision`` (a :data:`PRECISIONS` name)."""
    import torch

    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    dtype: torch.dtype = getattr(torch, PRECISIONS[precision])
    return dtype


def build_model(arch: str, **options: Any) -> nn.Module:
    """Build the model named ``arch`` (untrained unless ``weights=`` is given)."""
    model: nn.Module = load(_arch(arch).builder)(**options)
    return model
