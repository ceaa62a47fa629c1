"""Workloads and timing of ``streamseg bench ops``: native kernels vs the reference.

Each workload is made once (seeded, realistic sizes: 720p frames, FPN maps of
an 800x1344 input) and timed on both paths; times are medians in
milliseconds. The two paths must agree (checked on every run), so a figure
never comes from a kernel that computes something else.

On ``device="cuda"`` the same workloads run on the GPU (the native path is
then the Triton kernels), timed with a synchronise around every call. Each
entry says how many calls were timed (``*_samples``; fewer than asked when
a path runs past its time budget). Where
torchvision imports (the CUDA machines' images have it), its op for the same
workload is timed too and checked against ours.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from streamseg import ops
from streamseg.ops import _native
from streamseg.ops import reference as ref

__all__ = ["Workload", "run_benchmarks", "workloads"]

FRAME = (720, 1280)


@dataclass
class Workload:
    name: str
    params: dict[str, Any]
    native: Callable[[], Any]
    reference: Callable[[], Any]
    same: Callable[[Any, Any], bool]
    torchvision: Callable[[], Any] | None = None


def detections(n: int, seed: int, frame: tuple[int, int] = FRAME) -> tuple[Tensor, Tensor]:
    """``n`` boxes clustered around ``n / 8`` objects in a frame, with scores."""
    g = torch.Generator().manual_seed(seed)
    k = max(n // 8, 1)
    centres = torch.rand(k, 2, generator=g) * torch.tensor([frame[1], frame[0]])
    sizes = torch.rand(k, 2, generator=g) * 200 + 16
    pick = torch.randint(0, k, (n,), generator=g)
    c = centres[pick] + torch.randn(n, 2, generator=g) * 6
    s = sizes[pick] * (1 + torch.randn(n, 2, generator=g) * 0.1).clamp(min=0.5)
    return torch.cat([c - s / 2, c + s / 2], 1), torch.rand(n, generator=g)


def _nms(n: int, device: torch.device, tv: Any) -> Workload:
    boxes, scores = (t.to(device) for t in detections(n, seed=n))
    return Workload(
        f"nms_{n}",
        {"boxes": n, "iou_threshold": 0.5},
        lambda: ops.nms(boxes, scores, 0.5),
        lambda: ref.nms(boxes, scores, 0.5),
        torch.equal,
        (lambda: tv.ops.nms(boxes, scores, 0.5)) if tv else None,
    )


def _batched_nms(n: int, classes: int, device: torch.device, tv: Any) -> Workload:
    boxes, scores = (t.to(device) for t in detections(n, seed=n + 1))
    idxs = torch.randint(0, classes, (n,), generator=torch.Generator().manual_seed(1)).to(device)
    return Workload(
        f"batched_nms_{n}",
        {"boxes": n, "classes": classes, "iou_threshold": 0.5},
        lambda: ops.batched_nms(boxes, scores, idxs, 0.5),
        lambda: ref.batched_nms(boxes, scores, idxs, 0.5),
        torch.equal,
        (lambda: tv.ops.batched_nms(boxes, scores, idxs, 0.5)) if tv else None,
    )


def _close(a: Tensor, b: Tensor) -> bool:
    return bool(torch.allclose(a, b, rtol=1e-4, atol=1e-4))


# Thresholded pastes: a float32 probability within rounding of the threshold
# lands on either side, so the paths may differ on a few pixels; the tests
# allow the same fraction (tests/ops/test_ops_native.py).
BINARY_MISMATCH = 1e-4


def _same_pixels(a: Tensor, b: Tensor) -> bool:
    if a.shape != b.shape:
        return False
    return int((a != b).sum()) < BINARY_MISMATCH * a.numel() or a.numel() == 0


def _multiscale(rois: int, channels: int, device: torch.device, tv: Any) -> Workload:
    g = torch.Generator().manual_seed(2)
    image = (800, 1344)
    feats = [
        torch.randn(1, channels, image[0] // s, image[1] // s, generator=g).to(device)
        for s in (4, 8, 16, 32)
    ]
    boxes, _ = detections(rois, seed=3, frame=image)
    boxes = ref.clip_boxes(boxes, image).to(device)
    args = (feats, [boxes], [image], 7, 2)
    theirs = None
    if tv:
        pooler = tv.ops.MultiScaleRoIAlign(["p2", "p3", "p4", "p5"], 7, 2)
        named = dict(zip(["p2", "p3", "p4", "p5"], feats, strict=True))

        def theirs() -> Tensor:
            out: Tensor = pooler(named, [boxes], [image])
            return out

    return Workload(
        f"multiscale_roi_align_{rois}",
        {"rois": rois, "levels": 4, "channels": channels, "output": 7, "sampling_ratio": 2},
        lambda: ops.multiscale_roi_align(*args),
        lambda: ref.multiscale_roi_align(*args),
        _close,
        theirs,
    )


def _paste(n: int, device: torch.device, tv: Any, threshold: float | None = None) -> Workload:
    """Pasting ``n`` 28x28 masks into a 720p frame: probabilities, or thresholded."""
    boxes, _ = detections(n, seed=4)
    boxes = boxes.to(device)
    masks = torch.rand(n, 28, 28, generator=torch.Generator().manual_seed(5)).to(device)
    theirs = None
    if tv:
        from torchvision.models.detection.roi_heads import paste_masks_in_image

        def theirs() -> Tensor:
            out: Tensor = paste_masks_in_image(masks[:, None], boxes, FRAME, padding=1)[:, 0]
            return out if threshold is None else out > threshold

    params: dict[str, Any] = {"masks": n, "mask_size": 28, "frame": list(FRAME)}
    if threshold is None:
        return Workload(
            f"paste_masks_{n}",
            params,
            lambda: ops.paste_masks(masks, boxes, FRAME),
            lambda: ref.paste_masks(masks, boxes, FRAME),
            _close,
            theirs,
        )
    return Workload(
        f"paste_masks_binary_{n}",
        {**params, "threshold": threshold},
        lambda: ops.paste_masks_binary(masks, boxes, FRAME, threshold),
        lambda: ref.paste_masks_binary(masks, boxes, FRAME, threshold),
        _same_pixels,
        theirs,
    )


def _rle(n: int, device: torch.device) -> Workload:
    boxes, _ = detections(n, seed=6)
    probs = torch.rand(n, 28, 28, generator=torch.Generator().manual_seed(7))
    # Real instance masks: smooth blobs pasted into the frame.
    masks = ref.paste_masks(torch.nn.functional.avg_pool2d(probs, 5, 1, 2), boxes, FRAME) > 0.5
    masks = masks.to(device)
    return Workload(
        f"masks_to_rle_{n}",
        {"masks": n, "frame": list(FRAME)},
        lambda: ops.masks_to_rle(masks),
        lambda: ref.masks_to_rle(masks),
        lambda a, b: a == b,
    )


def _decode(n: int, classes: int, device: torch.device) -> Workload:
    boxes, _ = detections(n, seed=8)
    boxes = boxes.to(device)
    deltas = torch.randn(n, 4 * classes, generator=torch.Generator().manual_seed(9)).to(device)
    weights = (10.0, 10.0, 5.0, 5.0)
    return Workload(
        f"decode_boxes_{n}x{classes}",
        {"boxes": n, "classes": classes},
        lambda: ops.decode_boxes(deltas, boxes, weights),
        lambda: ref.decode_boxes(deltas, boxes, weights),
        _close,
    )


def workloads(quick: bool = False, device: str = "cpu", tv: Any = None) -> list[Workload]:
    """The benchmark set on ``device``; ``quick`` shrinks it (for tests).

    ``tv``: the imported ``torchvision`` module, to time its ops as well.
    """
    dev = torch.device(device)
    if quick:
        return [
            _nms(200, dev, tv),
            _batched_nms(200, 5, dev, tv),
            _multiscale(50, 8, dev, tv),
            _paste(5, dev, tv),
            _paste(5, dev, tv, threshold=0.5),
            _rle(5, dev),
        ]
    return [
        _nms(1000, dev, tv),
        _nms(5000, dev, tv),
        _batched_nms(2000, 80, dev, tv),
        _multiscale(1000, 256, dev, tv),
        _paste(100, dev, tv),
        _paste(100, dev, tv, threshold=0.5),
        _rle(100, dev),
        _decode(1000, 91, dev),
    ]


def torchvision_module() -> tuple[Any, str | None]:
    """``(torchvision, None)`` when it imports with working ops, else ``(None, why)``."""
    try:
        import torchvision

        torchvision.ops.nms(torch.zeros(1, 4), torch.zeros(1), 0.5)
    except Exception as exc:  # missing, or its C++ ops do not load on this torch
        return None, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return torchvision, None


def _time(
    fn: Callable[[], Any], repeat: int, budget_s: float, device: torch.device
) -> tuple[float, int, Any]:
    """Median milliseconds of ``fn`` (after one warm-up call), the timed calls, the result.

    Fewer than ``repeat`` calls are timed when they run past ``budget_s``.
    """

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    result = fn()
    sync()
    times: list[float] = []
    deadline = time.perf_counter() + budget_s
    while len(times) < repeat and (not times or time.perf_counter() < deadline):
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3, len(times), result


def _ms(value: float) -> float:
    """Milliseconds to 4 significant digits: a fast op's 0.0078 ms keeps its
    precision (three decimals would leave 0.008, 2 % off the ratios)."""
    return float(f"{value:.4g}")


def run_benchmarks(
    repeat: int = 5, quick: bool = False, budget_s: float = 10.0, device: str = "cpu"
) -> dict[str, Any]:
    """Time every workload on both paths (and torchvision's, where it works) -> the report."""
    dev = torch.device(device)
    native = _native.enabled(dev.type)
    tv, tv_error = torchvision_module()
    results: dict[str, Any] = {}
    for w in workloads(quick, device, tv):
        ref_ms, ref_n, want = _time(w.reference, repeat, budget_s, dev)
        entry: dict[str, Any] = {
            "params": w.params,
            "reference_ms": _ms(ref_ms),
            "reference_samples": ref_n,
        }
        if native:
            nat_ms, nat_n, got = _time(w.native, repeat, budget_s, dev)
            if not w.same(got, want):
                raise AssertionError(f"{w.name}: native and reference results differ")
            entry["native_ms"] = _ms(nat_ms)
            entry["native_samples"] = nat_n
            entry["ratio"] = round(ref_ms / nat_ms, 2)
        if w.torchvision is not None:
            tv_ms, tv_n, theirs = _time(w.torchvision, repeat, budget_s, dev)
            entry["torchvision_ms"] = _ms(tv_ms)
            entry["torchvision_samples"] = tv_n
            entry["torchvision_agrees"] = bool(w.same(theirs, want))
            if native:
                entry["torchvision_over_native"] = round(tv_ms / entry["native_ms"], 2)
        results[w.name] = entry
    return {
        "device": str(dev),
        "gpu": torch.cuda.get_device_name(dev) if dev.type == "cuda" else None,
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "native": _native.status(),
        "binary_paste_mismatch_allowed": BINARY_MISMATCH,
        "torchvision": tv.__version__ if tv else f"not timed ({tv_error})",
        "ops": results,
    }
