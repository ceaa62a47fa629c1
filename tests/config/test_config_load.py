"""Valid pipelines: defaults, ${ENV} interpolation, paths, secrets, sharding."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamseg.config import ConfigError, load_pipeline
from streamseg.config.shard import camera_shard, parse_shard, select_shard
from streamseg.configbase.env import UnsetVariable, interpolate

REPO = Path(__file__).resolve().parents[2]


def test_default_pipeline_is_valid() -> None:
    config = load_pipeline(REPO / "pipeline.yaml", environ={})
    assert [c.id for c in config.cameras] == ["synth-a", "synth-b"]
    assert config.model.arch == "maskrcnn_small"
    # The shipped demo checkpoint: a wrong path must be an error, not random weights.
    assert config.model.missing_weights == "error"
    assert config.model.weights == str(REPO / "models" / "demo_small.pth")
    rules = config.alerts.cameras["synth-a"].rules
    assert {r.type for r in rules} == {"zone", "line", "dwell", "crowding"}
    assert config.redis.url == "redis://127.0.0.1:6379/0"
    assert config.http.port == 8080


def test_env_interpolation(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(
        "cameras:\n"
        "  - id: ${CAM_ID}\n"
        "    url: rtsp://${CAM_USER:-admin}:${CAM_PW}@h/x\n"
        "    max_fps: ${FPS:-7.5}\n"
        "redis:\n"
        "  password: ${REDIS_PW}\n"
        "telemetry:\n"
        "  service_name: a$$b\n"
        "http:\n"
        "  port: ${PORT}\n"
    )
    env = {"CAM_ID": "gate", "CAM_PW": "pw:1", "REDIS_PW": "topsecret", "PORT": "9091"}
    config = load_pipeline(path, environ=env)
    cam = config.cameras[0]
    assert cam.id == "gate"
    assert cam.url == "rtsp://admin:pw:1@h/x"
    assert cam.max_fps == 7.5
    assert config.http.port == 9091
    assert config.redis.password is not None
    assert config.redis.password.get_secret_value() == "topsecret"
    assert "topsecret" not in repr(config)
    assert "topsecret" not in str(config.model_dump())
    assert config.telemetry.service_name == "a$b"


def test_interpolate_rules() -> None:
    assert interpolate("${A:-x}", {}) == "x"
    assert interpolate("${A:-x}", {"A": ""}) == "x"
    assert interpolate("${A}", {"A": ""}) == ""
    assert interpolate("$${A}", {}) == "${A}"
    with pytest.raises(UnsetVariable) as info:
        interpolate("a${B}c", {})
    assert info.value.name == "B"


def test_relative_paths_from_config_folder(tmp_path: Path) -> None:
    (tmp_path / "clips").mkdir()
    (tmp_path / "clips" / "a.mp4").write_bytes(b"")
    (tmp_path / "w.pth").write_bytes(b"")
    path = tmp_path / "p.yaml"
    path.write_text("cameras:\n  - id: a\n    url: clips/a.mp4\nmodel:\n  weights: w.pth\n")
    config = load_pipeline(path, environ={})
    assert config.cameras[0].url == str(tmp_path / "clips" / "a.mp4")
    assert config.model.weights == str(tmp_path / "w.pth")


def test_missing_weights_random_is_allowed(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(
        "cameras:\n  - id: a\n    url: synthetic://\n"
        "model:\n  weights: none.pth\n  missing_weights: random\n"
    )
    assert load_pipeline(path, environ={}).model.weights == str(tmp_path / "none.pth")


def test_config_is_frozen(tmp_path: Path) -> None:
    config = load_pipeline(REPO / "pipeline.yaml", environ={})
    with pytest.raises(ValueError):
        config.model.batch_size = 3  # type: ignore[misc]


@pytest.mark.parametrize(
    ("text", "expected"),
    [("0/1", (0, 1)), ("2/4", (2, 4)), ("streamseg-3/4", (3, 4)), (" 1/2 ", (1, 2))],
)
def test_parse_shard(text: str, expected: tuple[int, int]) -> None:
    assert parse_shard(text) == expected


@pytest.mark.parametrize("text", ["4/4", "1", "a/b", "-1/2", "0/0"])
def test_parse_shard_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="INDEX"):
        parse_shard(text)


def test_shards_partition_cameras(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(
        "cameras:\n" + "".join(f"  - id: cam{i}\n    url: synthetic://\n" for i in range(40))
    )
    cameras = load_pipeline(path, environ={}).cameras
    shards = [select_shard(cameras, i, 3) for i in range(3)]
    ids = sorted(c.id for s in shards for c in s)
    assert ids == sorted(c.id for c in cameras)
    assert all(len(s) >= 5 for s in shards)  # crc32 spreads them
    assert camera_shard("cam7", 3) == camera_shard("cam7", 3)
    # The split does not depend on the order of the list.
    assert select_shard(list(reversed(cameras)), 1, 3) == list(reversed(shards[1]))


def test_error_message_format(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("cameras:\n  - id: a\n    url: synthetic://\n    decode: gpu\n")
    with pytest.raises(ConfigError) as info:
        load_pipeline(path, environ={})
    assert str(info.value) == (
        f"{path}:4: cameras[0].decode: unknown decoder 'gpu'; valid: 'pyav', 'dali'"
    )


def test_runtime_defaults_leave_a_core_and_keep_live_queues_short() -> None:
    import os

    from streamseg.config.runtime import RuntimeConfig

    cores = len(os.sched_getaffinity(0))
    assert RuntimeConfig().inference_threads() == max(1, cores - 1)
    assert RuntimeConfig(torch_threads=3).inference_threads() == 3
    # A live camera's backlog is at most this many frames (its latency bound).
    assert RuntimeConfig().camera_queue == 2
