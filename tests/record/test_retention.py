"""``record.retention``: recordings deleted oldest first, by age, by size and by free space."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from streamseg.config import ConfigError, load_pipeline
from streamseg.record.config import RetentionConfig
from streamseg.record.retention import Retention
from tests.support.tmpfs import tmpfs

__all__ = ["tmpfs"]

KB = 1024
NOW = 1_750_000_000.0


def _file(root: Path, camera: str, name: str, size: int, age_s: float) -> Path:
    """A recording of ``size`` bytes whose modification time is ``age_s`` before NOW."""
    path = root / camera / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(os.urandom(size))
    os.utime(path, (NOW - age_s, NOW - age_s))
    return path


def _names(root: Path) -> set[str]:
    return {p.name for p in root.rglob("*") if p.is_file()}


def _retention(root: Path, **limits: float) -> Retention:
    return Retention(root=root, config=RetentionConfig(**limits), clock=lambda: NOW)


def test_age_then_camera_size_then_total_size_oldest_first(tmp_path: Path) -> None:
    _file(tmp_path, "gate", "g1.mp4", 100 * KB, 3 * 3600)  # too old
    _file(tmp_path, "gate", "g2.mp4", 100 * KB, 50)
    _file(tmp_path, "gate", "g3.mkv", 100 * KB, 40)
    _file(tmp_path, "gate", "g4.mp4", 100 * KB, 30)
    _file(tmp_path, "dock", "d1.mp4", 100 * KB, 45)
    _file(tmp_path, "dock", "d2.mp4", 100 * KB, 20)
    _file(tmp_path, "dock", "notes.txt", 900 * KB, 9 * 3600)  # not a recording: never touched
    limits = {"max_age_hours": 2, "camera_max_mb": 250 / 1024, "max_mb": 350 / 1024}
    removed = _retention(tmp_path, **limits).enforce()
    assert [(r.path.name, r.camera, r.reason) for r in removed] == [
        ("g1.mp4", "gate", "age"),
        ("g2.mp4", "gate", "camera_size"),  # gate held 300 KB: its oldest goes
        ("d1.mp4", "dock", "total_size"),  # 400 KB in all: the oldest of all goes
    ]
    assert all(r.size == 100 * KB for r in removed)
    assert _names(tmp_path) == {"g3.mkv", "g4.mp4", "d2.mp4", "notes.txt"}
    again = _retention(tmp_path, **limits)
    assert again.enforce() == []  # within every limit now
    assert again.usage == {"dock": 100 * KB, "gate": 200 * KB}


def test_a_file_being_written_is_never_deleted_but_counts(tmp_path: Path) -> None:
    writing = _file(tmp_path, "gate", "open.mp4", 300 * KB, 100)  # the oldest, and open
    _file(tmp_path, "gate", "a.mp4", 100 * KB, 50)
    _file(tmp_path, "gate", "b.mp4", 100 * KB, 10)
    removed = _retention(tmp_path, camera_max_mb=350 / 1024).enforce(keep=[writing])
    assert [r.path.name for r in removed] == ["a.mp4", "b.mp4"]  # 300 KB left: under 350
    assert _names(tmp_path) == {"open.mp4"}


def test_no_limits_no_folder_nothing_deleted(tmp_path: Path) -> None:
    _file(tmp_path, "gate", "a.mp4", 10 * KB, 10 * 365 * 86400)
    assert _retention(tmp_path).enforce() == []
    assert _retention(tmp_path / "missing", max_mb=1).enforce() == []
    flat = Retention(root=tmp_path / "gate", config=RetentionConfig(max_age_hours=1), flat=True)
    assert [(r.camera, r.reason) for r in flat.enforce()] == [("gate", "age")]


def test_min_free_deletes_oldest_on_a_real_small_filesystem(
    tmpfs: Callable[[int], Path],
) -> None:
    root = tmpfs(2 * 1024 * KB)
    for i in range(8):  # 1.6 MB of 2 MB
        _file(root, "cam" if i % 2 else "dock", f"{i}.mp4", 200 * KB, 100 - i)
    retention = Retention(root=root, config=RetentionConfig(min_free_mb=1.0), clock=time.time)
    assert retention.free_bytes() < 1024 * KB
    removed = retention.enforce()
    assert [r.path.name for r in removed] == ["0.mp4", "1.mp4", "2.mp4"]
    assert {r.reason for r in removed} == {"free_space"}
    assert retention.free_bytes() >= 1024 * KB


def test_retention_config_errors_name_the_field_and_line(tmp_path: Path) -> None:
    path = tmp_path / "pipeline.yaml"
    base = "cameras:\n  - id: cam\n    url: synthetic://?seed=1\nrecord:\n  retention:\n"
    cases = [
        ("    max_mb: 10\n    camera_max_mb: 20\n", 7, "record.retention.camera_max_mb",
         "must not exceed max_mb"),
        ("    max_age_hours: 0\n", 6, "record.retention.max_age_hours", "greater than 0"),
        ("    retry_s: -1\n", 6, "record.retention.retry_s", "greater than 0"),
        ("    keep_days: 3\n", 6, "record.retention.keep_days", "unknown key"),
    ]  # fmt: skip
    for text, line, field, words in cases:
        path.write_text(base + text)
        with pytest.raises(ConfigError) as err:
            load_pipeline(path, environ={})
        assert f"{path}:{line}: {field}" in str(err.value) and words in str(err.value), str(
            err.value
        )
    path.write_text(base + "    max_mb: 100\n    camera_max_mb: 20\n    min_free_mb: 500\n")
    r = load_pipeline(path, environ={}).record.retention
    assert (r.max_mb, r.camera_max_mb, r.min_free_mb, r.resume_free_mb) == (100, 20, 500, 64)
