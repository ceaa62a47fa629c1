"""``bench pipeline``'s live part: the pipeline's own cameras served as ``serve`` runs them.

``run_live`` serves them for a fixed time and measures each camera: frames
per second in and segmented, the real-time ratio, the frame counters
(``streamseg.telemetry.counters``) with the reasons of the skipped and the
lost, and glass-to-event latency.
"""

from __future__ import annotations

import time
from typing import Any

from streamseg.bench.report import latency_ms
from streamseg.bench.runs import raise_failed_batches, timed_pipeline
from streamseg.config.pipeline import PipelineConfig
from streamseg.runtime.factory import decode_device, open_camera
from streamseg.runtime.protocols import SegmenterLike
from streamseg.runtime.segmenting import describe_error

__all__ = ["run_live"]


def run_live(
    config: PipelineConfig, segmenter: SegmenterLike, seconds: float, settle: float = 1.0
) -> dict[str, Any]:
    """Serve the pipeline's own cameras for ``seconds`` and measure each one.

    Timing starts once every camera has published a frame (at most 60 s of
    connecting, model warm-up) plus ``settle`` seconds. Per camera:
    ``camera_fps`` (frames the source delivered per second, after its
    ``max_fps``), ``processed_fps``, ``realtime_ratio`` (processed / camera,
    1.0 = keeps up), ``dropped`` by reason, and glass-to-event latency
    (frame read to Redis acknowledgement) percentiles in ms. The counters
    are those of the window, so ``segmented`` may exceed ``read`` by the
    frames still in the pipeline when it opened (``in_flight_at_start``).
    """
    device = decode_device(config)  # DALI cameras decode on the model's device, as in serve
    sources = {cam.id: open_camera(cam, device=device) for cam in config.cameras}
    pipeline = timed_pipeline(config, segmenter, sources)
    stats = pipeline.stats
    pipeline.start()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and pipeline.failure is None:
            if all(c.published > 0 for c in stats.snapshot().values()):
                break
            time.sleep(0.1)
        time.sleep(settle)
        t0, before, reasons0 = time.monotonic(), stats.snapshot(), _reasons(stats)
        pipeline.stop_event.wait(seconds)
        t1, after, reasons1 = time.monotonic(), stats.snapshot(), _reasons(stats)
        states = pipeline.camera_states()
    finally:
        pipeline.stop()
        pipeline.wait(config.runtime.drain_timeout + 5)
        pipeline.join(10)
    if pipeline.failure is not None:
        raise RuntimeError(f"the pipeline failed: {describe_error(pipeline.failure)}")
    raise_failed_batches(pipeline)
    dt = t1 - t0
    samples = [(c, lat) for c, t, lat in stats.latency_samples() if t0 <= t <= t1]
    cameras: dict[str, Any] = {}
    for cid in sources:
        was = before[cid].as_dict()
        counts = {word: n - was[word] for word, n in after[cid].as_dict().items()}
        read, segmented = counts["read"], counts["segmented"]
        # Frames read before the window but segmented in it: why ``segmented``
        # may exceed ``read`` by up to this many (the queue and the batch).
        in_flight = was["read"] - was["skipped"] - was["segmented"]
        in_flight -= reasons0["lost"][cid].get("segment_error", 0)
        cameras[cid] = {
            "state": states[cid][0],
            "camera_fps": round(read / dt, 2),
            "processed_fps": round(segmented / dt, 2),
            "realtime_ratio": round(segmented / read, 3) if read else None,
            **counts,  # read, skipped, segmented, published, lost (telemetry.counters)
            "in_flight_at_start": in_flight,
            **{
                f"{word}_by_reason": _grown(reasons0[word][cid], reasons1[word][cid])
                for word in ("skipped", "lost")
            },
            **latency_ms([lat for c, lat in samples if c == cid]),
        }
    read_all = sum(c["read"] for c in cameras.values())
    done_all = sum(c["segmented"] for c in cameras.values())
    return {
        "seconds": round(dt, 2),
        "realtime_ratio": round(done_all / read_all, 3) if read_all else None,
        "processed_fps": round(done_all / dt, 2),
        **latency_ms([lat for _c, lat in samples]),
        "cameras": cameras,
    }


def _reasons(stats: Any) -> dict[str, dict[str, dict[str, int]]]:
    return {word: stats.reasons(word) for word in ("skipped", "lost")}


def _grown(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """``{reason: frames}`` counted between ``before`` and ``after``."""
    return {r: n - before.get(r, 0) for r, n in after.items() if n > before.get(r, 0)}
