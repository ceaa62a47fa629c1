"""The timed runs of ``streamseg bench pipeline``: the model alone, and the
pipeline ``serve`` runs (optionally with console viewers drawing meanwhile)."""

from __future__ import annotations

import collections
import contextlib
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from streamseg.bench.report import BenchResult
from streamseg.config.pipeline import PipelineConfig
from streamseg.hosting.process import ModelProcess
from streamseg.ingest.config import CameraConfig
from streamseg.runtime.factory import build_pipeline, decode_device, open_camera
from streamseg.runtime.pipeline import Pipeline
from streamseg.runtime.protocols import SegmenterLike, SourceLike
from streamseg.runtime.segmenting import describe_error
from streamseg.types import Frame, FrameBatch, Instances

if TYPE_CHECKING:
    from streamseg.console.live import LiveView

__all__ = [
    "ConsoleViewers",
    "model_only_fps",
    "raise_failed_batches",
    "run_end_to_end",
    "run_sources",
    "timed_pipeline",
]


def model_only_fps(
    segmenter: SegmenterLike,
    images: Sequence[torch.Tensor],
    batch_size: int,
    *,
    device: str = "cpu",
) -> BenchResult:
    """Time the model over in-memory frames in batches of ``batch_size``.

    Batches are handed over as the pipeline hands them (``submit``, up to two
    in flight): a model in its own process gets the next batch while it runs
    one. ``device``: the model's, synchronised before and after on a GPU.
    """
    frames = [Frame("bench", i, None, 0.0, img) for i, img in enumerate(images)]
    batches = [
        FrameBatch(tuple(frames[start : start + batch_size]))
        for start in range(0, len(frames), batch_size)
    ]
    where = torch.device(device)
    _synchronize(where)
    t0 = time.perf_counter()
    in_flight: collections.deque[Future[list[Instances]]] = collections.deque()
    for batch in batches:
        in_flight.append(segmenter.submit(batch))  # waits while the process holds enough
        while len(in_flight) > 1:
            in_flight.popleft().result()
    for future in in_flight:
        future.result()
    _synchronize(where)  # kernels still queued on a GPU belong to this run
    return BenchResult(len(frames), time.perf_counter() - t0, [])


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed_pipeline(
    config: PipelineConfig,
    segmenter: SegmenterLike,
    sources: dict[str, SourceLike],
    tap: LiveView | None = None,
) -> Pipeline:
    """The pipeline ``serve`` would run, on ``sources``, with every latency kept."""
    pipeline = build_pipeline(config, segmenter=segmenter, sources=sources, tap=tap)
    pipeline.stats.keep_all_latencies = True
    return pipeline


def run_end_to_end(
    config: PipelineConfig,
    segmenter: SegmenterLike,
    clip: Path,
    cameras: int = 1,
    viewers: bool = False,
) -> BenchResult:
    """Run the whole pipeline on ``clip`` (``cameras`` file sources) until it ends.

    ``viewers``: one console viewer watches every camera, drawing and
    encoding its live frames at ``http.live_fps`` as the console does.
    """
    # The clip is decoded as the pipeline's first camera would decode it.
    decode = config.cameras[0].decode if config.cameras else "pyav"
    cams = [
        CameraConfig(id=f"bench{k}", url=str(clip), live=False, decode=decode)
        for k in range(cameras)
    ]
    device = decode_device(config, cams)
    sources = {cam.id: open_camera(cam, device=device) for cam in cams}
    return run_sources(config, segmenter, sources, viewers=viewers)


def run_sources(
    config: PipelineConfig,
    segmenter: SegmenterLike,
    sources: dict[str, SourceLike],
    *,
    viewers: bool = False,
) -> BenchResult:
    """Run the whole pipeline on non-live ``sources`` until they end; CPU time per stage.

    ``viewers``: a console viewer draws and encodes every camera meanwhile.
    """
    watching = ConsoleViewers(config, segmenter.class_names, list(sources)) if viewers else None
    pipeline = timed_pipeline(config, segmenter, sources, watching.live if watching else None)
    cpu0, t0 = _process_cpu(segmenter), time.monotonic()
    with watching or contextlib.nullcontext():
        pipeline.start()
        while not pipeline.wait(0.1):
            if pipeline.segment_stage.failed_batches:  # no figure to wait for: stop at once
                pipeline.stop()
    stats = pipeline.stats
    end = stats.last_publish or time.monotonic()
    cpu = {**pipeline.cpu_seconds(), "process": _process_cpu(segmenter) - cpu0}
    pipeline.join()
    published = sum(c.published for c in stats.snapshot().values())
    if pipeline.failure is not None:
        raise RuntimeError(f"the pipeline failed: {describe_error(pipeline.failure)}")
    raise_failed_batches(pipeline)
    rendered = watching.rendered if watching is not None else 0
    return BenchResult(published, end - t0, stats.all_latencies(), cpu, rendered)


def raise_failed_batches(pipeline: Pipeline) -> None:
    """A benchmark whose model failed a batch measured nothing: raise, naming the error."""
    health = pipeline.segment_stage.health()
    if health["failed_batches"]:
        raise RuntimeError(
            f"the model failed {health['failed_batches']} batch(es); last: {health['last_error']}"
        )


def _process_cpu(segmenter: SegmenterLike) -> float:
    """CPU seconds of this process so far, every thread (user + system), and of
    the model's own process when it has one (``runtime.model_process``)."""
    elsewhere = segmenter.process_cpu_seconds() if isinstance(segmenter, ModelProcess) else 0.0
    return time.process_time() + elsewhere


class ConsoleViewers:
    """One console viewer per camera (a thread drawing and encoding at ``http.live_fps``)."""

    def __init__(
        self, config: PipelineConfig, class_names: Sequence[str], cameras: list[str]
    ) -> None:
        from streamseg.console.live import LiveView

        self.config, self.class_names, self.cameras = config, tuple(class_names), cameras
        self.live = LiveView(trail_length=config.http.trail_length)
        self.rendered = 0
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._watch, args=(c,), name=f"viewer:{c}", daemon=True)
            for c in cameras
        ]
        self._started = threading.Barrier(len(cameras) + 1)

    def __enter__(self) -> ConsoleViewers:
        for t in self._threads:
            t.start()
        self._started.wait()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for t in self._threads:
            t.join()

    def _watch(self, cid: str) -> None:
        from streamseg.console.overlay import OverlayInfo, render_jpeg

        h = self.config.http
        with self.live.watch(cid):
            self._started.wait()
            last = None
            while not self._stop.wait(1.0 / h.live_fps):
                frame = self.live.latest(cid)
                if frame is None or frame is last:
                    continue
                last = frame
                info = OverlayInfo(
                    class_names=self.class_names,
                    alerts=self.config.alerts.cameras.get(cid),
                    trails=frame.trails,
                    counts=frame.counts,
                    status=f"{cid} {frame.fps:.1f} fps",
                )
                inst = frame.result.instances
                render_jpeg(frame.image, inst, info, quality=h.jpeg_quality, max_width=h.live_width)
                self.rendered += 1
