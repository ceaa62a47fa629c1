"""``bench dispatch``: what one batch costs a GPU in launches and syncs, counted on a CPU.

One ``Segmenter.segment`` call (preprocessing, the model, post-processing,
the results copied back: what ``serve`` runs per batch, masks as crops)
runs on the emulated GPU of :mod:`streamseg.bench.emulated`, once with the
Triton kernels (the CUDA path: their launches counted, each op's result
taken from its C++ twin unless ``interpret``) and once with the PyTorch
reference ops (``STREAMSEG_OPS=reference``: the path CUDA takes without
Triton). Each prints ``ops_per_frame``, ``kernel_launches_per_frame`` and
``host_syncs_per_frame`` (and per batch), split by stage.

The model has random weights, so its detections are controlled: the score
threshold is set, from one run, so that a few times ``detections`` (D)
candidates pass in every image, and ``detections_per_image`` is D: exactly
D detections survive per frame (``detections`` in the output says how many
did). For Mask2Former, D queries are kept.

Counting runs at a small input (``--size``, default 160x160, the model's
resize set to keep it): the number of ops of a convolution does not depend
on the size of its input, and neither does the post-processing's (no loop
over boxes), which ``tests/bench/test_bench_dispatch.py`` checks. The RPN keeps
``--proposals`` per image (default 64, the model's default is 1000), which
only shrinks the box head's matrix products on this CPU.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from streamseg.bench.dispatch_hooks import DispatchHooks
from streamseg.bench.emulated import DispatchCounts, emulated_gpu
from streamseg.models import FAMILIES, arch_family
from streamseg.registry import load
from streamseg.segment.segmenter import Segmenter
from streamseg.types import FrameBatch

__all__ = ["PATHS", "count_dispatch", "measure_runs"]

PATHS = ("triton", "reference")
STAGES = ("preprocess", "model", "postprocess")


def count_dispatch(
    arch: str,
    *,
    batch: int = 1,
    detections: int = 10,
    size: tuple[int, int] = (160, 160),
    paths: tuple[str, ...] = PATHS,
    proposals: int = 64,
    interpret: bool = False,
) -> dict[str, Any]:
    """The counts of one batch of ``batch`` frames of ``size`` on each of ``paths``.

    Returns ``{"benchmark", "arch", "batch", "detections", "size", "proposals",
    "paths": {path: counts}}``; a path's counts are :func:`measure_runs`'.
    """
    out: dict[str, Any] = {
        "benchmark": "dispatch",
        "arch": arch,
        "batch": batch,
        "detections": detections,
        "size": list(size),
        "proposals": proposals,
        "paths": {},
    }
    for path in paths:
        (counts,) = measure_runs(
            arch,
            [(batch, detections)],
            path=path,
            size=size,
            proposals=proposals,
            interpret=interpret,
        )
        out["paths"][path] = counts
    return out


def measure_runs(
    arch: str,
    runs: Sequence[tuple[int, int]],
    *,
    path: str,
    size: tuple[int, int] = (160, 160),
    proposals: int = 64,
    interpret: bool = False,
    frame_sizes: Sequence[tuple[int, int]] | None = None,
) -> list[dict[str, Any]]:
    """Count one batch for each ``(batch, detections)`` of ``runs`` on ``path``, one model.

    The model's resize keeps ``size``; ``frame_sizes`` (one per run) feeds
    frames of other sizes to the same model.

    Each result: ``ops_per_frame``, ``kernel_launches_per_frame``,
    ``triton_launches_per_frame``, ``host_syncs_per_frame``, ``per_batch``
    (the totals), ``stages`` (preprocess, model, postprocess),
    ``detections_per_frame`` (found), ``syncs`` (where each was made),
    ``top_ops`` and ``seconds`` (the counted batch's wall time).
    """
    if path not in PATHS:
        raise ValueError(f"path must be one of {', '.join(PATHS)}, got {path!r}")
    out = []
    with _ops_mode(path), emulated_gpu(interpret=interpret and path == "triton") as emu:
        device, counts = emu
        with counts.paused():
            torch.manual_seed(0)
            segmenter = Segmenter(
                arch=arch,
                device=device,
                mask_crops=True,
                **_options(arch, size, max(d for _, d in runs), proposals),
            )
            stages = _staged(segmenter, counts)
            sizes = list(frame_sizes) if frame_sizes is not None else [size] * len(runs)
            for (batch, detections), frame in zip(runs, sizes, strict=True):
                out.append(_measure(segmenter, counts, stages, _frames(frame, batch), detections))
    return out


@contextlib.contextmanager
def _ops_mode(path: str) -> Iterator[None]:
    """``STREAMSEG_OPS`` for one path: ``auto`` (Triton on the GPU) or ``reference``."""
    before = os.environ.get("STREAMSEG_OPS")
    os.environ["STREAMSEG_OPS"] = "reference" if path == "reference" else "auto"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("STREAMSEG_OPS", None)
        else:
            os.environ["STREAMSEG_OPS"] = before


def _frames(size: tuple[int, int], batch: int) -> FrameBatch:
    from streamseg.bench.model import synthetic_batches

    return synthetic_batches(size, batch, 1)[0]


def _options(arch: str, size: tuple[int, int], detections: int, proposals: int) -> dict[str, Any]:
    """Build options: the resize keeps ``size``, thresholds at 0 (set later)."""
    options: dict[str, Any] = {
        "min_size": min(size),
        "max_size": max(size),
        "score_threshold": 0.0,
        "detections_per_image": detections,
    }
    options.update(_hooks(arch).options(proposals))
    return options


def _measure(
    segmenter: Segmenter,
    counts: DispatchCounts,
    stages: dict[str, dict[str, int]],
    frames: FrameBatch,
    detections: int,
) -> dict[str, Any]:
    """Warm up and set the threshold for ``detections``, then count one batch."""
    # The warm-up (caches: anchors, scales; kernels loaded) also shows the scores.
    hooks = _hooks(segmenter.arch)
    hooks.set_limits(segmenter, hooks.calibrate(segmenter, frames, detections), detections)
    counts.clear()
    stages.clear()
    start = time.perf_counter()
    with counts.counting():
        results = segmenter.segment(frames)
    seconds = time.perf_counter() - start
    return _summary(counts, stages, len(frames), [len(r) for r in results], seconds)


def _summary(
    counts: DispatchCounts,
    stages: dict[str, dict[str, int]],
    batch: int,
    found: list[int],
    seconds: float,
) -> dict[str, Any]:
    totals = counts.totals()
    return {
        "ops_per_frame": round(totals["ops"] / batch, 1),
        "kernel_launches_per_frame": round(totals["launches"] / batch, 1),
        "triton_launches_per_frame": round(totals["triton_launches"] / batch, 1),
        "host_syncs_per_frame": round(totals["syncs"] / batch, 2),
        "per_batch": totals,
        "stages": {name: dict(c) for name, c in stages.items()},
        "detections_per_frame": found,
        "syncs": dict(counts.sync_sites.most_common()),
        "top_ops": dict(counts.ops.most_common(12)),
        "seconds": round(seconds, 2),
    }


def _staged(segmenter: Segmenter, counts: DispatchCounts) -> dict[str, dict[str, int]]:
    """Count per stage: wraps the segmenter's ``prepare`` and the model's ``forward`` and
    ``postprocess`` (this segmenter only) to record the counts each adds."""
    stages: dict[str, dict[str, int]] = {}
    model: Any = segmenter.model

    def wrap(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            before = counts.totals()
            try:
                return fn(*args, **kwargs)
            finally:
                after = counts.totals()
                into = stages.setdefault(name, {k: 0 for k in after})
                for key, value in after.items():
                    into[key] += value - before[key]

        return run

    segmenter.prepare = wrap("preprocess", segmenter.prepare)  # type: ignore[method-assign]
    model.forward = wrap("model", model.forward)
    model.postprocess = wrap("postprocess", model.postprocess)
    return stages


def _hooks(arch: str) -> DispatchHooks:
    """The family's hooks (its row's ``dispatch``, ``streamseg.bench.dispatch_hooks``)."""
    target = FAMILIES[arch_family(arch)].dispatch
    if target is None:
        raise ValueError(f"bench dispatch cannot count {arch}: its family names no hooks")
    hooks: DispatchHooks = load(target)()
    return hooks
