"""File sources: every frame once and in order, pacing, looping, max_fps, errors."""

from __future__ import annotations

import itertools
import threading
import time
from pathlib import Path
from typing import Any

import av
import numpy as np
import pytest
import torch

from streamseg.ingest import SourceError, open_source
from tests.support.video import write_h264


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """45 frames, 15 fps, 64x48, B-frames (decode order differs from display order)."""
    return write_h264(tmp_path_factory.mktemp("clips") / "clip.mp4", frames=45, fps=15)


def reference(path: Path) -> list[tuple[float, np.ndarray]]:
    with av.open(str(path)) as c:
        return [
            (float(f.pts * f.time_base), f.to_ndarray(format="rgb24")) for f in c.decode(video=0)
        ]


def run_to_end(source: Any, emit: Any = None) -> list[Any]:
    frames: list[Any] = []
    source.run(emit or frames.append, threading.Event())
    return frames


def test_file_delivers_every_frame_once_in_order(clip: Path) -> None:
    source = open_source(camera_id="f1", url=str(clip))
    assert source.live is False
    frames = run_to_end(source)
    ref = reference(clip)
    assert len(frames) == len(ref) == 45
    assert [f.seq for f in frames] == list(range(45))
    assert [f.pts for f in frames] == pytest.approx([t for t, _ in ref])
    for frame, (_, image) in zip(frames, ref, strict=True):
        assert frame.camera_id == "f1"
        assert frame.image.dtype == torch.uint8 and frame.image.shape == (48, 64, 3)
        assert torch.equal(frame.image, torch.from_numpy(image))
        assert frame.camera_time is None
    h = source.health
    assert (h.state, h.frames, h.emitted, h.reconnects) == ("finished", 45, 45, 0)
    assert [s for _, s in source.health_history()] == ["connecting", "streaming", "finished"]


def test_file_backpressure_loses_nothing(clip: Path) -> None:
    source = open_source(camera_id="slow", url=str(clip))
    got: list[int] = []

    def slow_emit(frame: Any) -> None:  # a consumer slower than decoding
        time.sleep(0.005)
        got.append(frame.seq)

    run_to_end(source, slow_emit)
    assert got == list(range(45))


@pytest.mark.parametrize("how", ["keyword", "url"])
def test_pacing_plays_at_the_clip_rate(tmp_path: Path, how: str) -> None:
    clip = write_h264(tmp_path / "paced.mp4", frames=12, fps=15)
    url, kw = (str(clip), {"realtime": True}) if how == "keyword" else (f"{clip}?pace=1", {})
    source = open_source(camera_id="paced", url=url, **kw)
    assert source.live is True  # a paced file behaves like a camera
    t0 = time.monotonic()
    frames = run_to_end(source)
    elapsed = time.monotonic() - t0
    span = frames[-1].pts - frames[0].pts  # 11 frame intervals at 15 fps
    assert len(frames) == 12 and span == pytest.approx(11 / 15, abs=1e-3)
    assert elapsed >= span - 0.05
    wall = frames[-1].capture_time - frames[0].capture_time
    assert wall == pytest.approx(span, abs=0.25)


def test_loop_starts_again_with_increasing_pts(tmp_path: Path) -> None:
    path = write_h264(tmp_path / "short.mp4", frames=10, fps=15)
    source = open_source(camera_id="loop", url=f"file://{path}?loop=1")
    frames: list[Any] = []
    stop = threading.Event()

    def emit(frame: Any) -> None:
        frames.append(frame)
        if len(frames) == 25:
            stop.set()

    source.run(emit, stop)
    assert [f.seq for f in frames] == list(range(25))
    pts = [f.pts for f in frames]
    assert all(b > a for a, b in itertools.pairwise(pts))
    assert pts[10] - pts[9] == pytest.approx(1 / 15, abs=1e-3)
    assert torch.equal(frames[10].image, frames[0].image)  # second pass, same pixels
    assert torch.equal(frames[23].image, frames[3].image)
    assert source.health.reconnects == 0 and source.health.state == "stopped"


def test_max_fps_skips_by_timestamp(tmp_path: Path) -> None:
    path = write_h264(tmp_path / "30fps.mp4", frames=30, fps=30, bframes=0)
    source = open_source(camera_id="lim", url=str(path), max_fps=10)
    frames = run_to_end(source)
    assert [f.seq for f in frames] == list(range(0, 30, 3))  # seq counts skipped frames
    h = source.health
    assert (h.frames, h.emitted, h.dropped_rate_limit) == (30, 10, 20)


def test_on_packet_sees_every_packet_before_decoding(clip: Path) -> None:
    seen: list[tuple[str, int, Any]] = []
    source = open_source(
        camera_id="hook", url=str(clip), on_packet=lambda c, p, s: seen.append((c, p.size, s))
    )
    run_to_end(source)
    with av.open(str(clip)) as c:
        sizes = [p.size for p in c.demux(video=0) if p.size]
    assert [s for _, s, _ in seen] == sizes
    assert {c for c, _, _ in seen} == {"hook"}
    assert seen[0][2].codec_context.name == "h264"


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match=r"camera 'x': video file .*missing\.mp4 does not exist"):
        open_source(camera_id="x", url=str(tmp_path / "missing.mp4"))


def test_unreadable_file_fails_with_the_reason(tmp_path: Path) -> None:
    bad = tmp_path / "garbage.mp4"
    bad.write_bytes(np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    source = open_source(camera_id="bad", url=str(bad))
    with pytest.raises(SourceError, match=r"camera 'bad' .*garbage\.mp4.*cannot open"):
        run_to_end(source)
    assert source.health.state == "failed"
    assert "cannot open" in (source.health.last_error or "")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"url": "ftp://h/a.mp4"}, "unsupported URL scheme 'ftp'"),
        ({"url": "synthetic://", "decode": "nvdec"}, "decode must be one of pyav, dali"),
        ({"url": "synthetic://", "max_fps": 0}, "max_fps must be > 0"),
    ],
)
def test_bad_options_are_clear_errors(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(SourceError, match=message):
        open_source(camera_id="opt", **kwargs)


def test_importing_ingest_loads_nothing_heavy() -> None:
    import subprocess
    import sys

    code = (
        "import sys, streamseg.ingest, streamseg.redact;"
        "print(any(m == 'av' or m.startswith(('av.', 'nvidia')) for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
