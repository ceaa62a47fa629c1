"""Counters the runtime keeps for its status line, ``/readyz`` and the benchmark.

Per camera, the frame counters of :mod:`streamseg.telemetry.counters` (read,
skipped, segmented, published, lost: what each means is said there), with
the reasons of the skipped and the lost. Every update also goes to the
OpenTelemetry instruments (``PipelineMetrics``) when given, so the numbers
on the terminal and in Prometheus agree.

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
from collections.abc import Iterable, Sequence
from typing import Any

from streamseg.percentiles import percentiles
from streamseg.runtime.rates import FrameRate
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
    """One camera's frame counters (``streamseg.telemetry.counters.FRAME_COUNTERS``)."""

    read: int = 0
    skipped: int = 0
    segmented: int = 0
    published: int = 0
    lost: int = 0

    def as_dict(self) -> dict[str, int]:
        return dataclasses.asdict(self)


class PipelineStats:
    """Thread-safe per-camera counters and a window of recent latencies (seconds)."""

    def __init__(
        self, cameras: Iterable[str], metrics: PipelineMetrics | None = None, window: int = 2048
    ) -> None:
        self._lock = threading.Lock()
        self.cameras = {cid: CameraCounts() for cid in cameras}
        self._rates = {cid: FrameRate() for cid in self.cameras}
        self._latency: collections.deque[float] = collections.deque(maxlen=window)
        # Two latencies with one meaning each (the status line, /readyz):
        # capture -> publish, and publish -> each sink's acknowledgement.
        self._window = window
        self._processing: collections.deque[float] = collections.deque(maxlen=window)
        self._delivery: dict[str, collections.deque[float]] = {}
        self._all_latency: list[float] = []
        # (camera, time.monotonic() of the Redis acknowledgement, latency s), when kept
        self.samples: list[tuple[str, float, float]] = []
        self.keep_all_latencies = False
        # camera -> "skipped" / "lost" -> reason -> frames
        self._reasons: dict[str, dict[str, collections.Counter[str]]] = {
            cid: _no_reasons() for cid in self.cameras
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
            self._rates[camera] = FrameRate()  # added again later, it measures afresh
            self._reasons.setdefault(camera, _no_reasons())

    def _attrs(self, camera: str) -> dict[str, str]:
        return {"camera": camera}

    def read(self, camera: str) -> None:
        """A frame was read from ``camera``."""
        with self._lock:
            self.cameras[camera].read += 1
        if self.metrics:
            self.metrics.frames_read.add(1, self._attrs(camera))

    def skipped(self, camera: str, reason: str, n: int = 1) -> None:
        """The live-camera policy skipped ``n`` frames (``queue_full``, ``stopping``)."""
        with self._lock:
            self.cameras[camera].skipped += n
            self._reasons[camera]["skipped"][reason] += n
        if self.metrics:
            self.metrics.frames_skipped.add(n, {"camera": camera, "reason": reason})

    def lost(self, camera: str, reason: str, n: int = 1) -> None:
        """``n`` accepted frames will never reach every sink (``segment_error``, a sink)."""
        with self._lock:
            self.cameras[camera].lost += n
            self._reasons[camera]["lost"][reason] += n
        if self.metrics:
            self.metrics.frames_lost.add(n, {"camera": camera, "reason": reason})

    def segmented(self, camera: str, capture_time: float | None = None) -> None:
        """A frame of ``camera``, captured at ``capture_time`` (unix seconds; default
        now), was segmented."""
        with self._lock:
            self.cameras[camera].segmented += 1
            rate = self._rates.setdefault(camera, FrameRate())
        rate.add(time.time() if capture_time is None else capture_time)
        if self.metrics:
            self.metrics.frames_segmented.add(1, self._attrs(camera))

    def fps(self, camera: str, now: float | None = None) -> float | None:
        """``camera``'s frames per second (``streamseg.runtime.rates``: the one figure the
        status line, the console and its charts show); ``None`` before it is measured."""
        with self._lock:
            rate = self._rates.get(camera)
        return None if rate is None else rate.value(time.time() if now is None else now)

    def published(self, camera: str, latency: float, processing: float | None = None) -> None:
        """One frame delivered by every sink: ``latency`` capture to the last
        acknowledgement, ``processing`` capture to publish (seconds)."""
        now = time.monotonic()
        with self._lock:
            self.cameras[camera].published += 1
            self._latency.append(latency)
            if processing is not None:
                self._processing.append(processing)
            if self.keep_all_latencies:
                self._all_latency.append(latency)
                self.samples.append((camera, now, latency))
            self.first_publish = self.first_publish or now
            self.last_publish = now
        if self.metrics:
            self.metrics.frames_published.add(1, self._attrs(camera))
            self.metrics.e2e_latency.record(latency, self._attrs(camera))
            if processing is not None:
                self.metrics.processing_latency.record(processing, self._attrs(camera))

    def delivered(self, sink: str, delay: float) -> None:
        """One message acknowledged by ``sink`` ``delay`` seconds after it was published."""
        with self._lock:
            window = self._delivery.get(sink)
            if window is None:
                window = self._delivery[sink] = collections.deque(maxlen=self._window)
            window.append(delay)
        if self.metrics:
            self.metrics.delivery_delay.record(delay, {"sink": sink})

    def add_cpu(self, stage: str, seconds: float) -> None:
        """Count ``seconds`` of CPU time spent in ``stage`` (one of ``STAGE_CPU``)."""
        with self._lock:
            self._cpu[stage] += seconds

    def cpu_seconds(self) -> dict[str, float]:
        """CPU seconds spent so far in each stage of ``STAGE_CPU``."""
        with self._lock:
            return dict(self._cpu)

    def totals(self) -> CameraCounts:
        """Every camera's counters added up."""
        out = CameraCounts()
        for c in self.snapshot().values():
            for key, value in c.as_dict().items():
                setattr(out, key, getattr(out, key) + value)
        return out

    def snapshot(self) -> dict[str, CameraCounts]:
        with self._lock:
            return {cid: dataclasses.replace(c) for cid, c in self.cameras.items()}

    def reasons(self, counter: str) -> dict[str, dict[str, int]]:
        """``{camera: {reason: frames}}`` of ``counter`` (``skipped`` or ``lost``)."""
        with self._lock:
            return {cid: dict(r[counter]) for cid, r in self._reasons.items()}

    def latency_samples(self) -> list[tuple[str, float, float]]:
        """``(camera, acknowledged at (monotonic), latency s)`` of every published frame
        since ``keep_all_latencies`` was set."""
        with self._lock:
            return list(self.samples)

    def all_latencies(self) -> list[float]:
        """Capture to the last acknowledgement of every frame since ``keep_all_latencies``
        was set, seconds."""
        with self._lock:
            return list(self._all_latency)

    def latency_percentiles(self, *qs: float, all_frames: bool = False) -> list[float | None]:
        """Percentiles (0-100) of capture to the last sink's acknowledgement, seconds
        (recent window, or every frame since start when ``keep_all_latencies`` and
        ``all_frames``)."""
        with self._lock:
            return _percentiles(sorted(self._all_latency if all_frames else self._latency), qs)

    def processing_percentiles(self, *qs: float) -> list[float | None]:
        """Percentiles of capture-to-publish latency (recent frames), seconds."""
        with self._lock:
            return _percentiles(sorted(self._processing), qs)

    def delivery_percentiles(self, *qs: float, sink: str | None = None) -> list[float | None]:
        """Percentiles of publish-to-acknowledgement delay (recent messages of ``sink``,
        or of every sink), seconds."""
        with self._lock:
            windows = [self._delivery.get(sink, ())] if sink else list(self._delivery.values())
            return _percentiles(sorted(v for w in windows for v in w), qs)

    def latency_details(self) -> dict[str, Any]:
        """For ``/readyz``: ``{"processing_ms": {p50, p99}, "delivery_ms": {p50, p99,
        "sinks": {name: {p50, p99}}}}`` (``None`` where nothing was measured yet)."""

        def ms(values: list[float | None]) -> dict[str, float | None]:
            return {
                f"p{q}": None if v is None else round(v * 1000, 1)
                for q, v in zip((50, 99), values, strict=True)
            }

        with self._lock:
            sinks = list(self._delivery)
        delivery: dict[str, Any] = ms(self.delivery_percentiles(50, 99))
        delivery["sinks"] = {s: ms(self.delivery_percentiles(50, 99, sink=s)) for s in sinks}
        return {"processing_ms": ms(self.processing_percentiles(50, 99)), "delivery_ms": delivery}


def _percentiles(data: list[float], qs: Sequence[float]) -> list[float | None]:
    """Nearest-rank percentiles (0-100) of ``data`` (``streamseg.percentiles``); ``None``
    for each when nothing was measured yet."""
    return [*percentiles(data, qs)] if data else [None for _ in qs]


def _no_reasons() -> dict[str, collections.Counter[str]]:
    return {"skipped": collections.Counter(), "lost": collections.Counter()}
