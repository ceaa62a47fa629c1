"""Writing compressed packets into a container file without re-encoding.

The pieces both recording writers share (:mod:`streamseg.record.segments`):
a packet detached from its demuxer, a written file, a codec context that
outlives its demuxer, and one open output with timestamps rebased to zero.
Times are stream seconds (``pts * time_base``), the clock of ``Frame.pts``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import re
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

__all__ = [
    "MUXER_OPTIONS",
    "DetachedStream",
    "Output",
    "RecordedFile",
    "StoredPacket",
    "safe_name",
    "stamp",
]

MUXER_OPTIONS = {"mp4": {"movflags": "frag_keyframe+empty_moov+default_base_moof"}, "mkv": {}}


@dataclasses.dataclass(frozen=True)
class StoredPacket:
    """A compressed packet detached from its demuxer (safe to keep and write twice).

    Attributes:
        data: the compressed bytes.
        pts / dts: timestamps in ``time_base`` units (``None`` when unknown).
        time_base: seconds per timestamp unit.
        keyframe: a decoder can start here.
        duration: in ``time_base`` units (0 when unknown).
    """

    data: bytes
    pts: int | None
    dts: int | None
    time_base: Fraction
    keyframe: bool
    duration: int = 0

    @classmethod
    def from_av(cls, packet: Any) -> StoredPacket:
        """Copy a PyAV packet (``av.Packet``)."""
        return cls(
            data=bytes(packet),
            pts=packet.pts,
            dts=packet.dts,
            time_base=Fraction(packet.time_base),
            keyframe=bool(packet.is_keyframe),
            duration=int(packet.duration or 0),
        )

    @property
    def time(self) -> float:
        """Presentation time in seconds (decode time when pts is missing)."""
        ts = self.pts if self.pts is not None else self.dts
        return float((ts or 0) * self.time_base)

    @property
    def decode_time(self) -> float:
        """Decode time in seconds (what cutting a clip's end goes by)."""
        return float(self.decode_ts * self.time_base)

    @property
    def decode_ts(self) -> int:
        return int(self.dts if self.dts is not None else (self.pts or 0))


@dataclasses.dataclass(frozen=True)
class RecordedFile:
    """One written file: where, first packet time and length (seconds), packets."""

    path: Path
    start: float
    duration: float
    packets: int


class DetachedStream:
    """A copy of an input video stream's codec parameters that outlives its demuxer.

    A clip is written seconds after its packets were read, when the camera
    may have reconnected and PyAV freed the input stream's codec parameters
    (muxing from them then crashes the process). The copy lives in a stream
    of a small in-memory container that this object owns.
    """

    def __init__(self, stream: Any) -> None:
        import io

        import av

        self._holder = av.open(io.BytesIO(), "w", format="matroska")
        self.stream = self._holder.add_stream_from_template(stream)


class Output:
    """One container being written: timestamps rebased to start at zero."""

    def __init__(self, path: Path, template: Any, container: str, first: StoredPacket) -> None:
        import av

        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._out = av.open(str(path), "w", options=MUXER_OPTIONS[container])
        self._stream = self._out.add_stream_from_template(template)
        self._base = first.decode_ts
        self.start = first.time
        self.end = first.time
        # Reorder delay (B-frames): presentation minus decode time of a keyframe.
        self.delay = first.time - first.decode_time
        self.packets = 0
        self.bytes = 0  # of packet data muxed

    def write(self, sp: StoredPacket) -> None:
        import av

        packet = av.Packet(sp.data)
        packet.time_base = sp.time_base
        packet.pts = None if sp.pts is None else sp.pts - self._base
        packet.dts = None if sp.dts is None else sp.dts - self._base
        packet.is_keyframe = sp.keyframe
        packet.duration = sp.duration
        packet.stream = self._stream
        self._out.mux(packet)
        self.packets += 1
        self.bytes += len(sp.data)
        self.end = max(self.end, sp.time + float(sp.duration * sp.time_base))

    def close(self) -> RecordedFile:
        """Finish the file. ``OSError`` (``ENOSPC``) when it is shorter than the
        packets written: FFmpeg can drop a buffered write's error (a full disk)."""
        self._out.close()
        if self.path.stat().st_size < self.bytes:
            raise OSError(errno.ENOSPC, "No space left on device (file cut short)", str(self.path))
        return RecordedFile(self.path, self.start, self.end - self.start, self.packets)

    def abort(self) -> None:
        """Give the file up after a failed write (a full disk): an empty file goes."""
        with contextlib.suppress(Exception):
            self._out.close()
        with contextlib.suppress(OSError):
            if self.path.stat().st_size == 0:
                self.path.unlink()


def safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name) or "camera"


def stamp(wall: float) -> str:
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime(wall)) + f"{wall % 1:.3f}"[1:].replace(
        ".", "_"
    )
