"""Offline rendering: a clip and what the pipeline found in it, to an MP4 with overlays.

``render_clip`` decodes every frame of a clip with PyAV, asks
``overlay_at(index)`` for the instances (and zone/line counts) of frame
``index`` (counted from 0 in decoding order, the ``seq`` a file source gives
its frames), draws them with the console's ``draw_overlay`` and encodes the
result as H.264 (``libx264``; MPEG-4 part 2 where PyAV lacks it). Frames
without instances are written as they were decoded. ``streamseg render`` is
the command around it.

Example:
    >>> import tempfile, pathlib
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "out.mp4"
    >>> try:
    ...     render_clip("missing.mp4", out, overlay_at=lambda i: None, info=OverlayInfo())
    ... except ClipError as exc:
    ...     print(exc)
    missing.mp4: cannot open the clip: No such file or directory
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from streamseg.console.live import Trails
from streamseg.console.overlay import OverlayInfo, draw_overlay
from streamseg.types import Instances
from streamseg.video import Mp4Writer, VideoReader

__all__ = ["ClipError", "Rendered", "render_clip"]

# Tried in this order: H.264 plays everywhere; MPEG-4 part 2 is in every FFmpeg build.

OverlayAt = Callable[[int], tuple[Instances, Mapping[str, Any]] | None]


class ClipError(ValueError):
    """The clip cannot be read, or does not fit its detections: the message says which."""


@dataclasses.dataclass(frozen=True)
class Rendered:
    """What ``render_clip`` wrote.

    Attributes:
        output: the MP4's path.
        frames: frames written (every decoded frame of the clip).
        drawn: frames that had instances drawn on them.
        codec: the encoder used (``libx264`` or ``mpeg4``).
        width / height: the output's size (the clip's, rounded up to even).
        fps: the output's frame rate (the clip's average rate).
        seconds: wall time of decoding, drawing and encoding.
    """

    output: str
    frames: int
    drawn: int
    codec: str
    width: int
    height: int
    fps: float
    seconds: float


def render_clip(
    clip: str | Path,
    output: str | Path,
    *,
    overlay_at: OverlayAt,
    info: OverlayInfo,
    trail_length: int = 16,
    crf: int = 20,
    progress: bool = False,
) -> Rendered:
    """Write ``clip`` with overlays to ``output`` (MP4).

    Args:
        clip: any file PyAV (FFmpeg) reads; its first video stream is used.
        output: the MP4 to write (replaced if it exists).
        overlay_at: frame index -> ``(instances, counts)`` at the clip's
            resolution, or ``None`` to leave that frame undrawn.
        info: class names, zones and lines, and the status line's text
            (the frame index is appended to it).
        trail_length: past box centres drawn per track.
        crf: H.264 quality (lower is better and bigger; 18-23 is usual).
        progress: show a tqdm bar on stderr.

    Raises:
        ClipError: the clip cannot be opened or decoded, or an instance's
            frame size differs from the clip's.
    """
    t0 = time.monotonic()
    trails = Trails(trail_length)
    with _open_clip(clip) as video:
        rate, total = video.rate, video.frames
        writer: Mp4Writer | None = None
        drawn = frames = 0
        try:
            for index, image in enumerate(_progress(_decode(video, clip), total, progress)):
                found = overlay_at(index)
                if found is not None:
                    instances, counts = found
                    _check_size(clip, index, instances, image.shape[:2])
                    status = f"{info.status} frame {index}".strip()
                    frame_info = dataclasses.replace(
                        info, trails=trails.update(instances), counts=counts, status=status
                    )
                    image = draw_overlay(image, instances, frame_info)
                    drawn += 1
                if writer is None:
                    writer = Mp4Writer(Path(output), image.shape[1], image.shape[0], rate, crf=crf)
                writer.write(image)
                frames += 1
        except BaseException:
            if writer is not None:
                writer.close()
                Path(output).unlink(missing_ok=True)  # no half-written file left behind
            raise
        if writer is not None:
            writer.close()
    if writer is None:
        raise ClipError(f"{clip}: the clip has no frames")
    return Rendered(
        output=str(output),
        frames=frames,
        drawn=drawn,
        codec=writer.codec,
        width=writer.width,
        height=writer.height,
        fps=float(rate),
        seconds=round(time.monotonic() - t0, 3),
    )


def _open_clip(clip: str | Path) -> VideoReader:
    import av

    try:
        return VideoReader(clip)
    except (OSError, av.error.FFmpegError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise ClipError(f"{clip}: cannot open the clip: {reason}") from None
    except ValueError:
        raise ClipError(f"{clip}: the file has no video stream") from None


def _decode(video: VideoReader, clip: str | Path) -> Iterator[np.ndarray]:
    import av

    try:
        for _time, image in video:
            yield image
    except av.error.FFmpegError as exc:
        raise ClipError(f"{clip}: cannot decode the clip: {exc}") from None


def _progress(frames: Iterator[np.ndarray], total: int | None, show: bool) -> Iterator[np.ndarray]:
    if not show:
        yield from frames
        return
    from tqdm import tqdm

    with tqdm(frames, total=total, unit="frame", desc="render", leave=False) as bar:
        yield from bar


def _check_size(clip: str | Path, index: int, instances: Instances, size: tuple[int, int]) -> None:
    if tuple(instances.image_size) != tuple(size):
        (h, w), (dh, dw) = size, instances.image_size
        raise ClipError(
            f"{clip}: frame {index} is {w}x{h} but its detections are for {dw}x{dh} frames: "
            "render the clip the detections were made from"
        )
