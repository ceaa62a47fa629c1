"""Counters the runtime keeps for its status line, ``/readyz`` and the benchmark.

Every update also goes to the OpenTelemetry instruments (``PipelineMetrics``)
when given, so the numbers on the terminal and in Prometheus agree.

CPU time per stage (``add_cpu``, ``cpu_seconds``) is always on: the stages
read their thread's CPU clock (``time.thread_time``, about 1.5 us) a few
times per batch and twice per frame around the rules. ``STAGE_CPU`` names
the stages in pipeline order.
"""

from __future__ import annotations

import collections
import dataclasses
import threading
import time
from collections.abc import Iterable

from streamseg.telemetry.metrics import PipelineMetrics

__all__ = ["STAGE_CPU", "CameraCounts", "PipelineStats"]

# Where the host's CPU time goes, in pipeline order (``PipelineStats.cpu_seconds``):
#   decode     the camera threads: demux, decode, hand-off to the queues
#   batching   the segment thread waiting for and assembling batches
#   model      Segmenter.segment (preprocess, forward, post-processing)
#   host_copy  the segment thread after the model: results off the device, queued
#   track      the tracker (association, motion, track table)
#   rules      the alert rules
#   masks      mask encoding (COCO RLE)
#   json       building and serialising the messages
#   publish    handing messages to the sinks and the sinks' writer threads (XADD)
STAGE_CPU = (
    "decode",
    "batching",
    "model",
    "host_copy",
    "track",
    "rules",
    "masks",
    "json",
    "publish",
)


@dataclasses.dataclass
class CameraCounts:
    frames_in: int = 0
    dropped: int = 0
    processed: int = 0
    published: int = 0


class PipelineStats:
    """Thread-safe per-camera counters and a window of recent latencies (seconds)."""

    def __init__(
        self, cameras: Iterable[str], metrics: PipelineMetrics | None = None, window: int = 2048
    ) -> None:
        self._lock = threading.Lock()
        self.cameras = {cid: CameraCounts() for cid in cameras}
        self._latency: collections.deque[float] = collections.deque(maxlen=window)
        self._all_latency: list[float] = []
        # (camera, time.monotonic() of the Redis acknowledgement, latency s), when kept
        self.samples: list[tuple[str, float, float]] = []
        self.keep_all_latencies = False
        self._reasons: dict[str, collections.Counter[str]] = {
            cid: collections.Counter() for cid in self.cameras
        }
        self.metrics = metrics
        self.started = time.monotonic()
        self.first_publish: float | None = None
        self.last_publish: float | None = None
        self._cpu = dict.fromkeys(STAGE_CPU, 0.0)

    def add_camera(self, camera: str) -> None:
        """Count a camera added while running (its old counts stay if it was there before)."""
        with self._lock:
            self.cameras.setdefault(camera, CameraCounts())
            self._reasons.setdefault(camera, collections.Counter())

    def _attrs(self, camera: str) -> dict[str, str]:
        return {"camera": camera}

    def frame_in(self, camera: str) -> None:
        with self._lock:
            self.cameras[camera].frames_in += 1
        if self.metrics:
            self.metrics.frames_in.add(1, self._attrs(camera))

    def dropped(self, camera: str, reason: str, n: int = 1) -> None:
        with self._lock:
            self.cameras[camera].dropped += n
            self._reasons[camera][reason] += n
        if self.metrics:
            self.metrics.frames_dropped.add(n, {"camera": camera, "reason": reason})

    def processed(self, camera: str) -> None:
        with self._lock:
            self.cameras[camera].processed += 1
        if self.metrics:
            self.metrics.frames_processed.add(1, self._attrs(camera))

    def published(self, camera: str, latency: float) -> None:
        now = time.monotonic()
        with self._lock:
            self.cameras[camera].published += 1
            self._latency.append(latency)
            if self.keep_all_latencies:
                self._all_latency.append(latency)
                self.samples.append((camera, now, latency))
            self.first_publish = self.first_publish or now
            self.last_publish = now
        if self.metrics:
            self.metrics.e2e_latency.record(latency, self._attrs(camera))

    def add_cpu(self, stage: str, seconds: float) -> None:
        """Count ``seconds`` of CPU time spent in ``stage`` (one of ``STAGE_CPU``)."""
        with self._lock:
            self._cpu[stage] += seconds

    def cpu_seconds(self) -> dict[str, float]:
        """CPU seconds spent so far in each stage of ``STAGE_CPU``."""
        with self._lock:
            return dict(self._cpu)

    def snapshot(self) -> dict[str, CameraCounts]:
        with self._lock:
            return {cid: dataclasses.replace(c) for cid, c in self.cameras.items()}

    def drop_reasons(self) -> dict[str, dict[str, int]]:
        """``{camera: {reason: frames dropped}}`` (``queue_full``, ``redis``, ...)."""
        with self._lock:
            return {cid: dict(c) for cid, c in self._reasons.items()}

    def latency_samples(self) -> list[tuple[str, float, float]]:
        """``(camera, acknowledged at (monotonic), latency s)`` of every published frame
        since ``keep_all_latencies`` was set."""
        with self._lock:
            return list(self.samples)

    def all_latencies(self) -> list[float]:
        """Capture-to-publish latency of every frame since ``keep_all_latencies`` was set, s."""
        with self._lock:
            return list(self._all_latency)

    def latency_percentiles(self, *qs: float, all_frames: bool = False) -> list[float | None]:
        """Percentiles (0-100) of capture-to-Redis latency, seconds (recent window,
        or every frame since start when ``keep_all_latencies`` and ``all_frames``)."""
        with self._lock:
            data = sorted(self._all_latency if all_frames else self._latency)
        if not data:
            return [None for _ in qs]
        return [data[min(len(data) - 1, round(q / 100 * (len(data) - 1)))] for q in qs]
