"""The Segmenter: frames of several cameras in, per-frame ``Instances`` out.

Example::

    >>> from streamseg.segment import Segmenter
    >>> seg = Segmenter(arch="maskrcnn_small")            # random weights
    >>> results = seg.segment(batch)                       # doctest: +SKIP
    >>> results[0].boxes, results[0].masks.shape           # doctest: +SKIP

One call runs preprocessing (resize, normalise, pad: one tensor for the whole
batch), the model's dense part through the chosen backend, and the model's
post-processing, which returns boxes in frame pixels and ``bool`` masks at
frame resolution (with ``mask_crops=True``, as ``serve`` builds it, Mask
R-CNN's masks as box-local ``MaskCrops`` instead).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any, TypeVar

import torch
from torch import Tensor, nn

from streamseg.models import PRECISIONS, InputSpec
from streamseg.models.checkpoint import CheckpointError
from streamseg.models.layout import to_channels_last
from streamseg.ops import _native
from streamseg.segment.backends import BACKENDS, BackendError, backend_problems, build_backend
from streamseg.segment.backends.base import Backend
from streamseg.segment.loading import load_model
from streamseg.segment.precision import autocast
from streamseg.segment.preprocess import ModelInput, padded_size, preprocess, resized_size
from streamseg.segment.staging import FrameStaging
from streamseg.types import FrameBatch, Instances

__all__ = ["Segmenter", "done_future", "load_model"]

T = TypeVar("T")

log = logging.getLogger("streamseg.segment")


class Segmenter:
    """Instance segmentation of frame batches.

    Args:
        arch: a ``streamseg.models`` architecture (``maskrcnn_small``, ...).
        weights: checkpoint path (trainer, torchvision ``.pth``, detectron2
            ``.pkl``); ``None``: random weights.
        device: ``cpu``, ``cuda`` or ``cuda:N``; or a ``torch.device`` (see :func:`resolve_device`).
        precision: ``fp32``, or ``bf16``/``fp16`` autocast.
        backend: ``eager``, ``inductor``, ``aot`` (needs ``aot_package``) or
            ``tensorrt`` (see :mod:`streamseg.segment.backends`).
        channels_last: run convolutions in channels-last memory format.
        aot_package: the ``.pt2`` file of ``streamseg export`` (backend ``aot``).
        compiled_parts: backends ``inductor``/``tensorrt``: compile only these
            dense parts (e.g. ``("backbone",)``); default all.
        mask_crops: give Mask R-CNN's masks as box-local ``MaskCrops``
            (what serving publishes from, at a cost that follows the
            objects' area) instead of frame-size tensors.
        model_options: ``build_model`` options (``num_classes``,
            ``score_threshold``, ``min_size``, ...).

    ``segment`` and ``load_weights`` may be called from different threads;
    a swap waits for the running batch. ``submit`` is ``segment`` as a done
    future: the interface a model in its own process shares
    (``streamseg.runtime.protocols.SegmenterLike``).
    """

    def __init__(
        self,
        *,
        arch: str,
        weights: str | None = None,
        device: str | torch.device = "cpu",
        precision: str = "fp32",
        backend: str = "eager",
        channels_last: bool = False,
        aot_package: str | None = None,
        compiled_parts: Sequence[str] | None = None,
        mask_crops: bool = False,
        **model_options: Any,
    ) -> None:
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
        self.arch = arch
        self.device = resolve_device(device, backend)
        problems = backend_problems(backend, self.device)  # before building a model
        if problems:
            raise BackendError(
                f"backend {backend!r} cannot run: " + "; ".join(problems), field="model.backend"
            )
        self.precision = precision
        self.channels_last = channels_last
        self.weights = weights
        self.mask_crops = mask_crops
        self._options = dict(model_options)
        self._lock = threading.Lock()
        self._staging = FrameStaging(self.device)
        self.cpu_seconds = 0.0  # CPU time of the threads that called segment(), every batch
        model, self._class_names = load_model(arch, weights, self._options)
        self._model = self._place(model)
        self._state: dict[str, Tensor] = dict(self._model.state_dict(keep_vars=True))
        self.backend: Backend = build_backend(
            backend,
            self._model,
            arch=arch,
            device=self.device,
            precision=precision,
            channels_last=channels_last,
            options={"aot_package": aot_package, "compiled_parts": compiled_parts},
        )

    @property
    def class_names(self) -> tuple[str, ...]:
        """Class names, ``__background__`` first (label ``i`` is ``class_names[i]``)."""
        return self._class_names

    @property
    def region_classes(self) -> tuple[str, ...]:
        """The classes this model gives as regions (``Instances.regions``) rather
        than instances: every class of a semantic model, a panoptic model's stuff
        classes, none for an instance model (alert rules are checked against them)."""
        task = getattr(self._model, "task", "instance")
        if task == "semantic":
            return self._class_names[1:]
        if task == "panoptic":
            return tuple(getattr(self._model, "stuff_classes", ()))
        return ()

    @property
    def input_spec(self) -> InputSpec:
        spec = self._model.input_spec
        assert isinstance(spec, InputSpec), type(spec)
        return spec

    @property
    def model(self) -> nn.Module:
        """The model (eval mode); its dense parts may run through the backend."""
        return self._model

    def _place(self, model: nn.Module) -> nn.Module:
        model = model.to(self.device)
        if self.channels_last:
            model = to_channels_last(model)
        for p in model.parameters():
            p.requires_grad_(False)
        return model

    def stage(self, batch: FrameBatch) -> FrameBatch:
        """``batch`` with its frames already copied to the device.

        On a GPU the frames go from pinned memory with a non-blocking copy on
        a copy stream (:mod:`streamseg.segment.staging`): called while the
        previous batch is still being segmented (from another thread), the
        copy overlaps that batch's compute. :meth:`segment` stages whatever
        is not staged yet; on the CPU this returns ``batch``.
        """
        if self.device.type == "cpu":
            return batch
        images = self._staging.stage(batch.images)
        return FrameBatch(
            tuple(dataclasses.replace(f, image=im) for f, im in zip(batch, images, strict=True))
        )

    def prepare(self, images: list[Tensor]) -> ModelInput:
        """Preprocess ``uint8 (H, W, 3)`` frames (host or device) into the model's input batch."""
        images = self._staging.stage(images)
        spec = self.input_spec
        own = padded_size(
            [_resized(im, spec) for im in images],
            spec.size_divisibility,
        )
        return preprocess(
            images,
            spec,
            device=self.device,
            pad_to=self.backend.input_size(own),
            channels_last=self.channels_last,
        )

    def segment(self, batch: FrameBatch) -> list[Instances]:
        """Segment every frame of ``batch`` in one forward pass.

        Returns:
            one :class:`Instances` per frame, in order: ``boxes`` float32
            ``(N, 4)`` xyxy frame pixels, ``scores``, ``labels`` (``>= 1``),
            ``masks`` bool ``(N, H, W)`` at the frame's resolution (with
            ``mask_crops``, Mask R-CNN's are ``MaskCrops``:
            ``Instances.frame_masks()`` gives the frame-size form), on the
            host: from a GPU the whole batch's results come back together
            (two copies: their sizes, then the masks).
        """
        if len(batch) == 0:
            return []
        cpu0 = time.thread_time()
        with self._lock, torch.inference_mode():
            inputs = self.prepare(batch.images)
            with autocast(self.device, self.precision):
                outputs = self._model(inputs.images, inputs.image_sizes)
            results: list[Instances] = self._model.postprocess(  # type: ignore[operator]
                outputs, inputs.image_sizes, inputs.frame_sizes, mask_crops=self.mask_crops
            )
            self.cpu_seconds += time.thread_time() - cpu0
        return results

    def submit(self, batch: FrameBatch) -> Future[list[Instances]]:
        """:meth:`segment` now, in the caller's thread; its result (or the
        exception it raised) as a done future."""
        return done_future(self.segment, batch)

    def health(self) -> None:
        """A model in this process has no process of its own to report (``None``)."""
        return None

    def warm_up(self) -> float:
        """Segment one blank frame; the seconds it took.

        The first batch pays one-off costs (building or loading the native
        kernels, allocator growth, a compiled backend's first run). The frame
        is the backend's choice: the model's largest landscape input
        (``min_size x max_size``), or an AOT package's own frame size.

        Before it, every post-processing op runs once on the device in the
        model's dtypes (a blank frame may detect nothing to paste): a GPU
        kernel that cannot launch is replaced by the reference now
        (``STREAMSEG_OPS=auto``, see ``ops_on_reference``) or raises
        ``NativeOpsError`` now (``native``), not on the first live frame.
        """
        import time

        from streamseg import ops
        from streamseg.models import precision_dtype
        from streamseg.types import Frame

        ops.warm_up(self.device, (torch.float32, precision_dtype(self.precision)))
        spec = self.input_spec
        h, w = self.backend.warm_up_frame(spec.min_size, spec.max_size)
        blank = torch.zeros((h, w, 3), dtype=torch.uint8)
        start = time.perf_counter()
        self.segment(FrameBatch((Frame("warm-up", 0, 0.0, time.time(), blank),)))
        return time.perf_counter() - start

    @property
    def ops_on_reference(self) -> dict[str, str]:
        """Post-processing ops whose GPU kernel failed here and that run on the PyTorch
        reference instead: op -> the kernel's error (empty when all kernels run)."""
        from streamseg import ops

        return ops.reference_ops()

    def load_weights(self, path: str) -> None:
        """Load new weights in place (hot swap) for the same arch and classes.

        The checkpoint is read and checked completely before anything
        changes, so a failure leaves the running weights untouched.

        Raises:
            CheckpointError: unreadable, another arch, or tensors of other
                shapes (e.g. another ``num_classes``).
        """
        model, names = load_model(self.arch, path, self._options)
        _check_same_structure(self._model, model, path)
        new = model.state_dict()
        _check_same_layout(self._state, new, path)
        if names and self._class_names and tuple(names) != tuple(self._class_names):
            # Published label names and alert rules' class filters were set up
            # with the running names: a swap must not change what a label means.
            raise CheckpointError(
                f"{path} names its classes {', '.join(names[1:])}, the running model "
                f"{', '.join(self._class_names[1:])}; a hot swap keeps the classes: "
                "restart the service to change them"
            )
        with self._lock, torch.no_grad():
            for key, tensor in self._state.items():
                tensor.copy_(new[key])
            self.backend.weights_loaded(self._state)
            self.weights = path
        log.info("model: now running weights %s", path)

    def close(self, wait: float = 2.0) -> None:
        """Release the backend (compiled code) and the model, once the batch running
        in another thread (if any) ends; after ``wait`` seconds it is left to the
        process's exit (a model that hangs must not hang the service's stop too)."""
        if not self._lock.acquire(timeout=wait):
            log.warning("model: a batch still runs after %.0f s; not waiting for it", wait)
            return
        try:
            self.backend.close()
        finally:
            self._lock.release()


def done_future(run: Callable[[FrameBatch], T], batch: FrameBatch) -> Future[T]:
    """``run(batch)`` now; a future that holds its result, or the exception it raised."""
    future: Future[T] = Future()
    try:
        future.set_result(run(batch))
    except Exception as exc:
        future.set_exception(exc)
    return future


def _resized(image: Tensor, spec: InputSpec) -> tuple[int, int]:
    return resized_size(int(image.shape[0]), int(image.shape[1]), spec.min_size, spec.max_size)


def _check_same_structure(live: nn.Module, new: nn.Module, path: str) -> None:
    """Same style (Mask R-CNN) and input spec: tensors alone do not show these."""
    differences = [
        f"{what} {getattr(new, attr, None)!r} vs running {getattr(live, attr, None)!r}"
        for what, attr in (("style", "style"), ("input", "input_spec"))
        if getattr(new, attr, None) != getattr(live, attr, None)
    ]
    if differences:
        raise CheckpointError(
            f"{path} needs another model structure ({'; '.join(differences)}); a hot swap "
            "keeps the structure: restart the service to change it"
        )


def _check_same_layout(live: dict[str, Tensor], new: dict[str, Tensor], path: str) -> None:
    missing = sorted(set(live) - set(new))
    extra = sorted(set(new) - set(live))
    shapes = [
        f"{k}: {tuple(new[k].shape)} vs running {tuple(t.shape)}"
        for k, t in live.items()
        if k in new and new[k].shape != t.shape
    ]
    if not (missing or extra or shapes):
        return
    detail = "; ".join(
        f"{title}: {', '.join(keys[:6])}{' ...' if len(keys) > 6 else ''}"
        for title, keys in (("missing", missing), ("unexpected", extra), ("mis-shaped", shapes))
        if keys
    )
    raise CheckpointError(
        f"{path} does not fit the running model ({detail}); a hot swap keeps the arch and "
        "num_classes: restart the service to change them"
    )


def resolve_device(name: str | torch.device, backend: str) -> torch.device:
    """``name`` as a device this machine has; ``BackendError`` (``model.device``) otherwise.

    A name (``model.device``) is ``cpu``, ``cuda`` or ``cuda:N``. A
    ``torch.device`` of another GPU type (the emulated GPU of
    :mod:`streamseg.bench.emulated`, counting on a CPU) is taken as given: only
    code that made that device can pass it.
    """
    if isinstance(name, torch.device):
        if name.type not in ("cpu", "cuda") and _native.is_gpu_type(name.type):
            return name
        name = str(name)
    try:
        device = torch.device(name)
    except RuntimeError:
        device = None
    if device is None or device.type not in ("cpu", "cuda"):
        raise BackendError(
            f"device must be 'cpu', 'cuda' or 'cuda:N', got {name!r}", field="model.device"
        )
    # A backend with its own start-up check (tensorrt) says more than this.
    if device.type == "cuda" and not backend_problems(backend, device):
        problem = cuda_problem(device)
        if problem:
            raise BackendError(problem, field="model.device")
    return device


def cuda_problem(device: torch.device) -> str | None:
    """Why ``device`` (a CUDA device) cannot be used here; ``None`` when it can."""
    if not torch.cuda.is_available():
        return (
            f"device {str(device)!r}: torch {torch.__version__} sees no CUDA GPU; use device: cpu "
            "(or run on a machine with an NVIDIA GPU and a CUDA build of torch)"
        )
    if device.index is not None and device.index >= torch.cuda.device_count():
        return (
            f"device {str(device)!r}: this machine has {torch.cuda.device_count()} CUDA GPU(s) "
            "(cuda:0 ...); pick one of them"
        )
    return None
