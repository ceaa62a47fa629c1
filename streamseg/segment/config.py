"""pipeline.yaml's ``model:`` (which segmenter runs, where, how) and its shared base.

:class:`ModelSource` (which architecture, which weights) is the part that
pipeline.yaml's ``model:`` (:class:`ModelConfig`) and a training config's
``model:`` (:class:`streamseg.train.config.TrainModelConfig`) have in
common; both extend it, so the arch check and its message have one owner.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Literal

from pydantic import (
    Field,
    SecretStr,
    ValidationInfo,
    create_model,
    field_validator,
    model_validator,
)

from streamseg.configbase.base import StrictModel
from streamseg.configbase.choices import check_choice, literal_of
from streamseg.models import (
    ARCHITECTURES,
    FAMILIES,
    PRECISIONS,
    TASKS,
    arch_family,
    archs_of,
    class_options,
    task_problem,
)
from streamseg.registry import load
from streamseg.segment.backends import BACKENDS
from streamseg.streams import control_stream

if TYPE_CHECKING:
    from streamseg.models.weights import WeightsEntry

__all__ = [
    "ArchName",
    "BackendName",
    "ModelConfig",
    "ModelConfigBase",
    "ModelSource",
    "PrecisionName",
    "TaskName",
]

log = logging.getLogger("streamseg.config")

# The field types are the registries' names (a JSON-schema enum each).
if TYPE_CHECKING:
    ArchName = str
    PrecisionName = str
    BackendName = str
    TaskName = str
else:
    ArchName = literal_of(ARCHITECTURES.close("streamseg.segment.config"))
    PrecisionName = literal_of(PRECISIONS)
    BackendName = literal_of(BACKENDS)
    TaskName = literal_of(TASKS)


class ModelSource(StrictModel):
    """Which model: an architecture and the weights file it starts from.

    Attributes:
        arch: a ``streamseg.models`` architecture (its ``ARCHITECTURES`` registry).
        weights: checkpoint path (a streamseg checkpoint, a torchvision
            ``.pth``, a detectron2 ``.pkl`` or a Hugging Face Mask2Former
            download), or the name of a weights-catalogue entry
            (``streamseg weights list``), which stands for its file in the
            weights cache; ``None``: random weights.
    """

    arch: ArchName = "maskrcnn_small"
    weights: str | None = None

    @field_validator("arch", mode="before")
    @classmethod
    def _known_arch(cls, value: Any) -> Any:
        return check_choice("arch", value, ARCHITECTURES)

    def catalogue_entry(self) -> WeightsEntry | None:
        """The weights-catalogue entry ``weights`` names (``None``: a path, or no weights)."""
        from streamseg.models.weights import lookup

        return lookup(self.weights) if self.weights else None

    def weights_file(self) -> str | None:
        """The path to load: a catalogue name's file in the cache, else ``weights``."""
        from streamseg.models.weights import cached_file

        entry = self.catalogue_entry()
        return str(cached_file(entry)) if entry is not None else self.weights


class ModelConfigBase(ModelSource):
    """pipeline.yaml's ``model:``: the segmentation model and how it is run.

    ``weights`` is a checkpoint path, relative to the pipeline.yaml's folder,
    or a weights-catalogue name (its classes are used unless ``class_names``
    or ``num_classes`` are given).
    When the file does not exist the config is rejected, unless
    ``missing_weights: random`` says to start from random weights (a demo
    without a trained checkpoint; detections are then meaningless).
    Thresholds left out (``null``) keep the model's own defaults.
    ``hot_swap``: ``streamseg swap`` requests on Redis load new weights
    between two batches (only those carrying ``swap_token``, when it is set);
    ``watch_weights``: so does a change of the ``weights`` file.
    ``backend: aot`` runs the package in ``aot_package``
    (written by ``streamseg export`` for this arch, batch size and frame size).
    ``task`` (Mask2Former): ``instance``, ``semantic`` or ``panoptic``; unset:
    the weights' own task (a catalogue entry's or a checkpoint's), else
    ``instance``. ``stuff_classes``: panoptic, the class names that come out
    as regions rather than instances (default: the weights').
    """

    missing_weights: Literal["error", "random"] = "error"
    hot_swap: bool = Field(
        default=True,
        description=f"load new weights on request (Redis {control_stream('<prefix>')})",
    )
    watch_weights: bool = Field(
        default=False, description="reload when the weights file changes on disk"
    )
    swap_token: SecretStr | None = Field(
        default=None,
        description="hot swap requests over Redis must carry this token (use ${SWAP_TOKEN})",
    )
    device: str = "cpu"
    precision: PrecisionName = "fp32"
    backend: BackendName = "eager"
    channels_last: bool = False
    aot_package: str | None = Field(
        default=None,
        description="backend aot: the .pt2 file of `streamseg export` (relative to this file)",
    )
    batch_size: int = Field(default=4, ge=1, le=256)
    max_wait_ms: float = Field(
        default=20.0, ge=0, le=10_000, description="longest wait to fill a batch"
    )
    num_classes: int | None = Field(default=None, ge=2, le=10_000)
    class_names: list[str] | None = None
    score_threshold: float | None = Field(default=None, ge=0, le=1)
    nms_threshold: float | None = Field(default=None, gt=0, le=1)
    detections_per_image: int | None = Field(default=None, ge=1, le=10_000)
    min_size: int | None = Field(default=None, ge=16, le=4096)
    max_size: int | None = Field(default=None, ge=16, le=8192)
    task: TaskName | None = Field(
        default=None, description="instance, semantic or panoptic (Mask2Former)"
    )
    stuff_classes: list[str] | None = Field(
        default=None, description="panoptic: class names published as regions, not instances"
    )

    @field_validator("swap_token", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        return None if value == "" else value

    @field_validator("precision", "backend", "task", mode="before")
    @classmethod
    def _registered(cls, value: Any, info: Any) -> Any:
        names: dict[str, tuple[str, ...]] = {
            "precision": tuple(PRECISIONS),
            "backend": tuple(BACKENDS),
            "task": tuple(TASKS),
        }
        return check_choice(info.field_name, value, names[info.field_name])

    @field_validator("task")
    @classmethod
    def _task_runs(cls, value: str | None, info: ValidationInfo) -> str | None:
        arch = info.data.get("arch")
        problem = task_problem(arch, value) if value is not None and arch else None
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("stuff_classes")
    @classmethod
    def _stuff_known(cls, value: list[str] | None, info: ValidationInfo) -> list[str] | None:
        task = info.data.get("task")
        if value is not None and task not in (None, "panoptic"):
            raise ValueError(f"stuff_classes applies to task: panoptic only (task is {task!r})")
        names: list[str] = info.data.get("class_names") or []
        unknown = [c for c in value or () if names and c not in names[1:]]
        if unknown:
            raise ValueError(f"{unknown[0]!r} is not in class_names ({', '.join(names[1:])})")
        return value

    @field_validator("device")
    @classmethod
    def _device(cls, value: str) -> str:
        kind, _, index = value.partition(":")
        if kind not in ("cpu", "cuda") or (index and not index.isdigit()):
            raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N', got {value!r}")
        return value

    @model_validator(mode="before")
    @classmethod
    def _family_options_moved(cls, data: Any) -> Any:
        """A family's option in the shared section moves into the family's (deprecated)."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for family, options in _family_models().items():
            for key in [k for k in data if k in options.model_fields and k not in cls.model_fields]:
                section = dict(data.get(family) or {})
                if key in section:
                    raise ValueError(
                        f"{key} is set twice, in model: and in model.{family}:; "
                        f"keep only model.{family}.{key}"
                    )
                section[key] = data.pop(key)
                data[family] = section
                log.warning(
                    "model.%s is deprecated: it is a %s-only option, written as model.%s.%s "
                    "(docs/configuration.md); it is read from there",
                    key, family, family, key,
                )  # fmt: skip
        return data

    def family_options(self) -> dict[str, Any]:
        """The set options of this arch's family's own section (``build_model`` options)."""
        section = getattr(self, arch_family(self.arch), None)
        return {} if section is None else dict(section.model_dump(exclude_none=True))

    @model_validator(mode="after")
    def _consistent(self) -> ModelConfigBase:
        family = arch_family(self.arch)
        for other in _family_models():
            if other != family and getattr(self, other, None) is not None:
                raise ValueError(
                    f"model.{other}: holds options of {other} architectures "
                    f"({', '.join(archs_of(other))}), but arch {self.arch} is {family}"
                )
        if self.class_names is not None:
            if self.class_names[:1] != ["__background__"]:
                raise ValueError("class_names[0] must be '__background__' (label 0)")
            if self.num_classes is not None and len(self.class_names) != self.num_classes:
                raise ValueError(
                    f"class_names has {len(self.class_names)} names but num_classes is "
                    f"{self.num_classes} (both count the background)"
                )
        if self.min_size and self.max_size and self.max_size < self.min_size:
            raise ValueError("max_size must be >= min_size")
        backend = BACKENDS[self.backend]
        if backend.needs_cuda and not self.device.startswith("cuda"):
            raise ValueError(f"backend {self.backend!r} needs device 'cuda'")
        if backend.needs_package and not self.aot_package:
            raise ValueError(
                f"backend {self.backend!r} needs aot_package: the .pt2 file written by "
                "`streamseg export --arch A --weights W --size HxW --batch N --out F.pt2`"
            )
        return self

    def segmenter_options(self, weights: str | None) -> dict[str, Any]:
        """Keyword arguments for ``Segmenter(...)``; unset thresholds are left out.

        ``num_classes`` / ``class_names`` become the arch's own convention
        (:func:`streamseg.models.class_options`): Mask2Former gets ``num_classes - 1``.
        """
        opts: dict[str, Any] = {
            "arch": self.arch,
            "weights": weights,
            "device": self.device,
            "precision": self.precision,
            "backend": self.backend,
            "channels_last": self.channels_last,
        }
        for name in (
            "score_threshold",
            "nms_threshold",
            "detections_per_image",
            "min_size",
            "max_size",
        ):
            value = getattr(self, name)
            if value is not None:
                opts[name] = value
        classes = class_options(self.arch, self.class_names, self.num_classes)
        entry = self.catalogue_entry()
        names = entry.class_names() if entry is not None and not classes else None
        opts.update(classes or (class_options(self.arch, names) if names else {}))
        opts.update(self._task_options(entry))
        opts.update(self.family_options())
        if BACKENDS[self.backend].needs_package:
            opts["aot_package"] = self.aot_package
        return opts

    def _task_options(self, entry: WeightsEntry | None) -> dict[str, Any]:
        """``task`` / ``stuff_classes`` build options: this section's, else a
        catalogue entry's (a checkpoint's own come from its meta when unset)."""
        task = self.task or (entry.task if entry is not None else None)
        if FAMILIES[arch_family(self.arch)].tasks == ("instance",):
            task = None  # a family with one task has no task option
        out: dict[str, Any] = {} if task is None else {"task": task}
        stuff = self.stuff_classes
        if stuff is None and entry is not None and task == "panoptic":
            stuff = list(entry.stuff_classes())
        if stuff is not None:
            out["stuff_classes"] = tuple(stuff)
        return out


def _family_models() -> dict[str, type[StrictModel]]:
    """``{family: model of its section}`` of the families whose row names one."""
    families = FAMILIES.close("streamseg.segment.config")
    return {name: load(f.options) for name, f in families.items() if f.options is not None}


def _family_fields() -> dict[str, Any]:
    return {
        name: (model | None, Field(default=None, description=f"options only {name} takes"))
        for name, model in _family_models().items()
    }


# pipeline.yaml's ``model:``: the shared fields plus one section per family that has one.
if TYPE_CHECKING:
    ModelConfig = ModelConfigBase
else:
    ModelConfig = create_model(
        "ModelConfig", __base__=ModelConfigBase, __module__=__name__, **_family_fields()
    )
    ModelConfig.__doc__ = ModelConfigBase.__doc__
