"""Demuxing with reconnects: the packet-level API under every PyAV-read source.

``PacketReader(...).sessions(stop)`` yields one ``DemuxSession`` per
successful connection and handles everything between them: connect and
read timeouts, exponential backoff with jitter, health states, looping
files. A session's ``packets()`` yields the video stream's ``av.Packet``s
(demuxed, not decoded) until the stream ends, is lost or stalls, or
``stop`` is set. Decoders (``pyav``, ``dali``) and the recorder consume it::

    reader = PacketReader(camera_id="cam1", spec=parse_source_url(url), live=True)
    for session in reader.sessions(stop):
        out.add_stream_from_template(session.stream)   # e.g. remux
        for packet in session.packets():
            ...

Stall detection: PyAV aborts a blocking read through FFmpeg's interrupt
callback after ``read_timeout / 2``. FFmpeg's H.264 parser holds the last
frame it received until the next one starts, and the first abort flushes
it, so a stream that stops sending is declared ``stalled`` within
``read_timeout`` of its last packet (within ``read_timeout / 2`` for
codecs whose packets are not held). ``stop`` is seen between packets, so a
blocked read ends at the latest after ``read_timeout / 2`` (a connection
attempt after ``connect_timeout``).

A stall is counted (``health.stalls``), ``last_error`` says how long the
stream was silent (``no data for 4.6 s (read timeout 5 s)``), and the
source stays ``stalled``, not ``backing_off``, while it waits to reopen the
stream, so that ``/readyz`` and the health metric show why it is waiting.
"""

from __future__ import annotations

import dataclasses
import logging
import struct
import threading
import time
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

from streamseg.backoff import Backoff
from streamseg.ingest.health import HealthState, HealthTracker
from streamseg.ingest.policy import Connection
from streamseg.ingest.spec import SourceError, SourceSpec

__all__ = ["DemuxSession", "PacketReader", "StreamInfo", "is_keyframe"]

log = logging.getLogger("streamseg.ingest")

# How long FFmpeg may probe a live stream before the first packet (microseconds):
# enough for codec parameters, short so that a (re)connection starts quickly.
LIVE_ANALYZE_US = 500_000


@dataclasses.dataclass(frozen=True)
class StreamInfo:
    """The video stream of one connection.

    Attributes:
        codec: FFmpeg codec name (``h264``, ``hevc``, ``vp9``, ...).
        width, height: coded frame size, pixels.
        time_base: packet timestamp unit, seconds.
        fps: nominal frame rate, or ``None`` when the stream does not say.
        extradata: codec configuration (SPS/PPS for H.264), or ``None``.
        container: FFmpeg's demuxer name (``rtsp``, ``mov,mp4,...``).
    """

    codec: str
    width: int
    height: int
    time_base: Fraction
    fps: float | None
    extradata: bytes | None
    container: str


class DemuxSession:
    """One open connection (or one pass over a file).

    ``stream`` is the PyAV video stream (a template for remuxing; a new
    object per session). ``end`` tells how ``packets()`` ended: ``eof``,
    ``lost`` (error), ``stalled`` (read deadline), or ``stopped``; and
    ``error`` the redacted reason.
    """

    def __init__(self, reader: PacketReader, container: Any, stop: threading.Event) -> None:
        self._reader = reader
        self.container = container
        self.stream = container.streams.video[0]
        self._stop = stop
        cc = self.stream.codec_context
        rate = self.stream.average_rate or self.stream.guessed_rate
        self.info = StreamInfo(
            codec=cc.name,
            width=int(cc.width),
            height=int(cc.height),
            time_base=Fraction(self.stream.time_base or Fraction(1, 90000)),
            fps=float(rate) if rate else None,
            extradata=bytes(cc.extradata) if cc.extradata else None,
            container=str(container.format.name),
        )
        self.end: str | None = None
        self.error: str | None = None
        self.packets_read = 0
        self._last_data = time.monotonic()  # the last data received, or the connection
        self._clock_offset: float | None = None  # camera wall time - pts, seconds

    def packets(self) -> Iterator[Any]:
        """The video stream's packets (``av.Packet``, with a size), in decode order."""
        import av

        tracker = self._reader.health
        # A read that took read_timeout / 2 was aborted: the packet it returns
        # is one the parser held back, not new data (see the module docstring).
        aborted_after = 0.95 * self._reader.read_timeout / 2
        asked = time.monotonic()
        try:
            for packet in self.container.demux(self.stream):
                now = time.monotonic()
                if now - asked < aborted_after:
                    self._last_data = now
                if self._stop.is_set():
                    self.end = "stopped"
                    return
                if packet.size == 0:  # demuxer flush marker
                    continue
                if self.packets_read == 0:
                    tracker.set_state(HealthState.STREAMING)
                    log.info(
                        "ingest[%s]: streaming %s %dx%d from %s",
                        self._reader.camera_id,
                        self.info.codec,
                        self.info.width,
                        self.info.height,
                        self._reader.spec.display,
                    )
                self.packets_read += 1
                self._note_camera_clock(packet)
                yield packet
                asked = time.monotonic()
            self.end = "stopped" if self._stop.is_set() else "eof"
        except av.error.ExitError:
            self._stalled()
        except (av.error.FFmpegError, OSError) as exc:
            # FFmpeg's RTSP demuxer reports some reads aborted by our timeout
            # as an I/O error: a read that blocked that long is a stall too.
            if self._reader.live and time.monotonic() - asked >= aborted_after:
                self._stalled()
                return
            self.end = "stopped" if self._stop.is_set() else "lost"
            self.error = tracker.redact(f"stream lost: {_describe(exc)}")

    def _stalled(self) -> None:
        self.end = "stopped" if self._stop.is_set() else "stalled"
        silent = time.monotonic() - self._last_data
        self.error = f"no data for {silent:.1f} s (read timeout {self._reader.read_timeout:g} s)"

    def camera_time(self, pts: float | None) -> float | None:
        """The camera's wall clock (unix seconds) at stream time ``pts`` (seconds).

        Known once the RTSP server has sent an RTCP sender report: FFmpeg
        attaches a producer reference time (``prft`` side data) to each packet
        after it; ``None`` before that and for sources without one.
        """
        if pts is None or self._clock_offset is None:
            return None
        return pts + self._clock_offset

    def _note_camera_clock(self, packet: Any) -> None:
        if packet.pts is None or not packet.has_sidedata("prft"):
            return
        raw = bytes(packet.get_sidedata("prft"))
        if len(raw) >= 8:
            wallclock_us = struct.unpack_from("<q", raw)[0]
            pts = float(packet.pts * self.info.time_base)
            self._clock_offset = wallclock_us / 1e6 - pts

    def close(self) -> None:
        try:
            self.container.close()
        except Exception as exc:  # closing a broken connection may fail; nothing to do
            log.debug("closing %s: %s", self._reader.spec.display, exc)


class PacketReader:
    """Opens ``spec`` again and again: a live source until ``stop``, a file once (or looped).

    Keyword arguments:
        camera_id: for messages.
        spec: the parsed URL (``streamseg.ingest.spec.parse_source_url``).
        live: reconnect on loss (network and V4L2 sources) instead of failing.
        connection: the backoff between attempts and the connect and read
            timeouts (``Connection()`` by default).
        loop: files: start again at the end.
        options: extra FFmpeg options (strings), on top of the URL's.
        health: tracker to report states to (one is made when ``None``).
        fail_first: the first connection must succeed (``streamseg record``:
            a wrong URL or password fails at once instead of retrying for ever);
            once a session has opened, a live source reconnects as usual.
    """

    def __init__(
        self,
        *,
        camera_id: str,
        spec: SourceSpec,
        live: bool,
        connection: Connection | None = None,
        loop: bool = False,
        options: dict[str, str] | None = None,
        health: HealthTracker | None = None,
        fail_first: bool = False,
    ) -> None:
        connection = connection or Connection()
        self.camera_id = camera_id
        self.spec = spec
        self.live = live
        self.policy = connection.reconnect
        self.connect_timeout = connection.connect_timeout
        self.read_timeout = connection.read_timeout
        self.loop = loop
        self.options = dict(options or {})
        self.health = health or HealthTracker(camera_id)
        self.fail_first = fail_first

    def sessions(self, stop: threading.Event) -> Iterator[DemuxSession]:
        """Connections, one after the other; returns when done (see ``health``).

        Raises:
            SourceError: a file that cannot be read, or a live source that
                used up ``reconnect.max_attempts``. ``health`` is ``failed``.
        """
        backoff = Backoff(self.policy)
        attempts = 0
        while not stop.is_set():
            if attempts > 0:
                self.health.count(reconnects=1)
            attempts += 1
            self.health.set_state(HealthState.CONNECTING)
            started = time.monotonic()
            first = attempts == 1 and self.fail_first
            try:
                session = DemuxSession(self, self._open(), stop)
            except SourceError as exc:
                self._retry_or_fail(backoff, stop, str(exc), permanent=True)
                continue
            except Exception as exc:
                error = self._open_error(exc, time.monotonic() - started)
                self._retry_or_fail(backoff, stop, error, permanent=first)
                continue
            try:
                yield session
            finally:
                session.close()
            if session.packets_read:
                backoff.reset()
            if session.end == "stopped" or stop.is_set():
                return
            if not self.live:
                if session.end != "eof":
                    self._fail(session.error or "read error")
                if not self.loop:
                    self.health.set_state(HealthState.FINISHED)
                    return
                attempts = 0  # looping a file is not a reconnect
                continue
            if session.end == "stalled":
                self.health.count(stalls=1)
                self._retry_or_fail(backoff, stop, session.error or "", state=HealthState.STALLED)
                continue
            self._retry_or_fail(backoff, stop, session.error or "stream ended (end of file)")

    def _open(self) -> Any:
        import av

        options = dict(self.spec.options)
        read_timeout: float | None = None
        if self.spec.is_network or self.spec.kind == "v4l2":
            read_timeout = self.read_timeout / 2
            options.setdefault("analyzeduration", str(LIVE_ANALYZE_US))
        if self.spec.kind == "rtsp":
            # TCP: no lost packets behind NAT/firewalls; `timeout` is FFmpeg's
            # socket I/O timeout in microseconds (FFmpeg >= 5 has no `stimeout`).
            options.setdefault("rtsp_transport", "tcp")
            options.setdefault("timeout", str(int(self.read_timeout * 1e6)))
            options.setdefault("allowed_media_types", "video")
        elif self.spec.kind == "network":
            options.setdefault("rw_timeout", str(int(self.read_timeout * 1e6)))
        options.update(self.options)
        container = av.open(
            self.spec.target,
            mode="r",
            format=self.spec.input_format,
            options=options,
            timeout=(self.connect_timeout, read_timeout),
        )
        if not container.streams.video:
            container.close()
            raise SourceError(f"{self.spec.display} has no video stream")
        return container

    def _open_error(self, exc: BaseException, elapsed: float) -> str:
        """Why opening failed; FFmpeg reports an aborted handshake as a protocol error."""
        import av

        if isinstance(exc, av.error.ExitError) or (
            elapsed >= 0.95 * self.connect_timeout and self.live
        ):
            return self.health.redact(
                f"cannot connect: no usable answer within {self.connect_timeout:g} s "
                f"(connect timeout; FFmpeg: {_describe(exc)})"
            )
        if self.live and elapsed >= 0.9 * self.read_timeout:
            # The server answered, then sent nothing FFmpeg could probe before
            # its socket read timeout (a stalled camera accepts sessions too).
            return self.health.redact(
                f"cannot open: no video within {elapsed:.1f} s of connecting "
                f"(read timeout {self.read_timeout:g} s; FFmpeg: {_describe(exc)})"
            )
        return self.health.redact(f"cannot open: {_describe(exc)}")

    def _retry_or_fail(
        self,
        backoff: Backoff,
        stop: threading.Event,
        error: str,
        *,
        permanent: bool = False,
        state: HealthState = HealthState.BACKING_OFF,
    ) -> None:
        """Wait in ``state`` before the next attempt (live), or fail (files, exhausted retries)."""
        if not self.live or (permanent and (self.spec.kind == "file" or self.fail_first)):
            self._fail(error)
        if backoff.exhausted:
            self._fail(f"gave up after {backoff.failures} attempts; last error: {error}")
        delay = backoff.next_delay()
        self.health.set_state(state, error)
        log.warning(
            "ingest[%s]: %s%s; retrying in %.1f s",
            self.camera_id,
            "stalled: " if state == HealthState.STALLED else "",
            self.health.redact(error),
            delay,
        )
        stop.wait(delay)

    def _fail(self, error: str) -> None:
        self.health.set_state(HealthState.FAILED, error)
        raise SourceError(f"camera {self.camera_id!r} ({self.spec.display}): {error}")


def _describe(exc: BaseException) -> str:
    """A short message for a PyAV/OS error (its URL is redacted by the caller)."""
    import av

    if isinstance(exc, av.error.FFmpegError):
        text = exc.strerror or str(exc)
        return f"{text} [{type(exc).__name__}]"
    return f"{exc} [{type(exc).__name__}]"


def is_keyframe(packet: Any, codec: str) -> bool:
    """Whether ``packet`` starts a group of pictures.

    The demuxer's flag, or for VP8/VP9 the frame header itself: FFmpeg's
    RTP depacketizers for these codecs do not flag key frames.
    """
    if packet.is_keyframe:
        return True
    if codec not in ("vp8", "vp9") or not packet.size:
        return False
    first = bytes(packet)[0]
    if codec == "vp8":
        return first & 0x01 == 0  # frame tag: bit 0 is 0 for a key frame
    if first >> 6 != 0b10:  # VP9 frame_marker
        return False
    profile = ((first >> 5) & 1) | (((first >> 4) & 1) << 1)
    bit = 3 if profile < 3 else 2  # profile 3 has a reserved bit first
    show_existing = (first >> bit) & 1
    frame_type = (first >> (bit - 1)) & 1
    return show_existing == 0 and frame_type == 0
