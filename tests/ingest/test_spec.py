"""Camera URLs: kinds, options and the errors users get for bad ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamseg.ingest.spec import SCHEMES, SourceError, parse_source_url, url_scheme


@pytest.mark.parametrize(
    ("url", "kind", "target", "extra"),
    [
        ("rtsp://u:pw@cam:554/s?ch=1", "rtsp", "rtsp://u:pw@cam:554/s?ch=1", {}),
        ("rtsps://cam/s", "rtsp", "rtsps://cam/s", {}),
        ("http://cam/video.mjpg", "network", "http://cam/video.mjpg", {}),
        ("/data/a.mp4", "file", "/data/a.mp4", {"pace": False, "loop": False}),
        ("clips/a.mkv?pace=1&loop=true", "file", "clips/a.mkv", {"pace": True, "loop": True}),
        ("file:///data/a%20b.mp4?loop=1", "file", "/data/a b.mp4", {"loop": True}),
        ("/dev/video0", "v4l2", "/dev/video0", {"input_format": "v4l2"}),
        (
            "v4l2:///dev/video2?size=640x480&fps=30&format=mjpeg",
            "v4l2",
            "/dev/video2",
            {"options": {"video_size": "640x480", "framerate": "30", "input_format": "mjpeg"}},
        ),
        ("synthetic://?seed=3&fps=10", "synthetic", "synthetic://?seed=3&fps=10", {"pace": True}),
        ("synthetic://?seed=3&pace=0", "synthetic", "synthetic://?seed=3", {"pace": False}),
        ("synthetic://", "synthetic", "synthetic://", {"pace": True}),
    ],
)
def test_parse(url: str, kind: str, target: str, extra: dict[str, object]) -> None:
    spec = parse_source_url(url)
    assert (spec.kind, spec.target) == (kind, target)
    for name, value in extra.items():
        assert getattr(spec, name) == value


def test_display_is_redacted() -> None:
    spec = parse_source_url("rtsp://admin:hunter2@cam/s")
    assert spec.display == "rtsp://admin:***@cam/s"
    assert "hunter2" in spec.target  # FFmpeg still gets the password


def test_a_path_with_a_question_mark_that_exists_is_a_file(tmp_path: Path) -> None:
    odd = tmp_path / "what?.mp4"
    odd.write_bytes(b"")
    spec = parse_source_url(str(odd))
    assert spec.target == str(odd) and not spec.pace


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("", "url` is empty"),
        ("ftp://host/a.mp4", "unsupported URL scheme 'ftp'"),
        ("gopher://u:secret@h/", "unsupported URL scheme"),
        ("rtsp:///path", "has no host"),
        ("a.mp4?speed=2", "unknown option 'speed'.*allowed: pace, loop"),
        ("a.mp4?pace=maybe", "pace='maybe' must be 1 or 0"),
        ("v4l2:///dev/video0?size=big", "size must look like 640x480"),
        ("v4l2:///dev/video0?gain=3", "unknown option 'gain'"),
        ("v4l2://", "needs a device"),
    ],
)
def test_errors_name_the_problem(url: str, message: str) -> None:
    with pytest.raises(SourceError, match=message) as info:
        parse_source_url(url, camera_id="gate")
    assert "camera 'gate'" in str(info.value)
    assert "secret" not in str(info.value)


def test_check_exists(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match=r"video file .*nope.mp4 does not exist"):
        parse_source_url(str(tmp_path / "nope.mp4")).check_exists("c")
    with pytest.raises(SourceError, match="is a directory"):
        parse_source_url(str(tmp_path)).check_exists("c")
    with pytest.raises(
        SourceError, match=r"V4L2 device /dev/video77 does not exist.*ls /dev/video"
    ):
        parse_source_url("/dev/video77").check_exists("c")


@pytest.mark.parametrize(
    ("url", "kind", "live"),
    [
        ("srt://cam:9000?streamid=a", "network", True),
        ("rtmps://cam/live/key", "network", True),
        ("RTSP://cam/s", "rtsp", True),
        ("file:///a.mp4", "file", False),
        ("/data/a.mp4", "file", False),
        ("/dev/video3", "v4l2", True),
        ("synthetic://?seed=1", "synthetic", True),
        ("ftp://h/a.mp4", None, False),
    ],
)
def test_the_scheme_table_decides_kind_and_liveness(url: str, kind: str | None, live: bool) -> None:
    if kind is None:
        assert url_scheme(url) not in SCHEMES
        assert not live
    else:
        spec = parse_source_url(url)
        assert spec.kind == kind
        assert spec.live is live
        if url_scheme(url):
            assert SCHEMES[url_scheme(url)].kind == kind


def test_a_bad_port_and_no_camera_prefix() -> None:
    with pytest.raises(SourceError) as info:
        parse_source_url("rtsp://u:secret@cam:99999/s", camera_id=None)
    message = str(info.value)
    assert message.startswith("rtsp://u:***@cam:99999/s has a bad port")
    assert "secret" not in message
