"""Every bad pipeline.yaml gets a clear error naming the line and the field (table-driven)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from streamseg.config import ConfigError, load_pipeline

GOOD_CAMERA = "cameras:\n  - id: cam\n    url: synthetic://?seed=1\n"

# (name, yaml, expected line, expected field path, words the message must contain)
CASES = [
    ("syntax", "cameras:\n  - id: a\n   url: x\n", 3, "", ["YAML syntax error"]),
    ("tab_indent", "cameras:\n\t- id: a\n", 2, "", ["YAML syntax error"]),
    ("duplicate_key", "cameras: []\nmodel: {}\nmodel: {}\n", 3, "", ["duplicate key"]),
    ("top_level_list", "- id: a\n", 1, "", ["top level must be a mapping"]),
    ("unknown_top_key", GOOD_CAMERA + "camera: 1\n", 4, "camera", ["unknown key", "cameras"]),
    (
        "unknown_camera_key",
        "cameras:\n  - id: a\n    url: synthetic://\n    fps: 3\n",
        4,
        "cameras[0].fps",
        ["unknown key 'fps'", "max_fps"],
    ),
    (
        "unknown_nested_key",
        "cameras:\n  - id: a\n    url: synthetic://\n    reconnect:\n      backof: 1\n",
        5,
        "cameras[0].reconnect.backof",
        ["unknown key", "initial_backoff"],
    ),
    ("no_cameras", "model: {}\n", 1, "cameras", ["required"]),
    ("empty_cameras", "cameras: []\n", 1, "cameras", ["at least 1"]),
    ("cameras_not_list", "cameras:\n  id: a\n", 1, "cameras", ["valid list"]),
    ("camera_no_url", "cameras:\n  - id: a\n", 2, "cameras[0].url", ["required", "url"]),
    ("camera_bad_id", "cameras:\n  - id: 'a b'\n    url: synthetic://\n", 2, "cameras[0].id",
     ["camera id"]),
    (
        "duplicate_ids",
        "cameras:\n  - id: a\n    url: synthetic://\n  - id: a\n    url: synthetic://\n",
        4,
        "cameras[1].id",
        ["duplicate camera id 'a'"],
    ),
    ("bad_scheme", "cameras:\n  - id: a\n    url: ftp://h/x\n", 3, "cameras[0].url",
     ["unsupported URL scheme 'ftp'"]),
    ("rtsp_no_host", "cameras:\n  - id: a\n    url: rtsp:///x\n", 3, "cameras[0].url",
     ["no host"]),
    ("bad_port", "cameras:\n  - id: a\n    url: rtsp://h:99999/x\n", 3, "cameras[0].url",
     ["bad port", "1 to 65535"]),
    ("file_missing", "cameras:\n  - id: a\n    url: clips/nope.mp4\n", 3, "cameras[0].url",
     ["video file", "nope.mp4 does not exist", "relative paths start at"]),
    ("v4l2_missing", "cameras:\n  - id: a\n    url: /dev/video93\n", 3, "cameras[0].url",
     ["V4L2 device /dev/video93 does not exist", "ls /dev/video"]),
    ("negative_fps", "cameras:\n  - id: a\n    url: synthetic://\n    max_fps: -2\n", 4,
     "cameras[0].max_fps", ["greater than 0"]),
    ("fps_string", "cameras:\n  - id: a\n    url: synthetic://\n    max_fps: fast\n", 4,
     "cameras[0].max_fps", ["valid number", "'fast'"]),
    ("bad_decode", "cameras:\n  - id: a\n    url: synthetic://\n    decode: nvdec\n", 4,
     "cameras[0].decode", ["unknown decoder 'nvdec'; valid: 'pyav', 'dali'"]),
    (
        "backoff_order",
        "cameras:\n  - id: a\n    url: synthetic://\n    reconnect:\n"
        "      initial_backoff: 5\n      max_backoff: 1\n",
        4,
        "cameras[0].reconnect",
        ["max_backoff"],
    ),
    ("unset_env", "cameras:\n  - id: a\n    url: rtsp://u:${NOPE_PW_X}@h/x\n", 3,
     "cameras[0].url", ["NOPE_PW_X is not set"]),
    ("bad_env_ref", "cameras:\n  - id: a\n    url: ${1X}\n", 3, "cameras[0].url",
     ["bad variable reference"]),
    ("unknown_arch", GOOD_CAMERA + "model:\n  arch: yolo\n", 5, "model.arch",
     ["unknown arch 'yolo'", "maskrcnn_small", "mask2former_r50"]),
    ("weights_missing", GOOD_CAMERA + "model:\n  weights: w/none.pth\n", 5, "model.weights",
     ["weights file not found", "missing_weights"]),
    ("batch_zero", GOOD_CAMERA + "model:\n  batch_size: 0\n", 5, "model.batch_size",
     ["greater than or equal to 1"]),
    ("precision", GOOD_CAMERA + "model:\n  precision: int8\n", 5, "model.precision",
     ["'fp32'"]),
    ("device", GOOD_CAMERA + "model:\n  device: tpu\n", 5, "model.device", ["cuda"]),
    ("tensorrt_cpu", GOOD_CAMERA + "model:\n  backend: tensorrt\n", 4, "model",
     ["tensorrt", "cuda"]),
    ("class_names_bg", GOOD_CAMERA + "model:\n  class_names: [cat, dog]\n", 4, "model",
     ["__background__"]),
    (
        "class_names_count",
        GOOD_CAMERA + "model:\n  num_classes: 5\n  class_names: [__background__, cat]\n",
        4,
        "model",
        ["num_classes"],
    ),
    ("redis_scheme", GOOD_CAMERA + "redis:\n  url: http://h:6379\n", 5, "redis.url",
     ["redis://"]),
    ("redis_db", GOOD_CAMERA + "redis:\n  url: redis://h:6379/x\n", 5, "redis.url",
     ["database"]),
    ("redis_maxlen", GOOD_CAMERA + "redis:\n  maxlen: lots\n", 5, "redis.maxlen",
     ["valid integer"]),
    ("redis_prefix", GOOD_CAMERA + "redis:\n  stream_prefix: 'a b'\n", 5, "redis.stream_prefix",
     ["stream_prefix"]),
    ("exporter", GOOD_CAMERA + "telemetry:\n  metrics: statsd\n", 5, "telemetry.metrics",
     ["'prometheus'"]),
    (
        "otlp_endpoint",
        GOOD_CAMERA + "telemetry:\n  traces: otlp\n  otlp_endpoint: collector:4318\n",
        4,
        "telemetry",
        ["otlp_endpoint"],
    ),
    ("http_port", GOOD_CAMERA + "http:\n  port: 70000\n", 5, "http.port",
     ["less than or equal to 65535"]),
    ("runtime_key", GOOD_CAMERA + "runtime:\n  queue: 3\n", 5, "runtime.queue",
     ["unknown key", "camera_queue"]),
    ("tracking_key", GOOD_CAMERA + "tracking:\n  foo: 1\n", 5, "tracking.foo", ["unknown key"]),
    ("version", GOOD_CAMERA + "version: 7\n", 4, "version", ["less than or equal to 1"]),
    ("task_unknown", GOOD_CAMERA + "model:\n  arch: mask2former_tiny\n  task: panoptc\n", 6,
     "model.task", ["unknown task 'panoptc'", "'panoptic'"]),
    ("task_family", GOOD_CAMERA + "model:\n  arch: maskrcnn_small\n  task: semantic\n", 6,
     "model.task", ["maskrcnn_small", "runs only instance", "mask2former_tiny"]),
    ("stuff_not_a_class", GOOD_CAMERA + "model:\n  arch: mask2former_tiny\n  task: panoptic\n"
     "  class_names: [__background__, car, road]\n  stuff_classes: [road, lava]\n", 8,
     "model.stuff_classes", ["'lava' is not in class_names", "car, road"]),
    ("stuff_not_panoptic", GOOD_CAMERA + "model:\n  arch: mask2former_tiny\n  task: semantic\n"
     "  stuff_classes: [road]\n", 7, "model.stuff_classes", ["task: panoptic only"]),
    ("coverage_bounds", GOOD_CAMERA + "alerts:\n  cameras:\n    cam:\n      zones:\n"
     "        z: {polygon: [[0, 0], [9, 0], [9, 9]]}\n      rules:\n"
     "        - {name: wet, type: coverage, zone: z, region: water}\n", 10,
     "alerts.cameras.cam.rules[0]", ["exactly one of `above` or `below`"]),
    # A tagged union's member is no key of the file: the path and the line are the field's
    # own (not rules[1].zone.colour on the list item's line), with the keys it allows.
    ("rule_unknown_key", GOOD_CAMERA + "alerts:\n  cameras:\n    cam:\n      zones:\n"
     "        z: {polygon: [[0, 0], [9, 0], [9, 9]]}\n      rules:\n"
     "        - {name: a, type: zone, zone: z}\n        - name: b\n          type: zone\n"
     "          zone: z\n          colour: red\n", 14, "alerts.cameras.cam.rules[1].colour",
     ["unknown key 'colour'", "valid keys: anchor,", "zone"]),
    ("rule_unknown_type", GOOD_CAMERA + "alerts:\n  cameras:\n    cam:\n      rules:\n"
     "        - name: a\n          type: zon\n", 9, "alerts.cameras.cam.rules[0].type",
     ["unknown type 'zon'", "did you mean 'zone'?", "known types: zone, line,"]),
    ("rule_no_type", GOOD_CAMERA + "alerts:\n  cameras:\n    cam:\n      rules:\n"
     "        - name: a\n", 8, "alerts.cameras.cam.rules[0].type",
     ["type is required", "one of: zone, line,"]),
    ("zone_self_crossing", GOOD_CAMERA + "alerts:\n  cameras:\n    cam:\n      zones:\n"
     "        bow: {polygon: [[0, 0], [50, 50], [50, 0], [0, 50]]}\n", 8,
     "alerts.cameras.cam.zones.bow.polygon", ["crosses itself", "edges 0-1 and 2-3"]),
    ("zone_on_one_line", GOOD_CAMERA + "alerts:\n  cameras:\n    cam:\n      zones:\n"
     "        flat: {polygon: [[0, 0], [2, 2], [1, 1], [3, 3]]}\n", 8,
     "alerts.cameras.cam.zones.flat.polygon", ["has no area", "on one line"]),
    ("zone_unknown_key", GOOD_CAMERA + "alerts:\n  cameras:\n    cam:\n      zones:\n"
     "        z:\n          polygon: [[0, 0], [9, 0], [9, 9]]\n          colr: 1\n", 10,
     "alerts.cameras.cam.zones.z.colr", ["unknown key 'colr'", "valid keys: coordinates, polygon"]),
    ("sink_field_line", GOOD_CAMERA + "sinks:\n  - type: mqtt\n    name: m\n    qos: 7\n", 7,
     "sinks[0].qos", ["0, 1 or 2", "got 7"]),
    ("sink_unknown_key", GOOD_CAMERA + "sinks:\n  - type: redis\n    name: c\n    colour: 1\n",
     7, "sinks[0].colour", ["unknown key 'colour'", "valid keys: alerts_maxlen,"]),
    ("sink_unknown_type", GOOD_CAMERA + "sinks:\n  - name: k\n    type: kafka\n", 6,
     "sinks[0].type", ["unknown type 'kafka'", "known types: redis, mqtt"]),
    ("sink_no_type", GOOD_CAMERA + "sinks:\n  - name: k\n", 5, "sinks[0].type",
     ["type is required", "one of: redis, mqtt"]),
]  # fmt: skip


def _load(tmp_path: Path, text: str) -> ConfigError:
    path = tmp_path / "pipeline.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_pipeline(path, environ={})
    return info.value


@pytest.mark.parametrize(
    ("name", "text", "line", "field", "words"), CASES, ids=[c[0] for c in CASES]
)
def test_bad_pipeline(
    tmp_path: Path, name: str, text: str, line: int, field: str, words: list[str]
) -> None:
    err = _load(tmp_path, text)
    matches = [i for i in err.issues if i.path == field]
    assert matches, f"no issue at {field!r}: {err.format()}"
    issue = matches[0]
    assert issue.line == line, err.format()
    rendered = issue.format("pipeline.yaml")
    assert rendered.startswith(f"pipeline.yaml:{line}:"), rendered
    for word in words:
        assert word in rendered, f"{word!r} not in {rendered!r}"


def test_all_errors_reported_at_once(tmp_path: Path) -> None:
    text = textwrap.dedent(
        """\
        cameras:
          - id: a
            url: ftp://x/y
          - id: a
            url: synthetic://
            max_fps: 0
        model:
          arch: nope
        redis:
          maxlen: -1
        """
    )
    err = _load(tmp_path, text)
    assert {i.path for i in err.issues} >= {
        "cameras[0].url",
        "cameras[1].id",
        "cameras[1].max_fps",
        "model.arch",
        "redis.maxlen",
    }
    lines = [i.line for i in err.issues]
    assert lines == sorted(lines)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_pipeline(tmp_path / "none.yaml")
    assert "file not found" in str(info.value)
    assert str(tmp_path / "none.yaml") in str(info.value)


def test_secrets_never_in_errors(tmp_path: Path) -> None:
    text = textwrap.dedent(
        """\
        cameras:
          - id: a
            url: "rtsp://admin:hunter2@cam:99999/x"
        redis:
          url: "http://:s3cr3tpw@h:1"
          password: {nested: hunter3}
          username: 12
        """
    )
    err = _load(tmp_path, text)
    rendered = err.format()
    assert {i.path for i in err.issues} >= {"cameras[0].url", "redis.url", "redis.password"}
    for secret in ("hunter2", "s3cr3tpw", "hunter3"):
        assert secret not in rendered
