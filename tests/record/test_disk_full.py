"""Recording on a real small filesystem (a tmpfs the test mounts): a full disk stops
clips with one ``disk_full`` alert and a clear health state, and they resume
when space is back; retention deletes old clips as new ones are written."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import av
import numpy as np
import pytest

from streamseg.record.clips import ClipHook
from streamseg.record.config import ClipsConfig, RecordConfig, RetentionConfig
from streamseg.record.recorder import record_camera
from streamseg.record.retention import Retention
from streamseg.types import Event
from tests.support.rtsp import RtspServer
from tests.support.tmpfs import fill, tmpfs
from tests.support.video import count_frames

__all__ = ["tmpfs"]

KB = 1024
CLIP = 320 * KB  # a clip of the noisy source is at most this large


@pytest.fixture(scope="module")
def noisy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """8 s at 15 fps of noise (about 12 KB a frame: clips fill a small disk), keyframes 1/s."""
    path = tmp_path_factory.mktemp("src") / "noise.mp4"
    rng = np.random.default_rng(0)
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=15)
        stream.width, stream.height, stream.pix_fmt = 160, 120, "yuv420p"
        stream.options = {"g": "15", "keyint_min": "15", "sc_threshold": "0", "preset": "ultrafast"}
        for _ in range(120):
            image = rng.integers(0, 255, (120, 160, 3), np.uint8)
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path


def _alert(pts: float) -> Event:
    return Event(rule="dock", kind="enter", camera_id="cam", time=0.0, frame_seq=0, pts=pts)


def _play(hook: ClipHook, source: Path, actions: dict[float, Callable[[], object]]) -> None:
    """``source`` through ``hook`` as camera ``cam``; ``actions[t]()`` runs at stream time t."""
    with av.open(str(source)) as container:
        stream = container.streams.video[0]
        for packet in container.demux(stream):
            if not packet.size:
                continue
            hook.on_packet("cam", packet, stream)
            t = round(float(packet.pts * packet.time_base), 3)
            if t in actions:
                actions[t]()


def _sizes(root: Path) -> dict[Path, os.stat_result]:
    """The camera's clips and their stats, leaving out any that retention
    removes (on its own thread) between listing the folder and the stat."""
    found: dict[Path, os.stat_result] = {}
    for path in (root / "cam").glob("*.mp4"):
        try:
            found[path] = path.stat()
        except FileNotFoundError:
            continue
    return found


def _clips(root: Path) -> list[Path]:
    found = _sizes(root)
    return sorted(found, key=lambda p: found[p].st_mtime)


def test_a_full_disk_stops_clips_once_and_they_resume_when_space_is_back(
    noisy: Path, tmpfs: Callable[[int], Path]
) -> None:
    root = tmpfs(1024 * KB)
    retention = RetentionConfig(resume_free_mb=0.4, retry_s=0.01)
    clips = ClipsConfig(enabled=True, before_s=0.5, after_s=0.5)
    hook = ClipHook(config=RecordConfig(dir=str(root), clips=clips, retention=retention))
    published: list[Event] = []
    hook.on_alert = published.append
    ballast = root / "ballast.bin"
    seen: dict[str, object] = {}

    def fill_disk() -> None:
        fill(ballast)
        seen["free_when_full"] = hook.retention.free_bytes()

    def look() -> None:
        seen["full"] = hook.health()
        seen["state"] = hook.health(["cam", "gate"])["cameras"]

    actions = {
        1.0: lambda: hook.on_events([_alert(1.0)]),  # recorded: the disk has room
        2.0: fill_disk,
        3.0: lambda: hook.on_events([_alert(3.0)]),  # its clip finds the disk full
        4.0: lambda: hook.on_events([_alert(4.0), _alert(4.2)]),  # stopped: no clips
        4.6: look,
        5.0: lambda: (ballast.unlink(), time.sleep(0.05)),  # space back, retry_s gone by
        6.0: lambda: hook.on_events([_alert(6.0)]),
    }
    _play(hook, noisy, actions)
    files = hook.close()
    assert seen["free_when_full"] == 0
    full = seen["full"]
    assert isinstance(full, dict)
    assert full["state"] == "disk_full" and full["stops"] == 1
    assert seen["state"] == {"cam": "disk_full", "gate": "disk_full"}
    assert "No space left on device" in full["last_error"] and full["clips_missed"] == 2
    # One alert for the stop, whatever failed after it.
    assert [(e.rule, e.kind, e.camera_id) for e in published] == [("record", "disk_full", "cam")]
    assert published[0].extra["dir"] == str(root) and published[0].extra["free_mb"] < 0.01
    after = hook.health()
    assert after["state"] == "recording" and after["stops"] == 1 and after["free_mb"] > 0.4
    # The clip before the stop and the one after it are whole and playable; the
    # clip the disk cut short was given up (an empty file is removed).
    assert [round(f.start, 1) for f in files] == [0.0, 5.0]
    for f in files:
        assert count_frames(f.path) == f.packets > 0
    assert {p.name for p in _clips(root) if p.stat().st_size} == {f.path.name for f in files}


def test_retention_runs_as_clips_are_written_and_at_start_up(noisy: Path, tmp_path: Path) -> None:
    root = tmp_path / "rec"
    old = root / "cam" / "cam_old_clip.mp4"
    old.parent.mkdir(parents=True)
    old.write_bytes(os.urandom(10 * KB))
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    limit = 700 * KB
    retention = RetentionConfig(max_age_hours=1, camera_max_mb=limit / 2**20)
    clips = ClipsConfig(enabled=True, before_s=0.2, after_s=0.6, cameras=("cam",))
    hook = ClipHook(config=RecordConfig(dir=str(root), clips=clips, retention=retention))
    assert not old.exists()  # at start-up: too old
    assert hook.health(["cam", "gate"])["cameras"] == {"cam": "recording", "gate": "off"}
    assert hook.health()["removed"] == {"age": {"files": 1, "bytes": 10 * KB}}
    totals: list[int] = []

    def stored() -> int:
        return sum(s.st_size for s in _sizes(root).values())

    def alert(t: float) -> Callable[[], None]:
        def run() -> None:
            # Retention runs off the camera's thread, as soon as a clip starts or ends.
            deadline = time.monotonic() + 5
            while stored() > limit + CLIP and time.monotonic() < deadline:
                time.sleep(0.01)
            totals.append(stored())
            hook.on_events([_alert(t)])

        return run

    _play(hook, noisy, {float(t): alert(float(t)) for t in range(1, 8)})
    written = hook.close()
    kept = _clips(root)
    health = hook.health()
    largest = max(f.path.stat().st_size if f.path.exists() else 0 for f in written)
    assert len(written) == 7 and 200 * KB < largest < CLIP  # about 290 KB each
    # The camera keeps under the limit, oldest first: the newest clips stay.
    assert health["removed"]["camera_size"]["files"] == 7 - len(kept) >= 3
    assert [p.name for p in kept] == [f.path.name for f in written[-len(kept) :]]
    assert health["bytes"]["cam"] == sum(p.stat().st_size for p in kept) <= limit
    assert max(totals) <= limit + CLIP  # checked as written: over by a clip at most


def test_record_command_on_a_full_disk_stops_writing_and_ends_normally(
    noisy: Path, tmpfs: Callable[[int], Path]
) -> None:
    root = tmpfs(512 * KB)
    retention = Retention(root=root, config=RetentionConfig(max_mb=0.3))
    result = record_camera(
        url=str(noisy),
        camera_id="cam",
        out_dir=root / "cam",
        duration_s=8,
        segment_s=1.0,
        retention=retention,
    )
    # 1.4 MB of footage, kept under 0.3 MB: the oldest segments go as new ones start.
    assert result.disk_full_stops == 0 and result.removed >= 3
    assert sum(p.stat().st_size for p in (root / "cam").iterdir()) <= 0.3 * 2**20 + 200 * KB
    fill(root / "ballast.bin")
    full = record_camera(
        url=str(noisy), camera_id="cam", out_dir=root / "cam2", duration_s=2, segment_s=1.0
    )
    assert full.disk_full_stops == 1 and full.files == []


def test_record_from_a_live_camera_resumes_when_space_is_back(
    rtsp_server: RtspServer, tmpfs: Callable[[int], Path]
) -> None:
    root = tmpfs(512 * KB)
    ballast = root / "ballast.bin"
    fill(ballast)  # full from the start: the first segment cannot be written
    retention = Retention(root=root, config=RetentionConfig(resume_free_mb=0.25, retry_s=0.2))
    freed = threading.Timer(2.0, ballast.unlink)  # space comes back while it records
    freed.start()
    try:
        result = record_camera(
            url=rtsp_server.url,
            camera_id="gate",
            out_dir=root / "gate",
            duration_s=5.0,
            segment_s=1.0,
            retention=retention,
        )
    finally:
        freed.join()
    assert result.disk_full_stops == 1 and result.files
    for f in result.files:  # what was written after the space came back plays
        assert count_frames(f.path) == f.packets > 0
    # About 3 of the 5 s: the first 2 s (and up to the next keyframe) found no space.
    assert 1.0 <= sum(f.duration for f in result.files) <= 3.5
