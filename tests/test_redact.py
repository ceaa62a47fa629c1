"""redact_url / redact_text: secrets never survive, everything else does."""

from __future__ import annotations

import pytest

from streamseg.redact import redact_text, redact_url, url_password

CASES = [
    ("rtsp://admin:s3cret@10.0.0.7:554/stream1", "rtsp://admin:***@10.0.0.7:554/stream1"),
    ("rtsp://admin@10.0.0.7/stream1", "rtsp://admin@10.0.0.7/stream1"),
    ("rtsp://10.0.0.7/stream1", "rtsp://10.0.0.7/stream1"),
    ("redis://:pw@localhost:6379/0", "redis://:***@localhost:6379/0"),
    ("rediss://user:p%40ss@host:6380/1", "rediss://user:***@host:6380/1"),
    # a password holding '@' and ':' (unencoded, as users type them)
    ("rtsp://u:a@b:c@cam.local/live", "rtsp://u:***@cam.local/live"),
    ("http://cam/api?user=a&password=xyz&fps=5", "http://cam/api?user=a&password=***&fps=5"),
    ("http://cam/api?TOKEN=abc", "http://cam/api?TOKEN=***"),
    ("/data/clips/a.mp4", "/data/clips/a.mp4"),
    ("synthetic://?seed=1&fps=15", "synthetic://?seed=1&fps=15"),
    ("v4l2:///dev/video0", "v4l2:///dev/video0"),
    ("", ""),
    ("http://cam/api?t=1:2@x", "http://cam/api?t=1:2@x"),
]


@pytest.mark.parametrize(("url", "expected"), CASES)
def test_redact_url(url: str, expected: str) -> None:
    assert redact_url(url) == expected


def test_redact_url_never_raises_on_garbage() -> None:
    # urlsplit rejects an unbalanced IPv6 bracket; the regex fallback still redacts.
    assert redact_url("rtsp://a:pw@[::1/x") == "rtsp://a:***@[::1/x"


def test_redact_text_finds_urls_and_known_secrets() -> None:
    msg = "Failed to open rtsp://cam:hunter2@1.2.3.4/s (401); retry rtsp://x:y@h/p"
    out = redact_text(msg)
    assert "hunter2" not in out and ":y@" not in out
    assert "rtsp://cam:***@1.2.3.4/s" in out and "rtsp://x:***@h/p" in out
    assert redact_text("bad password p@ss/word here", "p@ss/word") == "bad password *** here"
    assert redact_text("quoted p%40ss here", "p@ss") == "quoted *** here"


def test_url_password() -> None:
    assert url_password("rtsp://u:p%40ss@h/x") == "p@ss"
    assert url_password("rtsp://h/x") is None
