"""streamseg.video: the one MP4 writer and file decoder, round trip."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from streamseg.video import Mp4Writer, VideoReader


def _frames(n: int, h: int, w: int) -> list[np.ndarray]:
    # A bright square moving right on grey: lossy coding keeps where it is.
    out = []
    for i in range(n):
        image = np.full((h, w, 3), 60, np.uint8)
        image[4:12, 2 * i : 2 * i + 8] = 250
        out.append(image)
    return out


def test_written_frames_read_back_in_order_with_their_times(tmp_path: Path) -> None:
    path = tmp_path / "clip.mp4"
    with Mp4Writer(path, 33, 21, Fraction(10)) as writer:  # odd sides: padded to even
        for image in _frames(6, 21, 33):
            writer.write(image)
    assert writer.codec in ("libx264", "mpeg4")
    with VideoReader(path) as video:
        assert video.rate == 10
        got = list(video)
    assert [image.shape for _, image in got] == [(22, 34, 3)] * 6
    assert [t for t, _ in got] == pytest.approx([i / 10 for i in range(6)])
    # The square moved two pixels a frame: its brightest column says so.
    columns = [int(np.argmax(image[8, :, 0] > 150)) for _, image in got]
    assert columns == [2 * i for i in range(6)]


def test_read_converts_only_the_frames_kept(tmp_path: Path) -> None:
    path = tmp_path / "clip.mp4"
    with Mp4Writer(path, 32, 16, 5.0) as writer:
        for image in _frames(5, 16, 32):
            writer.write(image)
    with VideoReader(path, threads=1) as video:
        kept = [(i, t) for i, t, _ in video.read(lambda i, t: i % 2 == 0)]
    assert kept == [(0, pytest.approx(0.0)), (2, pytest.approx(0.4)), (4, pytest.approx(0.8))]


def test_a_file_that_is_no_video_is_refused(tmp_path: Path) -> None:
    import av

    bad = tmp_path / "not-a-video.mp4"
    bad.write_bytes(b"no video here")
    with pytest.raises((OSError, av.error.FFmpegError)):
        VideoReader(bad)
