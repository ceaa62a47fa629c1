"""Model-only benchmark: latency per batch and frames per second of a Segmenter.

Frames come from the synthetic scene generator (textured moving shapes),
one scene per camera, so a batch of ``N`` holds ``N`` cameras. The first
``warmup`` batches are not timed (compilation for ``inductor`` happens
there); their total time is reported as ``warmup_s``.
"""

from __future__ import annotations

import resource
import statistics
import time
from typing import Any

import torch

from streamseg.percentiles import percentile
from streamseg.segment.segmenter import Segmenter
from streamseg.types import Frame, FrameBatch, Instances

__all__ = ["bench_interleaved", "bench_segmenter", "synthetic_batches"]


def synthetic_batches(
    size: tuple[int, int], batch: int, count: int, *, device: str = "cpu"
) -> list[FrameBatch]:
    """``count`` batches of ``batch`` synthetic frames (one scene per camera)."""
    from streamseg.synthetic.scene import SyntheticScene

    scenes = [SyntheticScene(seed=cam, height=size[0], width=size[1]) for cam in range(batch)]
    out = []
    for i in range(count):
        frames = tuple(
            Frame(
                camera_id=f"cam{cam}",
                seq=i,
                pts=scene.time(i),
                capture_time=time.time(),
                image=scene.frame(i).image.to(device),
            )
            for cam, scene in enumerate(scenes)
        )
        out.append(FrameBatch(frames))
    return out


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _stats(latencies: list[float], cpu_times: list[float], frames_per_batch: int) -> dict[str, Any]:
    return {
        "latency_ms": {
            "p50": round(percentile(latencies, 50) * 1000, 2),
            "p90": round(percentile(latencies, 90) * 1000, 2),
            "mean": round(statistics.fmean(latencies) * 1000, 2),
            "min": round(min(latencies) * 1000, 2),
        },
        # CPU seconds of the process (all threads): steadier than wall time
        # on a machine shared with other jobs.
        "cpu_ms": {
            "p50": round(percentile(cpu_times, 50) * 1000, 2),
            "mean": round(statistics.fmean(cpu_times) * 1000, 2),
        },
        "fps": round(frames_per_batch * len(latencies) / sum(latencies), 3),
        "fps_p50": round(frames_per_batch / percentile(latencies, 50), 3),
    }


def _timed(segmenter: Segmenter, batch: FrameBatch) -> tuple[list[Instances], float, float]:
    """``segment(batch)`` with its wall and process CPU seconds."""
    t0, c0 = time.perf_counter(), time.process_time()
    results = segmenter.segment(batch)
    _sync(segmenter.device)
    return results, time.perf_counter() - t0, time.process_time() - c0


def bench_interleaved(
    segmenters: dict[str, Segmenter], batches: list[FrameBatch], *, iters: int, warmup: int
) -> dict[str, Any]:
    """Time several segmenters on the same batches, one batch each in turn.

    Interleaving makes the comparison fair on a machine whose load changes
    during the run (other processes on a shared CPU). Returns per-name
    results and each one's p50 speed-up over the first.
    """
    warmup_s: dict[str, float] = {}
    for name, seg in segmenters.items():
        started = time.perf_counter()
        for i in range(warmup):
            seg.segment(batches[i % len(batches)])
        _sync(seg.device)
        warmup_s[name] = round(time.perf_counter() - started, 2)
    latencies: dict[str, list[float]] = {name: [] for name in segmenters}
    cpu_times: dict[str, list[float]] = {name: [] for name in segmenters}
    for i in range(iters):
        batch = batches[i % len(batches)]
        for name, seg in segmenters.items():
            _, wall, cpu = _timed(seg, batch)
            latencies[name].append(wall)
            cpu_times[name].append(cpu)
    per_batch = len(batches[0])
    results = {
        name: {**_stats(lat, cpu_times[name], per_batch), "warmup_s": warmup_s[name]}
        for name, lat in latencies.items()
    }
    base = percentile(next(iter(latencies.values())), 50)
    speedup = {name: round(base / percentile(lat, 50), 3) for name, lat in latencies.items()}
    return {
        "results": results,
        "speedup_p50": speedup,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def bench_segmenter(
    segmenter: Segmenter, batches: list[FrameBatch], *, iters: int, warmup: int
) -> dict[str, Any]:
    """Run ``warmup`` untimed then ``iters`` timed batches (cycling ``batches``)."""
    device = segmenter.device
    started = time.perf_counter()
    for i in range(warmup):
        segmenter.segment(batches[i % len(batches)])
    _sync(device)
    warmup_s = time.perf_counter() - started
    latencies, cpu_times, detections = [], [], []
    for i in range(iters):
        results, wall, cpu = _timed(segmenter, batches[i % len(batches)])
        latencies.append(wall)
        cpu_times.append(cpu)
        detections += [len(r) for r in results]
    out: dict[str, Any] = {
        **_stats(latencies, cpu_times, len(batches[0])),
        "warmup_s": round(warmup_s, 2),
        "detections_per_frame": round(statistics.fmean(detections), 2) if detections else 0.0,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
    if device.type == "cuda":
        out["peak_cuda_mb"] = round(torch.cuda.max_memory_allocated(device) / 2**20, 1)
    return out
