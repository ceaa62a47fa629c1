"""The dali decoder: PyAV demuxes, DALI decodes (its CPU backend takes VP9)."""

from __future__ import annotations

import io
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import av
import numpy as np
import pytest
import torch
from torch import Tensor

from streamseg.ingest import Connection, PacketReader, SourceError, open_source, parse_source_url
from streamseg.ingest.dali import DaliDecoder, remux_matroska
from streamseg.ingest.decoders import PyAVDecoder
from tests.support.rtsp import RtspServer
from tests.support.sources import SourceRunner
from tests.support.video import write_h264


def write_vp9(path: Path, *, frames: int = 30, fps: int = 15, gop: int = 10) -> Path:
    """A WebM VP9 clip, 160x120: a moving bright square on a changing background."""
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libvpx-vp9", rate=fps)
        stream.width, stream.height, stream.pix_fmt = 160, 120, "yuv420p"
        stream.options = {"g": str(gop), "deadline": "realtime", "cpu-used": "8"}
        for i in range(frames):
            image = np.zeros((120, 160, 3), np.uint8)
            image[..., 0], image[..., 2] = (i * 7) % 256, 80
            x = (i * 4) % 130
            image[40:70, x : x + 30] = 255
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path


@pytest.fixture(scope="module")
def vp9_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_vp9(tmp_path_factory.mktemp("vp9") / "clip.webm")


def decode_packets(path: Path, make: Callable[[Any], Any]) -> list[tuple[float | None, Tensor]]:
    reader = PacketReader(camera_id="t", spec=parse_source_url(str(path)), live=False)
    out = []
    for session in reader.sessions(threading.Event()):
        decoder = make(session.stream)
        for packet in session.packets():
            out += [(p.pts, p.image()) for p in decoder.decode(packet)]
        out += [(p.pts, p.image()) for p in decoder.flush()]
    return out


def test_dali_cpu_matches_pyav_on_the_same_packets(vp9_clip: Path) -> None:
    ours = decode_packets(vp9_clip, lambda s: DaliDecoder(stream=s, device="cpu"))
    ref = decode_packets(vp9_clip, lambda s: PyAVDecoder(stream=s))
    assert len(ours) == len(ref) == 30
    assert [t for t, _ in ours] == pytest.approx([t for t, _ in ref])
    for (_, a), (_, b) in zip(ours, ref, strict=True):
        assert a.dtype == torch.uint8 and a.shape == b.shape == (120, 160, 3)
        diff = (a.int() - b.int()).abs().float()
        # same decoded YUV; only the YUV->RGB conversion differs slightly
        assert diff.mean() < 2.0
        assert torch.quantile(diff.flatten(), 0.99) < 16


def test_open_source_with_dali_delivers_every_frame(vp9_clip: Path) -> None:
    dali_src = open_source(camera_id="d", url=str(vp9_clip), decode="dali", max_fps=5)
    frames: list[Any] = []
    dali_src.run(frames.append, threading.Event())
    assert [f.seq for f in frames] == list(range(0, 30, 3))
    assert all(f.image.device.type == "cpu" and f.image.shape == (120, 160, 3) for f in frames)
    assert dali_src.health.state == "finished" and dali_src.health.frames == 30


def test_dali_on_cpu_refuses_h264_clearly(tmp_path: Path) -> None:
    clip = write_h264(tmp_path / "a.mp4", frames=5)
    source = open_source(camera_id="h", url=str(clip), decode="dali")
    with pytest.raises(SourceError, match=r"dali on the CPU decodes only vp8, vp9, mjpeg.*h264"):
        source.run(lambda f: None, threading.Event())
    assert source.health.state == "failed"
    assert "decode: pyav" in (source.health.last_error or "")


def test_matroska_gop_chunks_of_rtsp_h264_decode(rtsp_server: RtspServer) -> None:
    """The NVDEC path's remux step, checked where there is no GPU: each GOP chunk
    of a live H.264 stream is a file that a decoder reads completely."""
    reader = PacketReader(camera_id="c", spec=parse_source_url(rtsp_server.url), live=True)
    stop = threading.Event()
    gops: list[list[Any]] = []
    chunks: list[bytes] = []
    for session in reader.sessions(stop):
        for packet in session.packets():
            if packet.is_keyframe:
                if len(gops) >= 1:  # a GOP is complete: remux it (the session is open)
                    chunks.append(remux_matroska(session.stream, gops[-1]))
                gops.append([])
            if gops:
                gops[-1].append(packet)
            if len(chunks) == 2:
                stop.set()
        break
    for gop, chunk in zip(gops, chunks, strict=False):
        with av.open(io.BytesIO(chunk)) as c:
            decoded = list(c.decode(video=0))
        assert len(decoded) == len(gop) == 15  # the server's GOP: 15 frames
        assert decoded[0].width == 160


def test_dali_over_rtsp_vp9(rtsp_server_factory: Callable[..., RtspServer]) -> None:
    server = rtsp_server_factory(codec="vp9", gop=5)
    source = open_source(
        camera_id="v", url=server.url, decode="dali", connection=Connection(read_timeout=3)
    )
    with SourceRunner(source) as run:
        run.wait_frames(12, timeout=20)
    pts = [f.pts for f in run.frames if f.pts is not None]
    assert pts == sorted(pts) and len(pts) >= 10
    assert all(f.image.shape == (120, 160, 3) for f in run.frames)


def test_missing_dali_names_the_extra(vp9_clip: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "nvidia.dali", None)  # what a machine without DALI sees
    with pytest.raises(SourceError) as err:
        open_source(camera_id="g", url=str(vp9_clip), decode="dali")
    message = str(err.value)
    assert "camera 'g'" in message
    assert "pip install 'streamseg[dali]'" in message and "nvidia-dali-cuda120" in message


def test_check_names_the_decode_field_without_dali(monkeypatch: pytest.MonkeyPatch) -> None:
    """``streamseg check`` asks the decoder table's row, without opening the camera."""
    from streamseg.cli.startup import environment_issues
    from streamseg.config import PipelineConfig
    from streamseg.ingest.config import CameraConfig

    monkeypatch.setitem(sys.modules, "nvidia.dali", None)  # what a machine without DALI sees
    cameras = [
        CameraConfig(id="p", url="synthetic://?seed=1"),
        CameraConfig(id="g", url="synthetic://?seed=1", decode="dali"),
    ]
    issues = environment_issues(PipelineConfig(cameras=cameras))
    assert [(i.loc, i.message) for i in issues] == [
        (("cameras", 1, "decode"), "NVIDIA DALI is not installed")
    ]
    assert "pip install 'streamseg[dali]'" in (issues[0].hint or "")


@pytest.mark.parametrize(
    ("codec", "first_byte", "key"),
    [
        ("vp9", 0x82, True),  # profile 0, key frame, shown
        ("vp9", 0x86, False),  # profile 0, inter frame
        ("vp9", 0x88, False),  # show_existing_frame
        ("vp9", 0xB1, True),  # profile 3 (reserved bit), key frame
        ("vp9", 0xB3, False),
        ("vp9", 0x42, False),  # not a VP9 frame marker
        ("vp8", 0x10, True),
        ("vp8", 0x11, False),
        ("h264", 0x00, False),  # other codecs: only the demuxer's flag counts
    ],
)
def test_is_keyframe_reads_vp8_vp9_headers(codec: str, first_byte: int, key: bool) -> None:
    from streamseg.ingest.packets import is_keyframe

    packet = av.Packet(bytes([first_byte, 0, 0, 0]))
    assert is_keyframe(packet, codec) is key
    packet.is_keyframe = True
    assert is_keyframe(packet, codec) is True


def test_a_corrupt_gop_is_skipped_and_decoding_goes_on(vp9_clip: Path) -> None:
    from streamseg.ingest.decoders import DecodeError

    reader = PacketReader(camera_id="t", spec=parse_source_url(str(vp9_clip)), live=False)
    decoded, errors = 0, 0
    for session in reader.sessions(threading.Event()):
        decoder = DaliDecoder(stream=session.stream, device="cpu")
        for i, packet in enumerate(session.packets()):
            if i == 0:  # truncate the first key frame: its GOP cannot decode
                broken = av.Packet(bytes(packet)[:12])
                broken.pts, broken.dts, broken.time_base = packet.pts, packet.dts, packet.time_base
                packet = broken
            try:
                decoded += len(decoder.decode(packet))
            except DecodeError:
                errors += 1
        decoded += len(decoder.flush())
    assert (errors, decoded) == (1, 20)  # GOPs of 10: the first lost, the other two decoded
