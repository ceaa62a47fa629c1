"""``streamseg bench pipeline``: end-to-end throughput against the model alone.

Both runs use the same ``Segmenter`` (model, batch size, backend) on the same
recorded clip:

* model-only: the clip's frames decoded into memory first, then
  ``Segmenter.segment`` over batches of ``batch_size``;
* end-to-end: the full pipeline with the clip as a file source (decode,
  batching, segmentation, tracking, JSON/RLE encoding, Redis publishing),
  timed from start to the last Redis acknowledgement;
* live (:mod:`streamseg.runtime.bench_live`): the pipeline's own cameras,
  as ``serve`` runs them, for a fixed time: per camera, frames/s in and
  processed, the real-time ratio, the frame counters and glass-to-event
  latency.

The goal is ``ratio = e2e_fps / model_fps >= 0.9``: everything but inference
hidden behind it.

With ``--model oracle`` the model is ``OracleSegmenter`` (the synthetic
scene's exact instances, no network), so the run times everything but the
model: ``oracle_summary`` reports CPU milliseconds per frame for each stage
(``PipelineStats.cpu_seconds``) and the host path's frames/s per core.
Frames come from an H.264 clip decoded on the CPU, or from memory
(``MemorySource``: decoding costs nothing).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import logging
import resource
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import torch

from streamseg.config.cameras import CameraConfig
from streamseg.config.pipeline import PipelineConfig
from streamseg.config.redis import RedisConfig
from streamseg.runtime.factory import build_pipeline, decode_device, open_camera
from streamseg.runtime.pipeline import Pipeline
from streamseg.runtime.protocols import SegmenterLike, SourceLike
from streamseg.runtime.segmenting import describe_error
from streamseg.runtime.stats import STAGE_CPU
from streamseg.types import Frame, FrameBatch

__all__ = [
    "GOAL_RATIO",
    "HOST_STAGES",
    "BenchResult",
    "MemorySource",
    "decode_clip",
    "decode_fps_per_core",
    "median_round",
    "model_only_fps",
    "oracle_summary",
    "run_end_to_end",
    "run_sources",
    "summary",
    "write_clip",
]

log = logging.getLogger("streamseg.bench")


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


def write_clip(images: Sequence[torch.Tensor], path: Path, fps: float) -> Path:
    """Encode ``uint8 (H, W, 3)`` RGB images as H.264 (yuv420p) in an MP4 file."""
    import av

    h, w = int(images[0].shape[0]), int(images[0].shape[1])
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=round(fps))
        stream.width, stream.height = w - w % 2, h - h % 2
        stream.pix_fmt = "yuv420p"
        stream.options = {"preset": "veryfast", "tune": "zerolatency"}
        for img in images:
            rgb = img[: stream.height, : stream.width].contiguous().numpy()
            for packet in stream.encode(av.VideoFrame.from_ndarray(rgb, format="rgb24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path


def synthetic_clip(url: str, frames: int, folder: Path) -> Path:
    """Render ``frames`` frames of a ``synthetic://`` scene into an MP4 clip."""
    from streamseg.synthetic.scene import SyntheticScene

    scene = SyntheticScene.from_url(url)
    images = [scene.frame(i).image for i in range(frames)]
    return write_clip(images, folder / "clip.mp4", float(getattr(scene, "fps", 15.0)))


def decode_fps_per_core(path: str | Path, limit: int | None = None) -> dict[str, Any]:
    """Decode ``path`` to RGB on one thread with PyAV; frames per CPU second.

    What a GPU deployment moves to NVDEC. One decoder thread, so CPU
    seconds and cores agree; the conversion to RGB is counted, as the
    camera sources do it too.
    """
    import av

    frames = 0
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        stream.codec_context.thread_count = 1
        stream.thread_type = "NONE"
        cpu0, t0 = time.process_time(), time.perf_counter()
        for frame in container.decode(stream):
            frame.to_ndarray(format="rgb24")
            frames += 1
            if limit is not None and frames >= limit:
                break
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
    return {
        "codec": "h264",
        "frames": frames,
        "threads": 1,
        "fps_per_core": round(frames / cpu, 1) if cpu > 0 else None,
        "cpu_ms_per_frame": round(1000 * cpu / frames, 3) if frames else None,
        "wall_fps": round(frames / wall, 1) if wall > 0 else None,
    }


class MemorySource:
    """A camera replaying decoded ``uint8 (H, W, 3)`` images (not live, no decoding).

    Frame ``i`` has ``seq = i`` and ``pts = i / fps``.
    """

    live = False

    def __init__(self, camera_id: str, images: Sequence[torch.Tensor], fps: float = 15.0):
        from streamseg.ingest.health import HealthTracker

        self.camera_id, self.images, self.fps = camera_id, images, fps
        self._tracker = HealthTracker(camera_id)

    @property
    def health(self) -> Any:
        return self._tracker.snapshot()

    def run(self, emit: Any, stop: Any) -> None:
        from streamseg.ingest.health import HealthState

        self._tracker.set_state(HealthState.STREAMING)
        for i, image in enumerate(self.images):
            if stop.is_set():
                self._tracker.set_state(HealthState.STOPPED)
                return
            now = time.time()
            self._tracker.frame_decoded(emitted=True, when=now)
            emit(Frame(self.camera_id, i, i / self.fps, now, image))
        self._tracker.set_state(HealthState.FINISHED)


def decode_clip(path: str | Path, limit: int | None = None) -> list[torch.Tensor]:
    """Every frame of a video file as ``uint8 (H, W, 3)`` RGB tensors."""
    import av

    out: list[torch.Tensor] = []
    with av.open(str(path)) as container:
        for frame in container.decode(video=0):
            out.append(torch.from_numpy(frame.to_ndarray(format="rgb24")))
            if limit is not None and len(out) >= limit:
                break
    return out


def model_only_fps(
    segmenter: SegmenterLike, images: Sequence[torch.Tensor], batch_size: int
) -> BenchResult:
    """Time ``segment`` over in-memory frames in batches of ``batch_size``.

    A model in its own process (``submit``) gets the next batch while it runs
    one, as the pipeline sends them.
    """
    frames = [Frame("bench", i, None, 0.0, img) for i, img in enumerate(images)]
    batches = [
        FrameBatch(tuple(frames[start : start + batch_size]))
        for start in range(0, len(frames), batch_size)
    ]
    device = torch.device(getattr(segmenter, "device", "cpu"))
    submit = getattr(segmenter, "submit", None)
    _synchronize(device)
    t0 = time.perf_counter()
    if submit is not None:
        in_flight: collections.deque[Any] = collections.deque()
        for batch in batches:
            in_flight.append(submit(batch))  # waits while the process holds enough
            while len(in_flight) > 1:
                in_flight.popleft().result()
        for future in in_flight:
            future.result()
    else:
        for batch in batches:
            segmenter.segment(batch)
    _synchronize(device)  # kernels still queued on a GPU belong to this run
    return BenchResult(len(frames), time.perf_counter() - t0, [])


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed_pipeline(
    config: PipelineConfig,
    segmenter: SegmenterLike,
    sources: dict[str, SourceLike],
    tap: Any = None,
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
    elsewhere = getattr(segmenter, "process_cpu_seconds", None)
    return time.process_time() + (elsewhere() if elsewhere is not None else 0.0)


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


def latency_ms(latencies: Sequence[float]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for q in (50, 90, 99):
        v = percentile(latencies, q)
        out[f"latency_p{q}_ms"] = None if v is None else round(v * 1000, 1)
    return out


def peak_rss_mb() -> float:
    """Peak resident memory of this process, MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@contextlib.contextmanager
def redis_for_bench(cfg: RedisConfig) -> Iterator[RedisConfig]:
    """``cfg`` when its Redis answers, else one for a throw-away local redis-server."""
    import redis

    from streamseg.publish.connect import redis_client

    try:
        redis_client(cfg, socket_timeout=1.0).ping()
        yield cfg
        return
    except redis.RedisError:
        pass
    exe = shutil.which("redis-server")
    if exe is None:
        raise RuntimeError(
            "no Redis answers at the pipeline's url and redis-server is not installed"
        )
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as tmp:
        args = [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", tmp]
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            local = f"redis://127.0.0.1:{port}/0"
            _wait_redis(local)
            log.info("bench: started a temporary redis-server on port %d", port)
            yield RedisConfig(url=local, stream_prefix=cfg.stream_prefix, maxlen=cfg.maxlen)
        finally:
            proc.terminate()
            proc.wait(10)


def _wait_redis(url: str, timeout: float = 10.0) -> None:
    import redis

    from streamseg.publish.connect import redis_client

    deadline = time.monotonic() + timeout
    while True:
        try:
            redis_client(RedisConfig(url=url), socket_timeout=1).ping()
            return
        except redis.RedisError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def percentile(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    data = sorted(values)
    return data[min(len(data) - 1, round(q / 100 * (len(data) - 1)))]


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
