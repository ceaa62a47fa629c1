"""V4L2 devices. There is no camera on CI machines: what can be checked without
one is checked here (errors and the retry loop through FFmpeg's real v4l2 input)."""

from __future__ import annotations

import pytest

from streamseg.ingest import Connection, ReconnectPolicy, SourceError, open_source
from tests.support.sources import SourceRunner


@pytest.mark.parametrize("url", ["/dev/video63", "v4l2:///dev/video63?size=640x480&fps=30"])
def test_missing_device_is_a_clear_error(url: str) -> None:
    with pytest.raises(SourceError, match=r"camera 'usb': V4L2 device /dev/video63 does not exist"):
        open_source(camera_id="usb", url=url)


def test_a_node_that_is_no_camera_keeps_retrying_with_the_reason() -> None:
    # /dev/null exists but answers no V4L2 ioctl: FFmpeg's v4l2 input refuses it
    source = open_source(
        camera_id="usb",
        url="v4l2:///dev/null",
        connection=Connection(ReconnectPolicy(initial=0.05, max_delay=0.2)),
    )
    assert source.live is True
    with SourceRunner(source) as run:
        run.wait_for(lambda: source.health.reconnects >= 2, 10, "retries")
        assert source.health.state in ("backing_off", "connecting")
        assert run.count() == 0
    assert "Inappropriate ioctl" in (source.health.last_error or "")
    assert source.health.state == "stopped"
