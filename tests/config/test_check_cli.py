"""``streamseg check``: exit 0 for a valid file, 2 with every error listed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest


def test_check_default_pipeline(cli) -> None:  # type: ignore[no-untyped-def]
    proc = cli("check", "pipeline.yaml")
    assert proc.returncode == 0, proc.stderr
    assert "pipeline.yaml: OK" in proc.stdout
    assert "synth-a" in proc.stdout
    assert "  sink redis (redis): redis://127.0.0.1:6379/0, streams streamseg:*" in proc.stdout


def test_check_lists_every_sink(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "sinks.yaml"
    path.write_text(
        "cameras:\n  - id: a\n    url: synthetic://?seed=1\n"
        "redis:\n  url: redis://:hunter2@r1:6379/0\n"
        "sinks:\n"
        "  - {type: redis, name: central, url: 'rediss://c:6380/0', stream_prefix: site7}\n"
        "  - {type: mqtt, name: ha, url: 'mqtt://broker:1883', password: hunter3,\n"
        "     snapshots: {enabled: true}}\n"
    )
    proc = cli("check", str(path), "--no-model")
    assert proc.returncode == 0, proc.stderr
    sinks = [line.strip() for line in proc.stdout.splitlines() if line.strip().startswith("sink ")]
    assert sinks == [
        "sink redis (redis): redis://:***@r1:6379/0, streams streamseg:*",
        "sink central (redis): rediss://c:6380/0, streams site7:*",
        "sink ha (mqtt): mqtt://broker:1883, topics streamseg/<camera>/detections, "
        "streamseg/alerts (retained: available, <camera>/state, <camera>/snapshot)",
    ], proc.stdout
    assert "hunter2" not in proc.stdout and "hunter3" not in proc.stdout


def test_check_lists_errors_and_hides_secrets(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "bad.yaml"
    path.write_text(
        "cameras:\n"
        "  - id: a\n"
        "    url: rtsp://admin:hunter2@cam:1234/x\n"
        "    max_fps: 0\n"
        "model:\n"
        "  arch: nope\n"
        "redis:\n"
        "  password: ${MISSING_REDIS_PW_VAR}\n"
    )
    proc = cli("check", str(path))
    assert proc.returncode == 2
    err = proc.stderr
    assert f"{path}:4: cameras[0].max_fps:" in err
    assert f"{path}:6: model.arch: unknown arch 'nope'" in err
    assert f"{path}:8: redis.password: environment variable MISSING_REDIS_PW_VAR is not set" in err
    assert "3 errors" in err
    assert "hunter2" not in err + proc.stdout
    assert "Traceback" not in err


def test_check_ok_redacts_passwords(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "ok.yaml"
    path.write_text("cameras:\n  - id: a\n    url: rtsp://admin:hunter2@cam:1234/x\n")
    proc = cli("check", str(path))
    assert proc.returncode == 0, proc.stderr
    assert "rtsp://admin:***@cam:1234/x" in proc.stdout
    assert "hunter2" not in proc.stdout


def test_check_missing_file(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    proc = cli("check", str(tmp_path / "nope.yaml"))
    assert proc.returncode == 2
    assert "file not found" in proc.stderr


def test_help(cli) -> None:  # type: ignore[no-untyped-def]
    for args in (["check", "--help"], ["serve", "--help"], ["subscribe", "--help"]):
        proc = cli(*args)
        assert proc.returncode == 0
        assert "exit codes" in proc.stdout


def test_check_lists_the_errors_of_every_layer_in_one_run(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A missing field hides neither the cross-references nor start-up's checks."""
    path = tmp_path / "layers.yaml"
    path.write_text(
        "cameras:\n"
        "  - {id: a, url: 'synthetic://?seed=abc'}\n"
        "model: {arch: maskrcnn_small, class_names: [__background__, person, car]}\n"
        "alerts:\n"
        "  cameras:\n"
        "    a:\n"
        "      zones: {z: {polygon: [[0, 0], [10, 0], [10, 10]]}}\n"
        "      rules:\n"
        "        - {name: d, type: dwell, zone: z}\n"
        "        - {name: e, type: zone, zone: nozone, classes: [zebra]}\n"
        "        - {name: c, type: coverage, zone: z, region: lava, above: 0.1}\n"
        "    ghost: {rules: []}\n"
    )
    proc = cli("check", str(path), "--no-model")
    assert proc.returncode == 2
    fields = re.findall(r"^\S+:\d+: (\S+):", proc.stderr, re.MULTILINE)
    assert fields == [
        "cameras[0].url",  # start-up's (the synthetic scene's parameters)
        "alerts.cameras.a.rules[0].seconds",  # the schema's
        "alerts.cameras.a.rules[1].classes[0]",  # the cross-references'
        "alerts.cameras.a.rules[1].zone",
        "alerts.cameras.a.rules[2].region",
        "alerts.cameras.ghost",
    ], proc.stderr
    assert "seed='abc' must be an integer" in proc.stderr
    assert "unknown zone 'nozone' (defined: z)" in proc.stderr
    assert f"{path}: 6 errors" in proc.stderr


@pytest.mark.slow  # loads the panoptic model (about 6 s of CPU)
def test_check_refuses_rules_the_panoptic_model_cannot_run(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A region rule needs a stuff class; a tracked rule a thing class (issue 30, item 5)."""
    repo = Path(__file__).resolve().parents[2]
    path = tmp_path / "panoptic.yaml"
    path.write_text(
        "cameras:\n"
        "  - {id: yard, url: 'synthetic://?seed=1&width=128&height=96&stuff=1'}\n"
        f"model: {{arch: mask2former_tiny, weights: '{repo / 'models' / 'panoptic_tiny.pth'}',"
        " task: panoptic}\n"
        "alerts:\n"
        "  cameras:\n"
        "    yard:\n"
        "      zones: {z: {polygon: [[0, 0], [10, 0], [10, 10]]}}\n"
        "      rules:\n"
        "        - {name: on-disc, type: region, region: disc}\n"
        "        - {name: road-in-z, type: zone, zone: z, classes: [road]}\n"
        "        - {name: on-road, type: region, region: road, classes: [disc]}\n"
        "        - {name: wet, type: coverage, zone: z, region: water, above: 0.1}\n"
    )
    proc = cli("check", str(path))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "alerts.cameras.yard.rules[0].region: rule 'on-disc': 'disc' is a thing class" in (
        proc.stderr
    )
    assert "name a region (stuff) class: ground, road, water" in proc.stderr
    assert "alerts.cameras.yard.rules[1].classes: rule 'road-in-z': 'road' is a region" in (
        proc.stderr
    )
    assert "rules[2]" not in proc.stderr and "rules[3]" not in proc.stderr
    assert f"{path}: 2 errors" in proc.stderr
