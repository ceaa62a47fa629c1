"""The training config (``streamseg train CONFIG``): schema and loader.

A YAML file with five sections, read by the loader that reads pipeline.yaml
(:func:`streamseg.config.loader.load_yaml_model`): ``${ENV}`` references are
substituted, unknown keys are errors and every error names the file, the
line, the field and a hint, as a :class:`streamseg.config.ConfigError`.
The options people turn when a GPU runs out of memory are plain fields:
``solver.batch_size``, ``solver.accumulation``, ``solver.precision``,
``data.min_size`` / ``data.max_size`` and ``model.roi_samples_per_image``.
See ``docs/training.md`` for every field.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from streamseg.config.loader import load_yaml_model
from streamseg.configbase.base import StrictModel
from streamseg.segment.config import ModelSource, PrecisionName

__all__ = [
    "DataConfig",
    "DatasetConfig",
    "EvalConfig",
    "OutputConfig",
    "SolverConfig",
    "TrainConfig",
    "TrainModelConfig",
    "load_train_config",
]


class TrainModelConfig(ModelSource):
    """What to train and where it starts: the arch and weights of
    :class:`~streamseg.segment.config.ModelSource` (shared with pipeline.yaml)
    plus the training options.

    Attributes:
        arch: a name known to ``streamseg.models.build_model`` (required here).
        weights: checkpoint to start from (a streamseg checkpoint, or a
            torchvision / detectron2 / Hugging Face file the model loads);
            ``None`` trains from scratch.
        class_names: the classes to learn, without ``__background__``;
            default: the categories of the training datasets, in order.
        roi_samples_per_image: what the family samples per image for its
            losses, the build option its row names
            (``Family.roi_samples_option``): RoI heads' samples (Mask R-CNN)
            or mask points (Mask2Former); fewer use less memory.
        freeze_backbone_stages: 0 trains the whole backbone; 1 freezes the
            stem; ``n`` freezes the stem and the first ``n - 1`` stages.
        options: further ``build_model`` keyword options (``min_size``,
            ``max_size`` for evaluation and serving, thresholds, ...).
        init_frozen_norm_images: training from scratch (no ``weights``):
            set the backbone's frozen batch-norm statistics from this many
            training images before the first step, so activations start
            normalised (0: leave them as built).
    """

    arch: str
    class_names: tuple[str, ...] | None = None
    roi_samples_per_image: int | None = Field(default=None, ge=1, le=8192)
    freeze_backbone_stages: int = Field(default=0, ge=0, le=5)
    options: dict[str, Any] = Field(default_factory=dict)
    init_frozen_norm_images: int = Field(default=0, ge=0, le=256)

    @field_validator("class_names")
    @classmethod
    def _names(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if value is not None:
            if not value:
                raise ValueError("class_names must list at least one class")
            if len(set(value)) != len(value):
                raise ValueError("class_names has duplicates")
            if "__background__" in value:
                raise ValueError("leave __background__ out of class_names; it is implicit")
        return value


class DatasetConfig(StrictModel):
    """One dataset: a COCO instance JSON with its images, or a synthetic scene.

    Attributes:
        annotations: COCO JSON (human annotations, e.g. a CVAT export, or the
            output of ``streamseg label``), or a list of them over the same
            images, read as one dataset: images matched by file name, and
            where annotations of two files overlap (mask IoU >= 0.5) the
            earlier file's wins (hand labels first, then a teacher's).
        images: folder the JSON's ``file_name`` entries are relative to;
            default: the (first) JSON's own folder.
        synthetic: a ``synthetic://?seed=..`` URL; frames are made on the fly.
        frames: synthetic: how many frames to use.
        stride: synthetic: use every ``stride``-th frame of the scene.
        crowd_as_instances: train on ``iscrowd: 1`` annotations as ordinary
            instances (some tools, e.g. CVAT through Datumaro, mark every mask
            drawn with a brush as crowd); by default they are only ignored
            regions in evaluation, as in COCO.
    """

    annotations: str | list[str] | None = None
    images: str | None = None
    synthetic: str | None = None
    frames: int = Field(default=100, ge=1)
    stride: int = Field(default=1, ge=1)
    crowd_as_instances: bool = False

    @model_validator(mode="after")
    def _one_source(self) -> DatasetConfig:
        if (self.annotations is None) == (self.synthetic is None):
            raise ValueError("give exactly one of `annotations` (COCO JSON) or `synthetic` (URL)")
        if self.synthetic is not None and not self.synthetic.startswith("synthetic://"):
            raise ValueError("`synthetic` must be a synthetic://?seed=... URL")
        return self


class DataConfig(StrictModel):
    """Datasets, augmentation and loading.

    Attributes:
        train / val: datasets (concatenated); ``val`` may be empty.
        min_size: shorter image side in training; one is drawn per image
            (scale jitter). Default: the model's own ``min_size``.
        max_size: cap on the longer side in training. Default: the model's.
        hflip: probability of a horizontal flip.
        workers: data-loader worker processes (0 loads in the main process).
        skip_empty: leave out training images without annotations.
        val_max_images: evaluate on at most this many images (the first).
    """

    train: list[DatasetConfig] = Field(min_length=1)
    val: list[DatasetConfig] = Field(default_factory=list)
    min_size: tuple[int, ...] | None = None
    max_size: int | None = Field(default=None, ge=32)
    hflip: float = Field(default=0.5, ge=0.0, le=1.0)
    workers: int = Field(default=2, ge=0, le=64)
    skip_empty: bool = True
    val_max_images: int | None = Field(default=None, ge=1)

    @field_validator("min_size")
    @classmethod
    def _sizes(cls, value: tuple[int, ...] | None) -> tuple[int, ...] | None:
        if value is not None and (not value or min(value) < 32):
            raise ValueError("min_size must list sizes of at least 32 pixels")
        return value


class SolverConfig(StrictModel):
    """Optimisation.

    Attributes:
        iterations: optimiser steps in total.
        batch_size: images per process in one micro-batch.
        accumulation: micro-batches whose gradients add up to one step; the
            effective batch is ``batch_size * accumulation * processes``.
        optimizer: ``sgd`` (momentum) or ``adamw``.
        lr: peak learning rate (after warm-up).
        schedule: ``cosine`` (to ``lr * min_lr_factor``), ``step`` (times
            ``gamma`` at each of ``steps``) or ``constant``.
        warmup_iters / warmup_factor: linear warm-up from ``lr * factor``.
        clip_grad_norm: clip the global gradient norm (``None``: no clipping).
        precision: ``fp32``, ``bf16`` (autocast) or ``fp16`` (autocast and a
            gradient scaler).
        tf32: allow TF32 matmuls and convolutions on NVIDIA GPUs.
        channels_last: the model's weights and the input images in
            channels-last (NHWC) memory format; on this project's CPU the
            R50-FPN step takes about 0.9x the CPU time (docs/training.md).
        seed: seeds data order, augmentation and the model's sampling.
    """

    iterations: int = Field(ge=1)
    batch_size: int = Field(default=2, ge=1)
    accumulation: int = Field(default=1, ge=1)
    optimizer: Literal["sgd", "adamw"] = "sgd"
    lr: float = Field(default=0.02, gt=0.0)
    momentum: float = Field(default=0.9, ge=0.0, lt=1.0)
    weight_decay: float = Field(default=1e-4, ge=0.0)
    weight_decay_norm: float = Field(default=0.0, ge=0.0)
    schedule: Literal["cosine", "step", "constant"] = "cosine"
    steps: tuple[int, ...] = ()
    gamma: float = Field(default=0.1, gt=0.0, le=1.0)
    min_lr_factor: float = Field(default=0.0, ge=0.0, le=1.0)
    warmup_iters: int = Field(default=100, ge=0)
    warmup_factor: float = Field(default=0.001, gt=0.0, le=1.0)
    clip_grad_norm: float | None = Field(default=None, gt=0.0)
    precision: PrecisionName = "fp32"
    tf32: bool = True
    channels_last: bool = False
    seed: int = 0

    @field_validator("steps")
    @classmethod
    def _steps(cls, value: tuple[int, ...], info: ValidationInfo) -> tuple[int, ...]:
        # Declared after `iterations` and `schedule`, so both are in info.data.
        iterations = info.data.get("iterations")
        if info.data.get("schedule") == "step" and not value:
            raise ValueError("schedule: step needs `steps` (iterations where the LR drops)")
        if list(value) != sorted(value) or (value and iterations and value[-1] >= iterations):
            raise ValueError("`steps` must be increasing and below `iterations`")
        return value


class EvalConfig(StrictModel):
    """Evaluation during training.

    Attributes:
        period: evaluate every this many iterations (0: only at the end).
        metric: which number picks the best checkpoint, e.g. ``segm.AP``.
        batch_size: images per forward pass when evaluating.
    """

    period: int = Field(default=0, ge=0)
    metric: Literal[
        "segm.AP", "segm.AP50", "bbox.AP", "bbox.AP50", "panoptic.PQ", "sem_seg.mIoU"
    ] = "segm.AP"
    batch_size: int = Field(default=2, ge=1)


class OutputConfig(StrictModel):
    """Where results go.

    Attributes:
        dir: run folder: ``last.pth`` (resumable), ``best.pth`` and
            ``model_final.pth`` (weights only), ``metrics.jsonl``,
            ``config.yaml``.
        checkpoint_period: save ``last.pth`` every this many iterations.
        log_period: write a metrics line every this many iterations.
        progress: show a progress bar on the terminal.
    """

    dir: str
    checkpoint_period: int = Field(default=500, ge=1)
    log_period: int = Field(default=20, ge=1)
    progress: bool = True


class TrainConfig(StrictModel):
    """The whole training config."""

    model: TrainModelConfig
    data: DataConfig
    solver: SolverConfig
    eval: EvalConfig = EvalConfig()
    output: OutputConfig
    device: Literal["auto", "cpu", "cuda"] = "auto"


def load_train_config(
    path: str | Path,
    overrides: list[str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
) -> TrainConfig:
    """Read and validate a training config.

    Args:
        path: the YAML file.
        overrides: ``dotted.key=value`` strings (value parsed as YAML) applied
            on top of the file, e.g. ``["solver.iterations=10"]``.
        environ: for ``${NAME}`` / ``${NAME:-default}`` references (default
            ``os.environ``).

    Raises:
        ConfigError: with the file, line and field of every problem.
    """
    return load_yaml_model(
        path,
        TrainConfig,
        overrides=overrides or (),
        environ=environ,
        what="a training config (see docs/training.md)",
    )
