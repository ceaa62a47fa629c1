"""``open_source``: one camera URL -> a ``Source`` that emits ``Frame``s.

Importing this module loads neither PyAV nor DALI; the sources import
them when they run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamseg.ingest.base import PacketHook, Source
from streamseg.ingest.health import HealthTracker, StateListener
from streamseg.ingest.policy import Connection
from streamseg.ingest.spec import (
    DECODERS,
    SourceError,
    decoder_problem,
    parse_source_url,
)
from streamseg.redact import url_password

if TYPE_CHECKING:
    from streamseg.ingest.packets import PacketReader

__all__ = ["open_packet_reader", "open_source"]


def open_source(
    *,
    camera_id: str,
    url: str,
    max_fps: float | None = None,
    decode: str = "pyav",
    live: bool | None = None,
    realtime: bool = False,
    loop: bool = False,
    connection: Connection | None = None,
    device: str = "cpu",
    on_packet: PacketHook | None = None,
    on_state: StateListener | None = None,
    ffmpeg_options: dict[str, str] | None = None,
) -> Source:
    """Open a camera (see ``docs/ingest.md`` for the URL forms).

    Keyword arguments:
        camera_id: the camera's id (in frames, health and messages).
        url: ``rtsp://...``, a file path or ``file://``, ``/dev/videoN`` or
            ``v4l2://``, ``synthetic://...``.
        max_fps: keep at most this many frames per second (by timestamp);
            skipped frames are counted in ``health.dropped_rate_limit``.
        decode: ``pyav`` (CPU) or ``dali`` (NVIDIA DALI; the ``dali`` extra).
        live: override whether the source is live (default: network, V4L2
            and paced synthetic sources are; files are live only when paced).
        realtime: files: emit at the clip's frame rate (also ``?pace=1``).
        loop: files: start again at the end (also ``?loop=1``).
        connection: the backoff between attempts and the connect and read
            timeouts (``Connection()`` by default; a camera's ``reconnect:``
            section gives its own with ``connection()``).
        device: where the ``dali`` decoder leaves frames (``cpu``, ``cuda:N``).
        on_packet: called with ``(camera_id, av.Packet, av.VideoStream)``
            for every demuxed video packet, before decoding.
        on_state: called with a ``CameraHealth`` after every state change.
        ffmpeg_options: extra FFmpeg options for the demuxer.

    Raises:
        SourceError: a bad URL or option, a missing file or device, or DALI
            not installed; the message names the camera and the fix.
    """
    spec = parse_source_url(url, camera_id=camera_id)
    if decode not in DECODERS:
        raise SourceError(
            f"camera {camera_id!r}: decode must be one of {', '.join(DECODERS)}, got {decode!r}"
        )
    if max_fps is not None and not max_fps > 0:
        raise SourceError(f"camera {camera_id!r}: max_fps must be > 0, got {max_fps}")
    spec.check_exists(camera_id)
    tracker = HealthTracker(camera_id, secrets=_secrets(url), on_state=on_state)
    if spec.kind == "synthetic":
        from streamseg.ingest.scene_source import SceneSource

        return SceneSource(
            camera_id=camera_id, spec=spec, live=live, max_fps=max_fps, tracker=tracker
        )
    problem = decoder_problem(decode)
    if problem is not None:
        raise SourceError(f"camera {camera_id!r}: {problem[1]}")
    from streamseg.ingest.stream_source import StreamSource

    pace = spec.pace or realtime
    return StreamSource(
        camera_id=camera_id,
        spec=spec,
        live=(spec.live or pace) if live is None else live,
        pace=pace,
        loop=spec.loop or loop,
        max_fps=max_fps,
        decode=decode,
        device=device,
        connection=connection or Connection(),
        on_packet=on_packet,
        ffmpeg_options=ffmpeg_options,
        tracker=tracker,
    )


def open_packet_reader(
    *,
    camera_id: str,
    url: str,
    live: bool | None = None,
    connection: Connection | None = None,
    fail_first: bool = False,
) -> PacketReader:
    """A camera's demuxed packets with the same reconnect policy as ``open_source``.

    For consumers of packets rather than frames (``streamseg record``). Live
    by default where the URL scheme's entry in ``spec.SCHEMES`` says so.

    Raises:
        SourceError: a bad URL or option, a missing file or device, or a
            synthetic scene (it has no packets; ``streamseg synth`` writes
            one to a video file).
    """
    from streamseg.ingest.packets import PacketReader

    spec = parse_source_url(url, camera_id=camera_id)
    if spec.kind == "synthetic":
        raise SourceError(
            f"camera {camera_id!r} is a synthetic scene: it has no packets "
            "(`streamseg synth` writes one to a video file)"
        )
    spec.check_exists(camera_id)
    return PacketReader(
        camera_id=camera_id,
        spec=spec,
        live=spec.live if live is None else live,
        connection=connection,
        health=HealthTracker(camera_id, secrets=_secrets(url)),
        fail_first=fail_first,
    )


def _secrets(url: str) -> tuple[str, ...]:
    pw = url_password(url)
    return (pw,) if pw else ()
