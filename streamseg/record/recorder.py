"""``streamseg record``'s engine: read a camera's packets, write segments.

The camera is demuxed (never decoded) by the ingest layer's
:class:`~streamseg.ingest.packets.PacketReader`, so recording opens every
source kind ``serve`` opens, with the same timeouts and the same
exponential backoff between reconnects. Packets go to a
:class:`~streamseg.record.segments.SegmentWriter`; each connection gets its
own writer (timestamps restart when a stream is reopened). A live source
reconnects until the footage is complete; a file source ends at its end.

With a :class:`~streamseg.record.retention.Retention`, its limits are
enforced at the start and whenever a segment is started or finished, and a
full disk stops writing (the segment being written is given up) until
space is back, while the footage goes on being read
(:mod:`streamseg.record.diskfull`).
"""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

from streamseg.ingest.packets import DemuxSession
from streamseg.ingest.policy import Connection
from streamseg.ingest.source import open_packet_reader
from streamseg.record.config import RetentionConfig
from streamseg.record.diskfull import DiskGuard
from streamseg.record.files import RecordedFile, StoredPacket
from streamseg.record.retention import MB, Retention
from streamseg.record.segments import SegmentWriter

__all__ = ["RecordResult", "record_camera"]

# A live source also stops this long (seconds) after ``duration_s`` of wall
# time, in case its stream stalls for good.
WALL_GRACE_S = 60.0


@dataclasses.dataclass(frozen=True)
class RecordResult:
    """What ``record`` wrote: the files, packets in all, reconnects made, times a
    full disk stopped writing, recordings retention deleted."""

    files: list[RecordedFile]
    packets: int
    reconnects: int
    disk_full_stops: int = 0
    removed: int = 0


# ``record``'s own timeouts: longer than a camera's, for a first connection that must succeed.
RECORD_CONNECTION = Connection(connect_timeout=10.0, read_timeout=10.0)


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
    connection: Connection = RECORD_CONNECTION,
    retention: Retention | None = None,
) -> RecordResult:
    """Record ``duration_s`` seconds of ``url``'s first video stream.

    Duration is counted in stream time (the footage's own length), so a file
    source records exactly that much footage at whatever speed it reads; a
    live source also stops ``WALL_GRACE_S`` seconds of wall time after
    ``duration_s`` in case its stream stalls. The first connection must
    succeed; later drops are reconnected with ``connection``'s backoff.
    ``retention``: the recordings' limits (``record.retention``) and the
    full disk's handling; default: no limits, and a full disk stops writing
    until 64 MiB are free.

    Raises:
        SourceError: the URL is not a recordable source, a file cannot be
            read, or the first connection fails; the message names the
            camera and hides its password.
    """
    reader = open_packet_reader(
        camera_id=camera_id,
        url=url,
        live=live,
        connection=connection,
        fail_first=True,
    )
    done = threading.Event()
    timer = threading.Timer(duration_s + WALL_GRACE_S, done.set) if reader.live else None
    if timer is not None:
        timer.daemon = True
        timer.start()
    watcher = _follow(stop, done)
    files: list[RecordedFile] = []
    disk = _Disk(retention or Retention(root=Path(out_dir), config=RetentionConfig(), flat=True))
    try:
        for session in reader.sessions(done):
            recorded = sum(f.duration for f in files)
            written, reached = _record_session(
                session, camera_id, recorded, duration_s, segment_s, container, out_dir, disk
            )
            files += written
            if reached or sum(f.duration for f in files) >= duration_s - 1e-9:
                done.set()
    finally:
        done.set()
        if timer is not None:
            timer.cancel()
        watcher.join()
    # Packets before a stream's first keyframe are not written (nothing decodes them).
    return RecordResult(
        files=files,
        packets=sum(f.packets for f in files),
        reconnects=reader.health.snapshot().reconnects,
        disk_full_stops=disk.guard.stops,
        removed=disk.removed,
    )


class _Disk:
    """Retention and the full disk's guard of one recording; ``writer`` is the
    segment writer of the current connection (its open file is never deleted)."""

    def __init__(self, retention: Retention) -> None:
        r = retention.config
        self.retention = retention
        self.writer: SegmentWriter | None = None
        self.removed = 0
        self.guard = DiskGuard(
            free_bytes=retention.free_bytes,
            resume_bytes=int(max(r.resume_free_mb, r.min_free_mb) * MB),
            retry_s=r.retry_s,
            make_room=self.make_room,
        )
        self.make_room()  # at the start

    def make_room(self) -> None:
        open_path = self.writer.open_path if self.writer is not None else None
        keep = [open_path] if open_path is not None else []
        self.removed += len(self.retention.enforce(keep=keep))

    def write(self, writer: SegmentWriter, sp: StoredPacket, camera_id: str) -> None:
        """Write ``sp`` unless the disk is full; enforce retention as files change."""
        self.writer = writer
        if not self.guard.writable():
            return
        before = writer.open_path
        try:
            writer.write(sp)
        except OSError as exc:
            if not self.guard.failed(exc, camera_id):
                raise
            writer.abort()
            return
        if writer.open_path != before:
            self.make_room()

    def close(self, writer: SegmentWriter, camera_id: str) -> list[RecordedFile]:
        """Finish ``writer``'s open file (given up if the disk is full); its files."""
        try:
            files = writer.close()
        except OSError as exc:
            if not self.guard.failed(exc, camera_id):
                raise
            writer.abort()
            files = writer.files
        self.make_room()
        return files


def _follow(stop: threading.Event | None, done: threading.Event) -> threading.Thread:
    """A thread that sets ``done`` when the caller's ``stop`` is set (ends with ``done``)."""

    def wait() -> None:
        while stop is not None and not done.is_set():
            if stop.wait(0.1):
                done.set()

    thread = threading.Thread(target=wait, name="record-stop", daemon=True)
    thread.start()
    return thread


def _record_session(
    session: DemuxSession,
    camera_id: str,
    recorded: float,
    duration_s: float,
    segment_s: float,
    container: str,
    out_dir: str | Path,
    disk: _Disk,
) -> tuple[list[RecordedFile], bool]:
    """Write one connection's packets until the footage reaches ``duration_s`` seconds;
    the files, and whether it did (footage not written for a full disk counts too)."""
    writer: SegmentWriter | None = None
    start: float | None = None
    reached = False
    try:
        for packet in session.packets():
            sp = StoredPacket.from_av(packet)
            if writer is None:
                writer = SegmentWriter(
                    out_dir=out_dir,
                    camera_id=camera_id,
                    template=session.stream,
                    container=container,
                    segment_s=segment_s,
                )
            if start is None and sp.keyframe:
                start = sp.decode_time
            if start is not None and recorded + sp.decode_time - start >= duration_s:
                reached = True
                break
            disk.write(writer, sp, camera_id)
    finally:
        files = disk.close(writer, camera_id) if writer is not None else []
    return files, reached
