"""``streamseg record``'s engine: read a camera's packets, write segments.

The camera is demuxed (never decoded) with PyAV; packets go to a
:class:`~streamseg.train.record.SegmentWriter`. A live source that drops is
reopened after a pause (the open segment is closed first, since timestamps
restart); a file source ends at its end.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from streamseg.ingest.url import redact_text, redact_url
from streamseg.train.record import RecordedFile, SegmentWriter, StoredPacket

__all__ = ["RecordResult", "is_live_url", "record_camera"]

log = logging.getLogger("streamseg.record")

_LIVE_SCHEMES = (
    "rtsp://",
    "rtsps://",
    "rtmp://",
    "udp://",
    "rtp://",
    "srt://",
    "http://",
    "https://",
)


def is_live_url(url: str) -> bool:
    """Network streams are live; files (and ``file://``) are not."""
    return url.lower().startswith(_LIVE_SCHEMES)


@dataclasses.dataclass(frozen=True)
class RecordResult:
    """What ``record`` wrote: the files, packets in all, reconnects made."""

    files: list[RecordedFile]
    packets: int
    reconnects: int


def _open(url: str, open_timeout_s: float) -> Any:
    import av

    options = {"rtsp_transport": "tcp"} if url.lower().startswith("rtsp") else {}
    return av.open(url, options=options, timeout=(open_timeout_s, open_timeout_s))


class _NoVideo(OSError):
    """The source opened but carries no video (reconnecting would not help)."""


def _packets(container: Any) -> Iterator[tuple[Any, StoredPacket]]:
    if not container.streams.video:
        raise _NoVideo("it has no video stream")
    stream = container.streams.video[0]
    for packet in container.demux(stream):
        if packet.size:
            yield stream, StoredPacket.from_av(packet)


def record_camera(
    *,
    url: str,
    camera_id: str,
    out_dir: str | Path,
    duration_s: float,
    segment_s: float = 60.0,
    container: str = "mp4",
    live: bool | None = None,
    stop: threading.Event | None = None,
    reconnect_delay_s: float = 2.0,
    open_timeout_s: float = 10.0,
) -> RecordResult:
    """Record ``duration_s`` seconds of ``url``'s first video stream.

    Duration is counted in stream time (the footage's own length), so a file
    source records exactly that much footage at whatever speed it reads; a
    live source also stops after ``duration_s`` plus a minute of wall time
    in case its stream stalls.

    Raises:
        OSError: a file source (or the first connection to a live one) cannot
            be opened; the message has the URL with its password hidden.
    """
    live = is_live_url(url) if live is None else live
    stop = stop or threading.Event()
    deadline = time.monotonic() + duration_s + 60.0
    files: list[RecordedFile] = []
    recorded, reconnects = 0.0, 0
    first_open = True
    while recorded < duration_s and not stop.is_set() and time.monotonic() < deadline:
        try:
            source = _open(url, open_timeout_s)
        except Exception as exc:
            message = redact_text(str(exc))
            if first_open or not live:
                raise OSError(f"cannot open {redact_url(url)}: {message}") from None
            log.warning("%s: reconnect failed (%s); retrying", camera_id, message)
            stop.wait(reconnect_delay_s)
            continue
        first_open = False
        writer: SegmentWriter | None = None
        start: float | None = None
        try:
            for stream, sp in _packets(source):
                if writer is None:
                    writer = SegmentWriter(
                        out_dir=out_dir,
                        camera_id=camera_id,
                        template=stream,
                        container=container,
                        segment_s=segment_s,
                    )
                if start is None and sp.keyframe:
                    start = sp.decode_time
                if start is not None and recorded + sp.decode_time - start >= duration_s:
                    break
                writer.write(sp)
                if stop.is_set() or time.monotonic() >= deadline:
                    break
        except Exception as exc:
            if not live or isinstance(exc, _NoVideo):
                raise OSError(
                    f"reading {redact_url(url)} failed: {redact_text(str(exc))}"
                ) from None
            log.warning("%s: stream dropped (%s)", camera_id, redact_text(str(exc)))
        finally:
            if writer is not None:
                done = writer.close()
                files += done
                recorded += sum(f.duration for f in done)
            source.close()
        if not live:
            break
        if recorded < duration_s and not stop.is_set():
            reconnects += 1
            log.warning("%s: reconnecting in %.1fs", camera_id, reconnect_delay_s)
            stop.wait(reconnect_delay_s)
    # Packets before a stream's first keyframe are not written (nothing decodes them).
    written = sum(f.packets for f in files)
    return RecordResult(files=files, packets=written, reconnects=reconnects)
