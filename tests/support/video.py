"""Real H.264 test footage encoded with PyAV's libx264."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np


def write_h264(
    path: Path,
    *,
    frames: int = 45,
    fps: int = 15,
    width: int = 64,
    height: int = 48,
    gop: int = 15,
    bframes: int = 2,
) -> Path:
    """Encode ``frames`` frames (brightness = frame index * 5, a moving square).

    Keyframes every ``gop`` frames; ``bframes`` B-frames between references
    (so decode order differs from presentation order, as with real cameras).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.options = {
            "g": str(gop),
            "keyint_min": str(gop),
            "sc_threshold": "0",
            "bf": str(bframes),
            "preset": "ultrafast",
        }
        for i in range(frames):
            image = np.full((height, width, 3), (i * 5) % 256, np.uint8)
            x = (i * 2) % (width - 8)
            image[10:18, x : x + 8] = 255
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path


def count_frames(path: Path) -> int:
    """Frames a decoder gets out of ``path`` (it must be playable)."""
    with av.open(str(path)) as container:
        return sum(1 for _ in container.decode(video=0))


def video_duration(path: Path) -> float:
    """Span of presentation times of the decoded frames, plus one frame (seconds)."""
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        times = [float(f.pts * f.time_base) for f in container.decode(stream)]
        rate = float(stream.average_rate or 15)
    return max(times) - min(times) + 1.0 / rate
