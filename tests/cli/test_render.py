"""``streamseg render``: a synthetic clip plus its exact detections, to an MP4 with overlays.

The detections are the scene's ground truth encoded by the real
``MessageEncoder`` (masks as box crops, as serve publishes them); the
rendered MP4 is decoded again and compared with the clip: the same number
of frames, the mask of a large object tinted toward its track's colour,
frames without detections unchanged (within H.264's loss), the zone drawn.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import numpy as np
import pytest

from streamseg.cli import main
from streamseg.console.overlay import FILL_ALPHA, ZONE_COLOR, track_color
from streamseg.publish.encode import MessageEncoder
from streamseg.publish.redis_config import RedisConfig
from streamseg.publish.redis_streams import build_sink
from streamseg.synthetic.scene import SyntheticScene
from tests.support.render import (
    decode_frames,
    scene_clip,
    truth_items,
    truth_messages,
    write_jsonl,
)
from tests.support.serve import write_pipeline

pytestmark = pytest.mark.timeout(120)

FRAMES = 20
UNDRAWN = range(8, 12)  # frames with no detections message
DRAWN = [i for i in range(FRAMES) if i not in UNDRAWN]
CAMERA = "yard"
ZONE = [[20, 20], [140, 20], [140, 100], [20, 100]]


@pytest.fixture(scope="module")
def scene() -> SyntheticScene:
    return SyntheticScene(seed=5, height=120, width=160, num_frames=FRAMES, num_objects=2, noise=0)


@pytest.fixture(scope="module")
def clip(scene: SyntheticScene, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return scene_clip(tmp_path_factory.mktemp("clip"), scene)


@pytest.fixture(scope="module")
def detections(scene: SyntheticScene, clip: Path) -> Path:
    return write_jsonl(clip.parent / "detections.jsonl", truth_messages(scene, CAMERA, DRAWN))


def _pipeline(folder: Path, clip: Path) -> Path:
    config = {
        "version": 1,
        "cameras": [{"id": CAMERA, "url": f"file://{clip}"}],
        "model": {"arch": "maskrcnn_small", "weights": "none.pth", "missing_weights": "random"},
        "alerts": {
            "cameras": {
                CAMERA: {
                    "zones": {"pen": {"polygon": ZONE}},
                    "rules": [{"name": "in-pen", "type": "zone", "zone": "pen"}],
                }
            }
        },
    }
    return write_pipeline(folder, config)


def _render(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["render", *args, "--no-progress", "--crf", "14"])
    out, err = capsys.readouterr()
    return code, out, err


def _largest(scene: SyntheticScene, index: int) -> tuple[int, np.ndarray]:
    """Track id and mask of the frame's largest object, shrunk to its inner pixels."""
    gt = scene.frame(index).gt
    masks = gt.frame_masks().numpy()
    k = int(masks.reshape(len(masks), -1).sum(1).argmax())
    inner = masks[k].copy()
    for _ in range(3):  # away from the outline and H.264's blur at the edge
        inner[1:-1, 1:-1] &= inner[:-2, 1:-1] & inner[2:, 1:-1] & inner[1:-1, :-2] & inner[1:-1, 2:]
    inner[: int(gt.boxes[k, 1]) + 12] = False  # below the label, if it sits inside the box
    return int(gt.track_ids[k]), inner


def _check_tint(scene: SyntheticScene, clip: Path, out: Path) -> None:
    source, rendered = decode_frames(clip), decode_frames(out)
    assert len(rendered) == len(source) == FRAMES
    index = DRAWN[len(DRAWN) // 2]
    tid, inner = _largest(scene, index)
    assert inner.sum() >= 30, "the scene's largest object is too small for this test"
    before = source[index][inner].astype(np.float64)
    after = rendered[index][inner].astype(np.float64)
    expected = before * (1 - FILL_ALPHA) + np.asarray(track_color(tid)) * FILL_ALPHA
    # Per pixel (the object is textured); H.264 blurs chroma, the trail crosses the centre.
    err_tinted = np.abs(after - expected).mean()
    err_untouched = np.abs(after - before).mean()
    assert err_tinted < 20, (err_tinted, err_untouched)
    assert err_untouched > 2 * err_tinted, (err_tinted, err_untouched)
    for i in UNDRAWN:
        diff = np.abs(rendered[i].astype(np.int16) - source[i].astype(np.int16))
        assert diff.mean() < 2.5 and np.percentile(diff, 99) < 16, (i, diff.mean())


def test_render_from_jsonl_draws_masks_and_zones(
    scene: SyntheticScene,
    clip: Path,
    detections: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "out.mp4"
    pipeline = _pipeline(tmp_path, clip)
    code, stdout, err = _render(
        capsys, str(clip), "--input", str(detections), "-o", str(out), "--pipeline", str(pipeline)
    )
    assert code == 0, err
    summary = json.loads(stdout)
    assert summary["frames"] == FRAMES and summary["frames_drawn"] == len(DRAWN)
    assert summary["camera"] == CAMERA and summary["messages_outside_clip"] == 0
    assert summary["codec"] == "libx264" and summary["size"] == [160, 120]
    _check_tint(scene, clip, out)
    # The zone's top edge: yellow where the clip is not (a 2-pixel line loses some chroma).
    row, cols = ZONE[0][1], slice(60, 100)
    drawn = np.median(decode_frames(out)[DRAWN[0]][row, cols], 0)
    undrawn = np.median(decode_frames(clip)[DRAWN[0]][row, cols], 0)
    err = np.abs(drawn - np.asarray(ZONE_COLOR)).max()
    assert err < 60 and np.abs(undrawn - np.asarray(ZONE_COLOR)).max() > 2 * err, (drawn, undrawn)


def test_render_from_redis(
    scene: SyntheticScene,
    clip: Path,
    redis_server,  # type: ignore[no-untyped-def]
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    sink = build_sink(RedisConfig(url=redis_server.url))
    sink.start()
    try:
        encoder = MessageEncoder(arch="oracle", class_names=scene.class_names)
        items = [(r, []) for r in truth_items(scene, CAMERA, DRAWN)]
        other = [(r, []) for r in truth_items(scene, "other", [0, 1])]
        sink.submit(encoder.encode([*items, *other]))
        assert sink.flush(10)
    finally:
        assert sink.close() == 0
    out = tmp_path / "from-redis.mp4"
    code, stdout, err = _render(
        capsys, str(clip), "--redis", redis_server.url, "--camera", CAMERA, "-o", str(out)
    )
    assert code == 0, err
    assert json.loads(stdout)["frames_drawn"] == len(DRAWN)
    _check_tint(scene, clip, out)
    # Two cameras in Redis and none named: the error lists them.
    code, _, err = _render(capsys, str(clip), "--redis", redis_server.url, "-o", str(out))
    assert code == 2 and "other, yard" in err


def test_bad_input_is_refused_with_exit_2(
    clip: Path, detections: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.mp4"
    code, _, err = _render(
        capsys, str(tmp_path / "nope.mp4"), "--input", str(detections), "-o", str(out)
    )
    assert code == 2 and "nope.mp4: no such file" in err
    lines = detections.read_text().splitlines()
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([lines[0], lines[1], "{not json", *lines[2:]]) + "\n")
    code, _, err = _render(capsys, str(clip), "--input", str(bad), "-o", str(out))
    assert code == 2 and f"{bad}:3: not JSON" in err
    code, _, err = _render(
        capsys, str(clip), "--input", str(detections), "--camera", "gate", "-o", str(out)
    )
    assert code == 2 and "--camera gate: unknown camera" in err and CAMERA in err
    not_video = tmp_path / "notes.mp4"
    not_video.write_text("hello")
    code, _, err = _render(capsys, str(not_video), "--input", str(detections), "-o", str(out))
    assert code == 2 and "cannot open the clip" in err
    assert not out.exists()


def test_detections_of_another_size_are_refused(
    clip: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = SyntheticScene(seed=5, height=60, width=80, num_frames=2, num_objects=1, noise=0)
    det = write_jsonl(tmp_path / "small.jsonl", truth_messages(other, CAMERA, [1]))
    out = tmp_path / "out.mp4"
    code, _, err = _render(capsys, str(clip), "--input", str(det), "-o", str(out))
    assert code == 2 and "frame 1 is 160x120 but its detections are for 80x60" in err
    assert not out.exists()


def test_redis_unreachable_exits_1(
    clip: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.support.servers import free_port

    url = f"redis://:hunter2@127.0.0.1:{free_port()}/0"
    code, _, err = _render(capsys, str(clip), "--redis", url, "-o", str(tmp_path / "o.mp4"))
    assert code == 1 and "cannot read Redis" in err and "hunter2" not in err


def test_progress_bar_on_a_terminal(clip: Path, detections: Path, tmp_path: Path) -> None:
    """The real command: a tqdm bar when stderr is a terminal, none with --no-progress."""
    import fcntl
    import os
    import pty
    import struct
    import subprocess
    import sys
    import termios

    from tests.support.servers import cli_env

    def stderr_of(*extra: str) -> str:
        master, slave = pty.openpty()
        # A new terminal is 0 columns wide, and tqdm fits its bar to that: give it 100.
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
        args = [str(clip), "--input", str(detections), "-o", str(tmp_path / "o.mp4"), *extra]
        proc = subprocess.run(
            [sys.executable, "-m", "streamseg", "render", *args],
            stdout=subprocess.PIPE, stderr=slave, env=cli_env(), timeout=120,
        )  # fmt: skip
        os.close(slave)
        chunks = []
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # the terminal is closed and drained
                break
            if not data:
                break
            chunks.append(data)
        os.close(master)
        assert proc.returncode == 0, chunks
        return b"".join(chunks).decode(errors="replace")

    # tqdm redraws at most every 0.1 s, so the last state drawn depends on the speed.
    assert re.search(rf"render: +\d+%\|.*\| \d+/{FRAMES} \[", stderr_of())
    assert "render" not in stderr_of("--no-progress")


def test_zone_counts_come_from_the_pipeline_rules(
    scene: SyntheticScene, clip: Path, detections: Path, tmp_path: Path
) -> None:
    """With --pipeline, each drawn frame's zone label counts the tracks inside the zone."""
    from streamseg.cli.render import _camera_messages, _overlays, _rules_stage
    from streamseg.client.recording import Recording
    from streamseg.config import load_pipeline
    from streamseg.track.replay import class_names_of

    config = load_pipeline(_pipeline(tmp_path, clip))
    args = argparse.Namespace(camera=None, input=str(detections))
    camera, messages = _camera_messages(Recording.from_file(str(detections)), args)
    stage = _rules_stage(config, camera, class_names_of(messages.values()), "pipeline.yaml")
    assert stage is not None
    overlay_at = _overlays(messages, stage, camera)
    x0, y0, x1, y1 = ZONE[0][0], ZONE[0][1], ZONE[2][0], ZONE[2][1]
    seen = set()
    for index in DRAWN:
        _instances, counts = overlay_at(index)
        boxes = scene.frame(index).gt.boxes
        # The zone rule's default anchor is the box's bottom centre.
        inside = sum(
            1
            for bx0, _by0, bx1, by1 in boxes.tolist()
            if x0 <= (bx0 + bx1) / 2 <= x1 and y0 <= by1 <= y1
        )
        assert counts["pen"] == inside, (index, counts, boxes)
        seen.add(inside)
    assert overlay_at(UNDRAWN[0]) is None
    assert len(seen) > 1, "the scene should move objects in and out of the zone"
