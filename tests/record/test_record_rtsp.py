"""``record`` against a real RTSP server: playable segments, packets copied as they came."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path

import av
import pytest

from streamseg.backoff import ReconnectPolicy
from streamseg.ingest.policy import Connection
from streamseg.record.files import StoredPacket
from streamseg.record.recorder import record_camera
from streamseg.record.segments import SegmentWriter
from tests.support.rtsp import RtspServer
from tests.support.video import count_frames, video_duration


def nal_units(data: bytes) -> list[bytes]:
    """H.264 NAL units of a packet, Annex B (RTSP) or length-prefixed (MP4/MKV)."""
    if data.startswith((b"\x00\x00\x01", b"\x00\x00\x00\x01")):
        parts = data.replace(b"\x00\x00\x00\x01", b"\x00\x00\x01").split(b"\x00\x00\x01")
        return [p for p in parts if p]
    units, i = [], 0
    while i < len(data):
        n = int.from_bytes(data[i : i + 4], "big")
        units.append(data[i + 4 : i + 4 + n])
        i += 4 + n
    return units


def _file_nals(path: Path) -> list[bytes]:
    with av.open(str(path)) as c:
        return [u for p in c.demux(video=0) if p.size for u in nal_units(bytes(p))]


def test_rtsp_segments_play_and_keep_every_frame(rtsp_server: RtspServer, tmp_path: Path) -> None:
    result = record_camera(
        url=rtsp_server.url, camera_id="gate", out_dir=tmp_path, duration_s=3.0, segment_s=1.0
    )
    assert result.reconnects == 0 and 3 <= len(result.files) <= 4
    assert sum(f.packets for f in result.files) == result.packets
    assert 44 <= result.packets <= 46  # 3 s at 15 fps
    for f in result.files:
        assert count_frames(f.path) == f.packets  # every packet decodes: starts at a keyframe
        assert video_duration(f.path) == pytest.approx(f.duration, abs=0.07)
        with av.open(str(f.path)) as c:
            stream = c.streams.video[0]
            assert (stream.codec_context.name, stream.width, stream.height) == ("h264", 160, 120)
    assert sum(f.duration for f in result.files) == pytest.approx(3.0, abs=0.07)


@pytest.mark.parametrize("container", ["mp4", "mkv"])
def test_rtsp_packets_are_remuxed_not_reencoded(
    rtsp_server: RtspServer, tmp_path: Path, container: str
) -> None:
    """The segments hold exactly the NAL units the camera sent (no decoder, no encoder)."""
    sent: list[StoredPacket] = []
    with av.open(rtsp_server.url, options={"rtsp_transport": "tcp"}) as camera:
        stream = camera.streams.video[0]
        writer = SegmentWriter(
            out_dir=tmp_path, camera_id="c", template=stream, container=container, segment_s=1.0
        )
        for packet in camera.demux(stream):
            if not packet.size:
                continue
            sp = StoredPacket.from_av(packet)
            if sent or sp.keyframe:
                sent.append(sp)
            writer.write(sp)
            if len(sent) >= 40:
                break
        files = writer.close()
    assert len(files) == 3 and [f.packets for f in files] == [15, 15, 10]
    written = [u for f in files for u in _file_nals(f.path)]
    assert written == [u for sp in sent for u in nal_units(sp.data)]
    assert sum(count_frames(f.path) for f in files) == 40


def test_record_command_over_rtsp_hides_the_password(
    rtsp_server_factory: Callable[..., RtspServer],
    tmp_path: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    server = rtsp_server_factory(user="ops", password="s3cret-pw")
    out = tmp_path / "rec"
    args = ["record", "--camera", "dock", "--url", server.url, "--out", str(out)]
    proc = cli(*args, "--duration", "2", "--segment-seconds", "1", "--container", "mkv")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert "s3cret-pw" not in proc.stdout + proc.stderr
    assert report["url"].startswith("rtsp://") and report["camera"] == "dock"
    paths = [Path(f["path"]) for f in report["files"]]
    assert len(paths) == 2 and all(p.suffix == ".mkv" and p.parent == out for p in paths)
    assert [count_frames(p) for p in paths] == [f["packets"] for f in report["files"]]
    assert sum(f["packets"] for f in report["files"]) == report["packets"] >= 29
    # Wrong password: a clear failure, still without the password.
    bad = server.url.replace("s3cret-pw", "wrong-pw")
    proc = cli("record", "--camera", "dock", "--url", bad, "--duration", "1", "--out", str(out))
    assert proc.returncode == 1 and "record failed: camera 'dock' (rtsp://ops:***@" in proc.stderr
    assert "401 Unauthorized" in proc.stderr
    assert "wrong-pw" not in proc.stdout + proc.stderr and proc.stdout == ""


def test_a_camera_that_drops_is_reconnected(rtsp_server: RtspServer, tmp_path: Path) -> None:
    def outage() -> None:
        time.sleep(1.5)
        rtsp_server.kill()
        time.sleep(1.0)
        rtsp_server.start()

    thread = threading.Thread(target=outage)
    thread.start()
    try:
        result = record_camera(
            url=rtsp_server.url,
            camera_id="c",
            out_dir=tmp_path,
            duration_s=3.0,
            segment_s=10.0,
            connection=Connection(
                ReconnectPolicy(initial=0.3, max_delay=0.3, jitter=0.0), connect_timeout=3.0
            ),
        )
    finally:
        thread.join()
    assert result.reconnects >= 1 and len(result.files) >= 2
    for f in result.files:
        assert count_frames(f.path) == f.packets > 0
    assert sum(f.duration for f in result.files) == pytest.approx(3.0, abs=0.15)
