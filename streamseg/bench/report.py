"""The benchmarks' figures: one run's result, percentiles, CPU per frame, the JSON summaries."""

from __future__ import annotations

import dataclasses
import resource
from collections.abc import Sequence
from typing import Any

from streamseg.percentiles import percentile
from streamseg.runtime.stats import STAGE_CPU

__all__ = [
    "GOAL_RATIO",
    "HOST_STAGES",
    "BenchResult",
    "cpu_ms_per_frame",
    "latency_ms",
    "median_round",
    "oracle_summary",
    "peak_rss_mb",
    "summary",
]


# The host path of issue 15: everything after decoding but the model.
HOST_STAGES = ("batching", "host_copy", "track", "rules", "masks", "json", "publish")


@dataclasses.dataclass
class BenchResult:
    """Frames published in ``seconds``; ``cpu``: CPU seconds per stage and
    ``process`` (the whole process, every thread)."""

    frames: int
    seconds: float
    latencies: list[float]
    cpu: dict[str, float] = dataclasses.field(default_factory=dict)
    rendered: int = 0  # live frames drawn and encoded by console viewers

    @property
    def fps(self) -> float:
        return self.frames / self.seconds if self.seconds > 0 else 0.0


def latency_ms(latencies: Sequence[float]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for q in (50, 90, 99):
        out[f"latency_p{q}_ms"] = round(percentile(latencies, q) * 1000, 1) if latencies else None
    return out


def peak_rss_mb() -> float:
    """Peak resident memory of this process, MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# Issue 15: the pipeline should run at this share of the model's own frames/s.
GOAL_RATIO = 0.95


def _ratio(model: BenchResult, e2e: BenchResult) -> float:
    return e2e.fps / model.fps if model.fps > 0 else 0.0


Round = tuple[BenchResult, BenchResult]  # (model-only, end-to-end), run back to back


def median_round(rounds: Sequence[Round]) -> Round:
    """The ``(model-only, end-to-end)`` pair whose ratio is the median (the lower
    of the two middle ones for an even count)."""
    ordered = sorted(rounds, key=lambda pair: _ratio(*pair))
    return ordered[(len(ordered) - 1) // 2]


def summary(rounds: Sequence[Round], extra: dict[str, Any]) -> dict[str, Any]:
    """The figures of alternated model-only and end-to-end runs.

    ``ratio`` is the median of each pair's ``e2e / model`` (a pair ran back
    to back, so a busy moment of the machine slows both); ``model_fps``,
    ``e2e_fps``, the latencies and the CPU times are that pair's; ``ratios``
    lists every pair's.
    """
    model, e2e = median_round(rounds)
    return {
        **extra,
        "model_fps": round(model.fps, 3),
        "e2e_fps": round(e2e.fps, 3),
        "ratio": round(_ratio(model, e2e), 3),
        "ratios": [round(_ratio(*pair), 3) for pair in rounds],
        "goal_ratio": GOAL_RATIO,
        **latency_ms(e2e.latencies),
        "e2e_frames_published": e2e.frames,
        "cpu_ms_per_frame": cpu_ms_per_frame(e2e),
        "peak_rss_mb": round(peak_rss_mb(), 1),
    }


def cpu_ms_per_frame(run: BenchResult) -> dict[str, float]:
    """CPU milliseconds per published frame: each stage of ``STAGE_CPU``,
    ``other`` (threads no stage owns: FFmpeg's and torch's helper threads,
    the garbage collector) and ``process`` (all of them)."""
    if not run.frames or not run.cpu:
        return {}
    out = {k: round(1000 * run.cpu.get(k, 0.0) / run.frames, 4) for k in STAGE_CPU}
    staged = sum(run.cpu.get(k, 0.0) for k in STAGE_CPU)
    out["other"] = round(1000 * max(0.0, run.cpu["process"] - staged) / run.frames, 4)
    out["process"] = round(1000 * run.cpu["process"] / run.frames, 4)
    return out


def oracle_summary(e2e: BenchResult, extra: dict[str, Any]) -> dict[str, Any]:
    """The oracle run: frames/s, per-stage CPU ms per frame and the host path.

    ``host_ms_per_frame`` sums ``HOST_STAGES`` (decode and the model left
    out); ``host_fps_per_core`` is its inverse, the frames one core could
    carry through that path (issue goal: 1,000 at 10 objects, 300 at 50).
    """
    per_frame = cpu_ms_per_frame(e2e)
    host = sum(per_frame.get(k, 0.0) for k in HOST_STAGES)
    return {
        **extra,
        "model": "oracle",
        "e2e_fps": round(e2e.fps, 3),
        "e2e_frames_published": e2e.frames,
        **latency_ms(e2e.latencies),
        "cpu_ms_per_frame": per_frame,
        "host_stages": list(HOST_STAGES),
        "host_ms_per_frame": round(host, 4),
        "host_fps_per_core": round(1000 / host, 1) if host > 0 else None,
        "peak_rss_mb": round(peak_rss_mb(), 1),
    }
