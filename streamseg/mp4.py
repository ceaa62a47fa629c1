"""The one MP4 writer: RGB frames in, an H.264 (or MPEG-4 part 2) MP4 file out.

``streamseg render`` (the overlaid clip), ``streamseg synth`` (a synthetic
scene as a video) and the benchmarks' clips all write through
:class:`Mp4Writer`. It imports nothing of the package and PyAV only when a
writer is made.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["CODECS", "Mp4Writer"]

# Tried in order: libx264 where the FFmpeg build has it, else mpeg4 (every build has it).
CODECS = ("libx264", "mpeg4")


class Mp4Writer:
    """Frames in, an MP4 out: ``libx264`` (yuv420p) or ``mpeg4``, frame ``i`` at ``i / rate``.

    yuv420p halves the chroma planes, so both sides must be even: an odd
    frame is padded by one row or column repeating its edge. ``crf`` and
    ``preset`` are libx264's (``mpeg4`` gets ``qscale 3``); ``options`` adds
    encoder options (``{"tune": "zerolatency"}``). ``codec`` says which
    encoder was found. Use it as a context manager, or call ``close``.
    """

    def __init__(
        self,
        path: str | Path,
        width: int,
        height: int,
        rate: Fraction | float,
        *,
        crf: int = 23,
        preset: str = "veryfast",
        options: dict[str, str] | None = None,
    ) -> None:
        import av

        self.width, self.height = width + width % 2, height + height % 2
        self.rate = rate if isinstance(rate, Fraction) else Fraction(rate).limit_denominator(1001)
        self.container = av.open(str(path), mode="w")
        self.codec = ""
        self.stream: Any = None
        for name in CODECS:
            try:
                self.stream = self.container.add_stream(name, rate=self.rate)
            except (ValueError, av.error.FFmpegError):  # not in this FFmpeg build
                continue
            self.codec = name
            break
        else:  # pragma: no cover - every FFmpeg build has mpeg4
            self.container.close()
            raise RuntimeError(f"PyAV has none of the encoders {', '.join(CODECS)}")
        self.stream.width, self.stream.height = self.width, self.height
        self.stream.pix_fmt = "yuv420p"
        self.stream.codec_context.time_base = 1 / self.rate
        if self.codec == "libx264":
            self.stream.options = {"crf": str(crf), "preset": preset, **(options or {})}
        else:
            self.stream.options = {"qscale": "3"}
        self._av = av
        self._index = 0

    def write(self, image: np.ndarray) -> None:
        """Append one ``uint8 (H, W, 3)`` RGB frame."""
        h, w = image.shape[:2]
        if (h, w) != (self.height, self.width):
            image = np.pad(image, ((0, self.height - h), (0, self.width - w), (0, 0)), mode="edge")
        frame = self._av.VideoFrame.from_ndarray(np.ascontiguousarray(image), format="rgb24")
        frame.pts = self._index
        frame.time_base = 1 / self.rate
        self._index += 1
        self.container.mux(self.stream.encode(frame))

    def close(self) -> None:
        """Flush the encoder and finish the file."""
        try:
            self.container.mux(self.stream.encode(None))
        finally:
            self.container.close()

    def __enter__(self) -> Mp4Writer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
