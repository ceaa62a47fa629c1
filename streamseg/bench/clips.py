"""Frames for the benchmarks: clips written from synthetic scenes, decoded back
into memory, and a camera that replays decoded frames.

``write_clip`` / ``synthetic_clip`` make the H.264 clip the end-to-end run
reads as a file source; ``decode_clip`` and ``MemorySource`` give the same
frames without decoding (model-only runs, the oracle's host path);
``decode_fps_per_core`` times the CPU decode a GPU moves to NVDEC.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import torch

from streamseg.ingest.health import CameraHealth
from streamseg.types import Frame
from streamseg.video import Mp4Writer, VideoReader

__all__ = ["MemorySource", "decode_clip", "decode_fps_per_core", "synthetic_clip", "write_clip"]


def write_clip(images: Sequence[torch.Tensor], path: Path, fps: float) -> Path:
    """Encode ``uint8 (H, W, 3)`` RGB images as H.264 (yuv420p) in an MP4 file (an odd
    side is padded to even by its edge)."""
    h, w = int(images[0].shape[0]), int(images[0].shape[1])
    with Mp4Writer(path, w, h, Fraction(round(fps)), options={"tune": "zerolatency"}) as out:
        for img in images:
            out.write(img.numpy())
    return path


def synthetic_clip(url: str, frames: int, folder: Path) -> Path:
    """Render ``frames`` frames of a ``synthetic://`` scene into an MP4 clip."""
    from streamseg.synthetic.scene import SyntheticScene

    scene = SyntheticScene.from_url(url)
    images = [scene.frame(i).image for i in range(frames)]
    return write_clip(images, folder / "clip.mp4", float(scene.fps))


def decode_fps_per_core(path: str | Path, limit: int | None = None) -> dict[str, Any]:
    """Decode ``path`` to RGB on one thread with PyAV; frames per CPU second.

    What a GPU deployment moves to NVDEC. One decoder thread, so CPU
    seconds and cores agree; the conversion to RGB is counted, as the
    camera sources do it too.
    """
    frames = 0
    with VideoReader(path, threads=1) as video:
        cpu0, t0 = time.process_time(), time.perf_counter()
        for _ in video:
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
    def health(self) -> CameraHealth:
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
    out: list[torch.Tensor] = []
    with VideoReader(path) as video:
        for _time, image in video:
            out.append(torch.from_numpy(image))
            if limit is not None and len(out) >= limit:
                break
    return out
