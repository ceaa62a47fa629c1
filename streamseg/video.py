"""Video files through PyAV: the one MP4 writer and the one file decoder.

:class:`Mp4Writer` (RGB frames in, an H.264 or MPEG-4 part 2 MP4 out) writes
``streamseg render``'s overlaid clip, ``streamseg synth``'s scene video and
the benchmarks' clips. :class:`VideoReader` (a file in, RGB frames with
their times out) reads the clip ``render`` draws on, the videos ``label``
samples and the benchmarks' clips.

The cameras do not read files here: ``streamseg.ingest`` demuxes every
source, files included, into packets with reconnects, pacing, loss
accounting and a choice of decoder (PyAV or DALI), which a file read from
start to end does not need. Still images (PNG, JPEG) are
``streamseg.train.images``'s. This module imports nothing of the package
and PyAV only when a reader or writer is made.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from streamseg.closing import Closing

__all__ = ["CODECS", "Mp4Writer", "VideoReader"]

# Tried in order: libx264 where the FFmpeg build has it, else mpeg4 (every build has it).
CODECS = ("libx264", "mpeg4")


class Mp4Writer(Closing):
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


class VideoReader(Closing):
    """The frames of a video file's first video stream, as ``uint8 (H, W, 3)`` RGB.

    Iterating yields ``(time, image)``: the frame's presentation time in
    seconds (``None`` where the file gives none) and the image; ``read``
    also gives each frame's index and converts only the frames asked for. ``rate`` is
    the stream's average frame rate (25 where the file does not say) and
    ``frames`` its frame count where the container records one. ``threads=1``
    decodes on one thread (for CPU-time measurements); ``None`` lets FFmpeg
    choose.

    Raises ``OSError`` or ``av.error.FFmpegError`` when the file cannot be
    opened or decoded, ``ValueError`` when it has no video stream.
    """

    def __init__(self, path: str | Path, *, threads: int | None = None) -> None:
        import av

        self.container = av.open(str(path))
        if not self.container.streams.video:
            self.container.close()
            raise ValueError(f"{path}: the file has no video stream")
        self.stream = self.container.streams.video[0]
        if threads is None:
            self.stream.thread_type = "AUTO"
        else:
            self.stream.codec_context.thread_count = threads
            self.stream.thread_type = "NONE" if threads == 1 else "AUTO"
        self.rate = Fraction(self.stream.average_rate or 25).limit_denominator(1001)
        self.frames: int | None = self.stream.frames or None

    def __iter__(self) -> Iterator[tuple[float | None, np.ndarray]]:
        for _index, time, image in self.read():
            yield time, image

    def read(
        self, keep: Callable[[int, float | None], bool] | None = None
    ) -> Iterator[tuple[int, float | None, np.ndarray]]:
        """``(index, time, image)`` of the frames ``keep(index, time)`` accepts (all by
        default); the others are decoded but not converted to RGB."""
        for index, frame in enumerate(self.container.decode(self.stream)):
            tb = frame.time_base
            time = float(frame.pts * tb) if frame.pts is not None and tb is not None else None
            if keep is None or keep(index, time):
                yield index, time, frame.to_ndarray(format="rgb24")

    def close(self) -> None:
        self.container.close()
