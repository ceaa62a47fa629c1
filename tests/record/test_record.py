"""Recording by remuxing: segments, clips around alerts, the record command."""

from __future__ import annotations

import json
from pathlib import Path

import av
import pytest

from streamseg.ingest.policy import Connection
from streamseg.ingest.spec import SourceError
from streamseg.record.clips import ClipHook
from streamseg.record.config import ClipsConfig, RecordConfig
from streamseg.record.files import StoredPacket
from streamseg.record.recorder import record_camera
from streamseg.record.segments import ClipRecorder
from streamseg.types import Event
from tests.support.video import count_frames, video_duration, write_h264


@pytest.fixture
def source(tmp_path: Path) -> Path:
    """6 seconds at 15 fps, a keyframe every second, B-frames."""
    return write_h264(tmp_path / "src.mp4", frames=90, fps=15, gop=15)


@pytest.mark.parametrize("container", ["mp4", "mkv"])
def test_segments_are_playable_and_keep_every_frame(
    source: Path, tmp_path: Path, container: str
) -> None:
    result = record_camera(
        url=str(source),
        camera_id="cam 1",
        out_dir=tmp_path / "out",
        duration_s=100,
        segment_s=2.0,
        container=container,
    )
    assert [f.path.suffix for f in result.files] == [f".{container}"] * 3
    counts = [count_frames(f.path) for f in result.files]
    assert counts == [30, 30, 30] and result.packets == 90
    for f in result.files:
        assert f.path.name.startswith("cam_1_")
        assert video_duration(f.path) == pytest.approx(2.0, abs=2e-3)  # mkv: 1 ms clock
    # The first frame of each segment is the source frame at its start time.
    with av.open(str(result.files[1].path)) as c:
        first = next(c.decode(video=0)).to_ndarray(format="gray")
    assert abs(int(first[0, 0]) - 30 * 5 % 256) <= 3  # brightness encodes the frame index


def test_duration_limits_the_footage(source: Path, tmp_path: Path) -> None:
    result = record_camera(
        url=str(source), camera_id="c", out_dir=tmp_path / "o", duration_s=2.5, segment_s=60
    )
    assert len(result.files) == 1
    # Decode-order cut: 2.5 s at 15 fps is 37.5 frames; all written ones decode.
    assert count_frames(result.files[0].path) == result.packets
    assert 36 <= result.packets <= 38


def test_missing_source_is_reported_without_password(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match=r"cannot open") as err:
        record_camera(
            url="rtsp://admin:hunter2@127.0.0.1:1/x",
            camera_id="c",
            out_dir=tmp_path,
            duration_s=1,
            connection=Connection(connect_timeout=2),
        )
    assert "hunter2" not in str(err.value)


def _packets(path: Path) -> tuple[av.container.InputContainer, list[StoredPacket]]:
    c = av.open(str(path))
    return c, [StoredPacket.from_av(p) for p in c.demux(video=0) if p.size]


def test_clip_covers_before_and_after_the_alert(source: Path, tmp_path: Path) -> None:
    container, packets = _packets(source)
    rec = ClipRecorder(
        out_dir=tmp_path,
        camera_id="c",
        template=container.streams.video[0],
        before_s=1.0,
        after_s=1.0,
    )
    for p in packets:
        rec.push(p)
        if abs(p.time - 3.0) < 1e-9:
            rec.trigger(3.0, tag="zone_enter")
    files = rec.close()
    assert len(files) == 1 and files[0].path.name.endswith("_zone_enter.mp4")
    # From the keyframe at 2.0 s to 1 s after the alert (decode order): 2 s.
    assert files[0].start == pytest.approx(2.0)
    assert count_frames(files[0].path) == files[0].packets
    assert 29 <= files[0].packets <= 31


def test_alerts_extend_an_open_clip_up_to_max(source: Path, tmp_path: Path) -> None:
    container, packets = _packets(source)
    template = container.streams.video[0]
    rec = ClipRecorder(
        out_dir=tmp_path / "a",
        camera_id="c",
        template=template,
        before_s=0.5,
        after_s=1.0,
        max_s=10,
    )
    rec.trigger(2.2)  # announced before its packets arrive: waits for them
    rec.trigger(3.0)
    for p in packets:
        rec.push(p)
    (clip,) = rec.close()
    assert clip.start == pytest.approx(1.0)  # keyframe at or before 2.2 - 0.5
    assert 2.9 <= clip.duration <= 3.1  # until 3.0 + 1.0
    capped = ClipRecorder(
        out_dir=tmp_path / "b",
        camera_id="c",
        template=template,
        before_s=0.5,
        after_s=1.0,
        max_s=1.5,
    )
    for p in packets:
        capped.push(p)
        if abs(p.time - 2.0) < 1e-9 or abs(p.time - 2.4) < 0.03:
            capped.trigger(p.time)
    (short,) = capped.close()
    # max_s holds up to the stream's frame reordering (two B-frames here).
    assert 1.4 <= short.duration <= 1.5 + 3 / 15 and count_frames(short.path) == short.packets


def test_an_alert_keeps_its_finished_clip_when_the_next_clip_overlaps_it(
    source: Path, tmp_path: Path
) -> None:
    container, packets = _packets(source)
    rec = ClipRecorder(
        out_dir=tmp_path,
        camera_id="c",
        template=container.streams.video[0],
        before_s=1.0,
        after_s=0.5,
    )
    answers = []
    for p in packets:
        rec.push(p)
        if abs(p.time - 1.0) < 1e-9:
            rec.trigger(1.0)  # clip A: keyframe 0.0 to 1.5 s
        if abs(p.time - 2.0) < 1e-9:
            answers.append(rec.clip_at(1.2))  # A finished
            rec.trigger(2.0)  # clip B opens at keyframe 1.0 s: its pre-roll overlaps A
            answers.append(rec.clip_at(1.2))
            answers.append(rec.clip_at(1.8))
    first, second = rec.close()
    # 1.2 s lies in both clips: the finished A stays the answer (it was served
    # as ready, it must not turn into "still being recorded").
    assert answers[0] == (first.path, True) and answers[1] == (first.path, True)
    assert answers[2] == (second.path, False)
    assert second.start < first.start + first.duration


def _event(camera: str, kind: str, pts: float) -> Event:
    return Event(rule="dock", kind=kind, camera_id=camera, time=0.0, frame_seq=0, pts=pts)


def test_clip_hook_filters_alerts(source: Path, tmp_path: Path) -> None:
    cfg = RecordConfig(
        dir=str(tmp_path / "rec"),
        clips=ClipsConfig(enabled=True, before_s=0.5, after_s=0.5, kinds=("enter",)),
    )
    hook = ClipHook(config=cfg)
    container = av.open(str(source))
    stream = container.streams.video[0]
    for packet in container.demux(stream):
        if not packet.size:
            continue
        hook.on_packet("cam", packet, stream)
        t = float(packet.pts * packet.time_base)
        if abs(t - 2.0) < 1e-9:
            hook.on_events([_event("cam", "enter", 2.0), _event("cam", "exit", 2.0)])
            opened = hook.clip_for("cam", 2.0)  # the console's link: known while it records
        if abs(t - 4.0) < 1e-9:
            hook.on_events([_event("other", "enter", 4.0)])
    done = hook.clip_for("cam", 2.0)
    assert hook.clip_for("cam", 5.0) is None and hook.clip_for("other", 4.0) is None
    assert hook.clip_for("cam", None) is None
    files = hook.close()
    assert len(files) == 1 and files[0].path.parent == tmp_path / "rec" / "cam"
    assert opened == (files[0].path, False) and done == (files[0].path, True)
    assert hook.ignored_events == 2
    assert count_frames(files[0].path) == files[0].packets > 0


def _play(hook: ClipHook, source: Path, alert_at: float | None = None) -> None:
    """One pass of ``source`` through ``hook`` as camera ``cam`` (a new stream, as
    a reconnect or a looping file gives), with an ``enter`` alert at ``alert_at``."""
    with av.open(str(source)) as container:
        stream = container.streams.video[0]
        for packet in container.demux(stream):
            if not packet.size:
                continue
            hook.on_packet("cam", packet, stream)
            if alert_at is not None and abs(float(packet.pts * packet.time_base) - alert_at) < 1e-9:
                hook.on_events([_event("cam", "enter", alert_at)])


def test_an_alerts_clip_is_found_after_the_source_reopens(source: Path, tmp_path: Path) -> None:
    """A looping file or a reconnect gives a new stream (and recorder): the
    alerts of the first pass still find their finished clip."""
    cfg = RecordConfig(
        dir=str(tmp_path / "rec"), clips=ClipsConfig(enabled=True, before_s=0.5, after_s=5.0)
    )
    hook = ClipHook(config=cfg)
    _play(hook, source, alert_at=2.0)
    assert hook.clip_for("cam", 2.0) is not None  # open: after_s runs past the end
    _play(hook, source)
    found = hook.clip_for("cam", 2.0)
    (clip,) = hook.close()
    assert found == (clip.path, True)


def test_the_clip_lookup_is_bounded_and_the_files_stay(source: Path, tmp_path: Path) -> None:
    """A service that runs for months: the hook remembers the newest ``remember``
    clips per source for lookups; older clips stay on disk, unlooked-up."""
    cfg = RecordConfig(
        dir=str(tmp_path / "rec"), clips=ClipsConfig(enabled=True, before_s=0.5, after_s=0.5)
    )
    hook = ClipHook(config=cfg, remember=1)
    for when in (1.0, 3.0, 5.0):  # three passes (a looping file), one alert in each
        _play(hook, source, alert_at=when)
    assert hook.clip_for("cam", 1.2) is None  # the first pass's clip: forgotten
    third = hook.clip_for("cam", 5.2)
    second = hook.clip_for("cam", 3.2)  # the replaced recorder's newest
    assert second is not None and second[1] and third is not None and third[1]
    assert [f.path for f in hook.files()] == [second[0], third[0]]
    assert [f.path for f in hook.close()] == [third[0]]  # the third pass's retired too
    assert len(list((tmp_path / "rec" / "cam").iterdir())) == 3


def test_record_command(source: Path, tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "segments"
    proc = cli(
        "record",
        "--camera",
        "dock",
        "--url",
        str(source),
        "--duration",
        "4",
        "--segment-seconds",
        "2",
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert [f["packets"] for f in report["files"]] == [30, 30]
    assert sum(count_frames(Path(f["path"])) for f in report["files"]) == 60
    bad = cli("record", "--camera", "x", "--url", str(source), "--duration", "0")
    assert bad.returncode == 2 and "--duration must be positive" in bad.stderr


def test_record_a_camera_of_a_pipeline(source: Path, tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    pipeline = tmp_path / "pipeline.yaml"
    pipeline.write_text(
        "cameras:\n"
        f"  - id: dock\n    url: {source.name}\n"
        "  - id: synth\n    url: synthetic://?seed=1\n"
        "model:\n  missing_weights: random\n"
        f"record:\n  dir: {tmp_path / 'rec'}\n  container: mkv\n  segment_s: 3\n"
    )
    proc = cli("record", str(pipeline), "--camera", "dock", "--duration", "6")
    assert proc.returncode == 0, proc.stderr
    files = [Path(f["path"]) for f in json.loads(proc.stdout)["files"]]
    assert [f.parent for f in files] == [tmp_path / "rec" / "dock"] * 2
    assert [f.suffix for f in files] == [".mkv", ".mkv"]
    assert [count_frames(f) for f in files] == [45, 45]
    missing = cli("record", str(pipeline), "--camera", "gate", "--duration", "1")
    assert missing.returncode == 2 and "no camera 'gate' (cameras: dock, synth)" in missing.stderr
    synthetic = cli("record", str(pipeline), "--camera", "synth", "--duration", "1")
    assert synthetic.returncode == 2 and "synthetic scene" in synthetic.stderr


def _payloads(path: Path) -> list[bytes]:
    with av.open(str(path)) as c:
        return [bytes(p) for p in c.demux(video=0) if p.size]


def _pixels(path: Path) -> list[bytes]:
    with av.open(str(path)) as c:
        return [f.to_ndarray(format="yuv420p").tobytes() for f in c.decode(video=0)]


def test_segments_are_a_remux_of_the_source(source: Path, tmp_path: Path) -> None:
    """Same compressed bytes, same codec parameters, bit-identical decoded frames."""
    result = record_camera(
        url=str(source), camera_id="c", out_dir=tmp_path / "o", duration_s=100, segment_s=2.0
    )
    assert b"".join(b for f in result.files for b in _payloads(f.path)) == b"".join(
        _payloads(source)
    )
    assert [p for f in result.files for p in _pixels(f.path)] == _pixels(source)
    with av.open(str(source)) as src, av.open(str(result.files[0].path)) as out:
        a, b = src.streams.video[0].codec_context, out.streams.video[0].codec_context
        assert (a.name, a.width, a.height, a.extradata) == (b.name, b.width, b.height, b.extradata)


def test_record_config_errors_are_clear(source: Path, tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    pipeline = tmp_path / "pipeline.yaml"
    pipeline.write_text(
        f"cameras:\n  - id: dock\n    url: {source}\nmodel:\n  missing_weights: random\n"
        "record:\n  container: avi\n  segment_s: -1\n  clip: {}\n"
    )
    proc = cli("record", str(pipeline), "--camera", "dock", "--duration", "1")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    for line, field in ((7, "record.container"), (8, "record.segment_s"), (9, "record.clip")):
        assert f"{pipeline}:{line}: {field}" in proc.stderr
    cases = [
        (("--url", str(source), "--segment-seconds", "0"), 2, "--segment-seconds must be positive"),
        ((str(tmp_path / "nope.yaml"),), 2, "nope.yaml: file not found"),
        ((), 2, "give PIPELINE (with --camera) or --url"),
        (("--url", str(tmp_path / "gone.mp4")), 1, "gone.mp4 does not exist"),
        (("--url", str(pipeline)), 1, "cannot open"),  # not a video
    ]
    for args, code, message in cases:
        proc = cli("record", "--camera", "dock", "--duration", "1", *args)
        assert proc.returncode == code and message in proc.stderr, (args, proc.stderr)
        assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_a_file_without_video_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "tone.wav"
    with av.open(str(path), "w") as out:
        stream = out.add_stream("pcm_s16le", rate=8000)
        frame = av.AudioFrame(format="s16", layout="mono", samples=800)
        frame.planes[0].update(bytes(1600))
        frame.sample_rate = 8000
        for packet in stream.encode(frame):
            out.mux(packet)
    with pytest.raises(SourceError, match=r"tone\.wav has no video stream"):
        record_camera(url=str(path), camera_id="c", out_dir=tmp_path, duration_s=1)
