"""``streamseg check``: exit 0 for a valid file, 2 with every error listed."""

from __future__ import annotations

from pathlib import Path


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
