"""RTSP cameras against a real GStreamer RTSP server: frames, reconnects, stalls."""

from __future__ import annotations

import dataclasses
import itertools
import logging
import socket
import time
from collections.abc import Callable

import pytest

from streamseg.ingest import Connection, ReconnectPolicy, SourceError, open_source
from tests.support.rtsp import RtspServer
from tests.support.servers import free_port
from tests.support.sources import SourceRunner

pytestmark = pytest.mark.rtsp

FAST = Connection(
    ReconnectPolicy(initial=0.2, max_delay=1.0), connect_timeout=3.0, read_timeout=2.0
)


def states(runner: SourceRunner) -> list[str]:
    return [str(s) for _, s in runner.source.health_history()]


def test_rtsp_frames_have_sane_timestamps(rtsp_server: RtspServer) -> None:
    source = open_source(camera_id="cam", url=rtsp_server.url, connection=FAST)
    assert source.live is True
    with SourceRunner(source) as run:
        run.wait_frames(20, timeout=15)
        # the server sends RTCP sender reports every ~0.5 s: camera time follows
        run.wait_for(lambda: run.frames[-1].camera_time is not None, 10, "camera_time")
        assert source.health.state == "streaming"
    frames = run.frames
    assert [f.seq for f in frames] == list(range(len(frames)))
    assert all(f.image.shape == (120, 160, 3) for f in frames)
    pts = [f.pts for f in frames if f.pts is not None]
    assert len(pts) >= len(frames) - 1
    steps = [b - a for a, b in itertools.pairwise(pts)]
    assert all(s == pytest.approx(1 / 15, abs=2e-3) for s in steps)
    last = frames[-1]
    assert abs(last.capture_time - time.time()) < 5
    assert last.camera_time is not None
    # same host, same clock: the camera's time of a frame is a little before we read it
    assert -0.1 < last.capture_time - last.camera_time < 1.5
    h = source.health
    assert h.frames == len(frames) and h.reconnects == 0 and h.last_error is None
    assert states(run) == ["connecting", "streaming", "stopped"]


def test_server_restart_reconnects_and_frames_resume(rtsp_server: RtspServer) -> None:
    source = open_source(camera_id="cam", url=rtsp_server.url, connection=FAST)
    with SourceRunner(source) as run:
        run.wait_frames(5, timeout=15)
        rtsp_server.kill()
        run.wait_for(lambda: source.health.state in ("backing_off", "connecting"), 5, "loss")
        before = run.count()
        time.sleep(1.0)  # a few failed attempts while the server is away
        assert source.health.reconnects >= 1
        assert "cannot open" in (source.health.last_error or "") or "lost" in (
            source.health.last_error or ""
        )
        rtsp_server.start()
        run.wait_for(lambda: run.count() >= before + 10, 20, "frames after restart")
        assert source.health.state == "streaming"
    seen = states(run)
    first_back = seen.index("backing_off")
    assert seen[:2] == ["connecting", "streaming"]
    assert "streaming" in seen[first_back:]  # streaming again after backing off
    assert source.health.reconnects >= 2
    assert [f.seq for f in run.frames] == list(range(run.count()))  # seq never restarts


def test_stall_is_detected_within_read_timeout(rtsp_server: RtspServer) -> None:
    source = open_source(camera_id="cam", url=rtsp_server.url, connection=FAST)
    with SourceRunner(source) as run:
        run.wait_frames(5, timeout=15)
        rtsp_server.stall()
        t_stall = time.time()
        run.wait_for(lambda: "stalled" in states(run), FAST.read_timeout + 1.5, "stalled")
        stalled_at = next(t for t, s in source.health_history() if s == "stalled")
        last_frame = source.health.last_frame_time
        assert last_frame is not None
        # declared stalled within read_timeout of the last frame (+ polling slack)
        assert stalled_at - last_frame <= FAST.read_timeout + 0.5
        assert stalled_at - t_stall <= FAST.read_timeout + 0.5
        assert "read timeout" in (source.health.last_error or "")
        assert source.health.stalls >= 1
        rtsp_server.resume()
        before = run.count()
        run.wait_for(lambda: run.count() >= before + 5, 15, "frames after the stall")
    seen = states(run)
    i = seen.index("stalled")
    # stalled while waiting to reopen; then a new connection that streams again
    assert seen[i + 1] == "connecting" and "streaming" in seen[i + 1 :]
    assert source.health.reconnects >= 1


def test_stop_returns_promptly_while_stalled(rtsp_server: RtspServer) -> None:
    source = open_source(
        camera_id="cam", url=rtsp_server.url, connection=dataclasses.replace(FAST, read_timeout=4.0)
    )
    run = SourceRunner(source).start()
    run.wait_frames(3, timeout=15)
    rtsp_server.stall()
    time.sleep(0.3)
    t0 = time.monotonic()
    run.close(timeout=10)
    assert time.monotonic() - t0 <= 4.0 / 2 + 1.0  # a blocked read ends after read_timeout/2
    assert source.health.state == "stopped"


def test_one_dead_camera_does_not_disturb_another(rtsp_server: RtspServer) -> None:
    dead_url = f"rtsp://127.0.0.1:{free_port()}/stream"  # nothing listens there
    good = open_source(camera_id="good", url=rtsp_server.url, connection=FAST)
    dead = open_source(camera_id="dead", url=dead_url, connection=FAST)
    with SourceRunner(good) as g, SourceRunner(dead) as d:
        g.wait_frames(5, timeout=15)
        t0, n0 = time.monotonic(), g.count()
        time.sleep(2.0)
        rate = (g.count() - n0) / (time.monotonic() - t0)
        assert rate > 10  # 15 fps camera keeps streaming
        assert d.count() == 0
        assert dead.health.state in ("backing_off", "connecting")
        assert dead.health.reconnects >= 2
        assert "Connection refused" in (dead.health.last_error or "")
        assert good.health.state == "streaming" and good.health.reconnects == 0


def test_connect_timeout_on_a_server_that_never_answers() -> None:
    with socket.socket() as silent:  # accepts TCP connections, never speaks RTSP
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"rtsp://127.0.0.1:{silent.getsockname()[1]}/stream"
        source = open_source(
            camera_id="mute", url=url, connection=dataclasses.replace(FAST, connect_timeout=1.0)
        )
        with SourceRunner(source) as run:
            run.wait_state("backing_off", timeout=5)
        assert "connect timeout" in (source.health.last_error or "")
        assert source.health.reconnects == 0 or "connect timeout" in source.health.last_error


def test_max_fps_on_a_live_stream(rtsp_server: RtspServer) -> None:
    source = open_source(camera_id="cam", url=rtsp_server.url, max_fps=5, connection=FAST)
    with SourceRunner(source) as run:
        run.wait_frames(8, timeout=20)
    h = source.health
    assert h.emitted == run.count()
    assert h.dropped_rate_limit >= 2 * h.emitted - 2  # 15 fps -> 5 fps keeps 1 in 3
    seqs = [f.seq for f in run.frames]
    assert all(b - a == 3 for a, b in itertools.pairwise(seqs[1:]))


def test_credentials_never_leak(
    rtsp_server_factory: Callable[..., RtspServer], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    server = rtsp_server_factory(user="viewer", password="s3cr3t-pw")
    wrong = server.url.replace("s3cr3t-pw", "wr0ng-pw")
    right = open_source(camera_id="right", url=server.url, connection=FAST)
    bad = open_source(camera_id="bad", url=wrong, connection=FAST)
    assert right.url == f"rtsp://viewer:***@127.0.0.1:{server.port}/stream"
    assert "s3cr3t" not in repr(right)
    with SourceRunner(right) as r, SourceRunner(bad) as b:
        r.wait_frames(5, timeout=15)
        b.wait_for(lambda: bad.health.reconnects >= 1, 10, "failed attempts")
    err = bad.health.last_error or ""
    assert "401" in err or "Unauthorized" in err or "authoriz" in err.lower()
    text = caplog.text + err + str(bad.health) + str(right.health)
    assert "wr0ng-pw" not in text and "s3cr3t-pw" not in text
    assert caplog.text  # the retries were logged (redacted)


def test_failed_after_max_attempts_names_the_camera() -> None:
    url = f"rtsp://admin:pw123@127.0.0.1:{free_port()}/s"
    policy = ReconnectPolicy(initial=0.05, max_delay=0.1, max_attempts=2)
    source = open_source(
        camera_id="gone", url=url, connection=Connection(policy, connect_timeout=2)
    )
    with SourceRunner(source) as run:
        assert run.join(10)
    assert isinstance(run.error, SourceError)
    message = str(run.error)
    assert "camera 'gone'" in message and "gave up after 2 attempts" in message
    assert "pw123" not in message and "admin:***@" in message
    assert source.health.state == "failed"
