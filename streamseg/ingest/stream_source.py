"""Sources read through PyAV: RTSP and other network streams, files, V4L2 devices."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from streamseg.ingest.base import Emit, PacketHook, Source
from streamseg.ingest.decoders import DecodeError, Decoder, Picture, make_decoder
from streamseg.ingest.health import HealthState, HealthTracker
from streamseg.ingest.packets import DemuxSession, PacketReader
from streamseg.ingest.policy import Connection, RateLimiter
from streamseg.ingest.spec import SourceError, SourceSpec

__all__ = ["Pacer", "StreamSource"]

log = logging.getLogger("streamseg.ingest")


class Pacer:
    """Sleeps so that frames go out at the pace of their timestamps.

    ``wait(pts, stop)`` returns once wall time has advanced as much as the
    stream time since the first frame (or ``stop`` is set). A consumer that
    falls more than ``max_lag`` seconds behind (backpressure) resets the
    reference instead of bursting to catch up.
    """

    def __init__(self, max_lag: float = 1.0) -> None:
        self.max_lag = max_lag
        self._origin: tuple[float, float] | None = None  # (pts, monotonic time)

    def wait(self, pts: float | None, stop: threading.Event) -> None:
        if pts is None:
            return
        now = time.monotonic()
        if self._origin is None or pts < self._origin[0]:
            self._origin = (pts, now)
            return
        due = self._origin[1] + (pts - self._origin[0])
        if now - due > self.max_lag:
            self._origin = (pts, now)
        elif due > now:
            stop.wait(due - now)


class StreamSource(Source):
    """Demux with ``PacketReader``, decode with a ``pyav`` or ``dali`` decoder."""

    def __init__(
        self,
        *,
        camera_id: str,
        spec: SourceSpec,
        live: bool,
        pace: bool,
        loop: bool,
        max_fps: float | None,
        decode: str,
        device: str,
        connection: Connection,
        on_packet: PacketHook | None,
        ffmpeg_options: dict[str, str] | None,
        tracker: HealthTracker,
    ) -> None:
        super().__init__(camera_id=camera_id, spec=spec, live=live, tracker=tracker)
        self.pace = pace
        self.loop = loop
        self.max_fps = max_fps
        self.decode = decode
        self.device = device
        self._on_packet = on_packet
        self._reader = PacketReader(
            camera_id=camera_id,
            spec=spec,
            live=spec.live,
            connection=connection,
            loop=loop,
            options=ffmpeg_options,
            health=tracker,
        )

    def run(self, emit: Emit, stop: threading.Event) -> None:
        limiter = RateLimiter(self.max_fps)
        pacer = Pacer() if self.pace else None
        pts_offset = 0.0  # looping files: keep pts increasing across passes
        last_pts: float | None = None
        try:
            for session in self._reader.sessions(stop):
                if last_pts is not None and self.loop and self.spec.kind == "file":
                    pts_offset = last_pts + 1.0 / (session.info.fps or 30.0)
                decoder = make_decoder(self.decode, stream=session.stream, device=self.device)
                try:
                    for pic, camera_time in self._pictures(session, decoder):
                        pts = None if pic.pts is None else pic.pts + pts_offset
                        last_pts = pts if pts is not None else last_pts
                        self._deliver(pic, pts, camera_time, limiter, pacer, emit, stop)
                        if stop.is_set():
                            break
                finally:
                    decoder.close()
        except SourceError as exc:
            if self._tracker.state != HealthState.FAILED:
                self._tracker.set_state(HealthState.FAILED, str(exc))
            raise
        finally:
            self._finish_run(stop)

    def _pictures(self, session: DemuxSession, decoder: Decoder) -> Any:
        """``(picture, camera_time)`` for every decoded frame of the session."""
        hook = self._on_packet
        for packet in session.packets():
            if hook is not None:
                self._call_hook(hook, packet, session)
            for pic in self._decode(decoder, packet):
                yield pic, session.camera_time(pic.pts)
        if session.end in ("eof", "lost", "stalled"):
            for pic in decoder.flush():
                yield pic, session.camera_time(pic.pts)

    def _decode(self, decoder: Decoder, packet: Any) -> Any:
        import av

        try:
            return decoder.decode(packet)
        except (av.error.FFmpegError, DecodeError) as exc:
            # a corrupt packet (lost data, a stream joined mid-GOP): skip it
            text = exc.strerror if isinstance(exc, av.error.FFmpegError) else None
            self._tracker.count(decode_errors=1)
            self._tracker.error(f"decode error: {text or exc}")
            return ()

    def _call_hook(self, hook: PacketHook, packet: Any, session: DemuxSession) -> None:
        try:
            hook(self.camera_id, packet, session.stream)
        except Exception:
            log.exception("ingest[%s]: on_packet hook failed", self.camera_id)

    def _deliver(
        self,
        pic: Picture,
        pts: float | None,
        camera_time: float | None,
        limiter: RateLimiter,
        pacer: Pacer | None,
        emit: Emit,
        stop: threading.Event,
    ) -> None:
        capture_time = time.time()
        keep = limiter.admit(pts, wall=capture_time)
        if keep and pacer is not None:
            pacer.wait(pts, stop)
            capture_time = time.time()
        if not keep:
            self._seq += 1
            self._tracker.frame_decoded(emitted=False, when=capture_time)
            return
        frame = self._make_frame(pic.image(), pts, capture_time, camera_time)
        self._tracker.frame_decoded(emitted=True, when=capture_time)
        emit(frame)
