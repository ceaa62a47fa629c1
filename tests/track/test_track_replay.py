"""``streamseg replay``: recorded detections (file or Redis) -> tracker + rules -> events."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from streamseg.publish.encode import detections_message
from streamseg.types import FrameResult
from tests.support.servers import RedisServer, free_port
from tests.support.tracking import SCENE_EVENTS, SCENE_HIDDEN, SCENE_RULES, scripted_results

NAMES = ("__background__", "disc", "square", "triangle", "star")


def recording(*, with_ids: bool = False) -> list[dict[str, Any]]:
    """The scripted scene's detections messages (as the pipeline publishes them)."""
    out = []
    for result, gt in scripted_results():
        if with_ids:
            # What a tracked pipeline would have published: the gt ids of the
            # detected objects (track 1 is not detected in SCENE_HIDDEN's frames).
            assert gt.track_ids is not None
            hidden = SCENE_HIDDEN[1]
            ids = [t for t in gt.track_ids.tolist() if t != 1 or result.frame.seq not in hidden]
            inst = result.instances.replace(track_ids=torch.tensor(ids))
            result = FrameResult(result.frame, inst)
        msg = detections_message(result, arch="gt", class_names=NAMES, published_time=time.time())
        out.append(msg)
    return out


def replay(capsys: pytest.CaptureFixture[str], *args: str, stdin: str | None = None) -> Any:
    """``streamseg replay ARGS`` in this process: ``(exit code, stdout, stderr)``."""
    import io
    import sys

    from streamseg.cli import main

    old = sys.stdin
    if stdin is not None:
        sys.stdin = io.StringIO(stdin)
    try:
        code = main(["replay", *args])
    finally:
        sys.stdin = old
    out, err = capsys.readouterr()
    return code, out, err


def write_pipeline(tmp_path: Path, text: str = SCENE_RULES) -> Path:
    path = tmp_path / "pipeline.yaml"
    path.write_text(text)
    return path


def events_of(stdout: str) -> list[tuple[Any, ...]]:
    rows = [json.loads(line) for line in stdout.splitlines() if line.strip()]
    return [(e["frame_seq"], e["rule"], e["kind"], e["track_id"], e["count"]) for e in rows]


@pytest.fixture(scope="module")
def jsonl(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rec") / "detections.jsonl"
    with path.open("w") as f:
        for msg in recording():
            f.write(json.dumps(msg) + "\n")
    return path


def test_replay_file_gives_the_live_events(cli: Any, tmp_path: Path, jsonl: Path) -> None:
    proc = cli("replay", str(write_pipeline(tmp_path)), "--input", str(jsonl), "--summary")
    assert proc.returncode == 0, proc.stderr
    assert events_of(proc.stdout) == SCENE_EVENTS
    summary = json.loads(proc.stderr.strip().splitlines()[-1])
    assert summary["events"] == 8 and summary["by_rule"]["bay-zone/enter"] == 2


def test_replay_with_a_changed_rule_set(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, jsonl: Path
) -> None:
    # Move the door to x = 100 (crossed earlier), count only squares leaving
    # the bay, and drop the other rules.
    text = SCENE_RULES.replace("[[160, 20], [160, 220]]", "[[100, 20], [100, 220]]")
    head, _, _ = text.partition("      rules:\n")
    text = head + (
        "      rules:\n"
        "        - {name: door-count, type: line, line: door, include_mask: false}\n"
        "        - {name: leaving, type: zone, zone: bay, events: [exit], classes: [square]}\n"
    )
    code, out, err = replay(capsys, str(write_pipeline(tmp_path, text)), "--input", str(jsonl))
    assert code == 0, err
    # anchor x = 20 + 80 t > 102 first at t = 1.1
    assert events_of(out) == [
        (11, "door-count", "line_in", 1, 1),
        (31, "leaving", "exit", 1, None),
    ]
    first = json.loads(out.splitlines()[0])
    assert first["mask_rle"] is None


def test_replay_recorded_ids_and_stdin(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    lines = "".join(
        json.dumps({"stream": "s", "id": "1-0", "message": m}) + "\n"
        for m in recording(with_ids=True)
    )
    pipeline = str(write_pipeline(tmp_path))
    args = ("--input", "-", "--recorded-ids", "--no-masks")
    code, out, err = replay(capsys, pipeline, *args, stdin=lines)
    assert code == 0, err
    # With the recorded ids every track is known from frame 0: the disc's
    # initial enter comes at frame 0, the rest is unchanged.
    assert events_of(out) == [(0, "bay-zone", "enter", 2, None), *SCENE_EVENTS[1:]]
    assert all(json.loads(line)["mask_rle"] is None for line in out.splitlines())


def test_replay_from_redis(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, redis_server: RedisServer
) -> None:
    client = redis_server.client()
    messages = recording()
    for msg in messages:
        client.xadd("site:detections:gate", {"data": json.dumps(msg)})
    client.xadd("site:detections:other", {"data": json.dumps({**messages[0], "camera": "other"})})
    pipeline = str(write_pipeline(tmp_path))
    url = redis_server.url
    code, out, err = replay(
        capsys, pipeline, "--redis", url, "--prefix", "site", "--camera", "gate"
    )
    assert code == 0, err
    assert events_of(out) == SCENE_EVENTS
    # Every camera found under the prefix when none is named (camera "other"
    # has no rules: no events from it).
    code, out, err = replay(capsys, pipeline, "--redis", url, "--prefix", "site")
    assert code == 0, err
    assert events_of(out) == SCENE_EVENTS
    code, out, err = replay(capsys, pipeline, "--redis", url, "--prefix", "nothing")
    assert code == 2 and "no detections streams `nothing:detections:*`" in err


def test_replay_redis_unreachable(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    url = f"redis://:pw-secret@127.0.0.1:{free_port()}/0"
    code, _, err = replay(capsys, str(write_pipeline(tmp_path)), "--redis", url)
    assert code == 1
    assert "cannot reach Redis" in err and "pw-secret" not in err


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"camera": "gate"\n', "detections.jsonl:1: not JSON"),
        ("\n[1, 2]\n", "detections.jsonl:2: expected a JSON object"),
        ('{"camera": "gate", "seq": 0}\n', "missing 'capture_time', 'image', 'instances'"),
        (
            '{"camera": "gate", "seq": 0, "capture_time": 1, "image": {"height": 4, "width": 4},'
            ' "instances": [{"box": [0, 0, 1], "score": 1, "label": 1}]}\n',
            "detections.jsonl:1: bad detections message",
        ),
    ],
)
def test_replay_bad_recordings(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: str, message: str
) -> None:
    bad = tmp_path / "detections.jsonl"
    bad.write_text(content)
    code, _, err = replay(capsys, str(write_pipeline(tmp_path)), "--input", str(bad))
    assert code == 2
    assert message in err


def test_replay_usage_errors(
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
    jsonl: Path,
) -> None:
    pipeline = str(write_pipeline(tmp_path))
    code, _, err = replay(capsys, pipeline, "--input", str(tmp_path / "missing.jsonl"))
    assert code == 2 and "missing.jsonl: cannot read" in err
    code, _, err = replay(capsys, str(tmp_path / "nope.yaml"), "--input", str(jsonl))
    assert code == 2 and "file not found" in err
    with pytest.raises(SystemExit) as exit_info:
        replay(capsys, pipeline)
    assert exit_info.value.code == 2
    assert "one of the arguments --input --redis is required" in capsys.readouterr().err
    # A class the recording never shows: a warning, and the rule never fires.
    text = SCENE_RULES.replace("classes: [disc]", "classes: [person]")
    code, out, _ = replay(capsys, str(write_pipeline(tmp_path, text)), "--input", str(jsonl))
    assert code == 0
    assert "'person'" in caplog.text and "never appears in the recording" in caplog.text
    assert "loiter" not in out and len(out.splitlines()) == 7
