"""The ``record:`` section of pipeline.yaml: raw footage and clips around alerts.

Recording never re-encodes: packets read from the camera are remuxed into
MP4 (fragmented, so a crash leaves a playable file) or Matroska containers.

Example::

    record:
      dir: recordings
      container: mp4
      segment_s: 60
      clips:
        enabled: true
        before_s: 5
        after_s: 10
        kinds: [enter, line_in]
      retention:
        max_age_hours: 168
        max_mb: 50000
        camera_max_mb: 10000
        min_free_mb: 1000

``streamseg record`` uses ``dir``, ``container`` and ``segment_s`` as its
defaults; ``serve`` writes a clip per alert (merging alerts that overlap) when
``clips.enabled`` is true. ``retention`` deletes the oldest recordings
(clips and segments) past its limits, and says when recording stops and
resumes on a full disk (:mod:`streamseg.record.retention`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, ValidationInfo, field_validator

from streamseg.configbase.base import StrictModel

__all__ = ["ClipsConfig", "RecordConfig", "RetentionConfig"]


class ClipsConfig(StrictModel):
    """Clips of raw footage around alerts.

    Attributes:
        enabled: write clips while ``serve`` runs.
        before_s: seconds of footage kept before the alert (from a packet ring
            buffer; the clip starts at the keyframe at or before that point).
        after_s: seconds kept after the alert; another alert of the same
            camera inside this window extends the clip.
        max_s: a clip never grows longer than this (seconds).
        cameras: only these cameras (empty: every camera).
        rules: only alerts of these rule names (empty: every rule).
        kinds: only these alert kinds, e.g. ``enter`` (empty: every kind).
    """

    enabled: bool = False
    before_s: float = Field(default=5.0, ge=0.0, le=300.0)
    after_s: float = Field(default=5.0, ge=0.0, le=300.0)
    max_s: float = Field(default=120.0, gt=0.0, le=3600.0)
    cameras: tuple[str, ...] = ()
    rules: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()

    @field_validator("max_s")
    @classmethod
    def _max_covers_window(cls, value: float, info: ValidationInfo) -> float:
        window = info.data.get("before_s", 0.0) + info.data.get("after_s", 0.0)
        if value < window:
            raise ValueError(f"max_s ({value}) must be at least before_s + after_s ({window})")
        return value


class RetentionConfig(StrictModel):
    """How long recordings stay, and what recording does on a full disk.

    Clips and segments (``.mp4``/``.mkv`` files under ``record.dir/<camera>/``)
    are deleted oldest first (by modification time) past any limit set,
    at start-up and whenever a recording is started or finished; a file
    being written is never deleted. Every limit is off unless set.

    Attributes:
        max_age_hours: recordings older than this are deleted.
        max_mb: all cameras' recordings together stay under this (MiB).
        camera_max_mb: each camera's recordings stay under this (MiB).
        min_free_mb: oldest recordings are deleted while the filesystem has
            less than this free (MiB; 0: off).
        resume_free_mb: after a full disk stopped recording, it resumes once
            this much is free (MiB; and at least ``min_free_mb``).
        retry_s: while stopped, free space is looked at this often (seconds).
    """

    max_age_hours: float | None = Field(default=None, gt=0.0)
    max_mb: float | None = Field(default=None, gt=0.0)
    camera_max_mb: float | None = Field(default=None, gt=0.0)
    min_free_mb: float = Field(default=0.0, ge=0.0)
    resume_free_mb: float = Field(default=64.0, ge=0.0)
    retry_s: float = Field(default=5.0, gt=0.0, le=3600.0)

    @field_validator("camera_max_mb")
    @classmethod
    def _camera_within_total(cls, value: float | None, info: ValidationInfo) -> float | None:
        total = info.data.get("max_mb")
        if value is not None and total is not None and value > total:
            raise ValueError(f"camera_max_mb ({value}) must not exceed max_mb ({total})")
        return value


class RecordConfig(StrictModel):
    """Where and how raw footage is written.

    Attributes:
        dir: output folder; files go to ``<dir>/<camera>/``.
        container: ``mp4`` (fragmented MP4) or ``mkv`` (Matroska).
        segment_s: target length of a segment of ``streamseg record``
            (seconds); segments are cut at the first keyframe past it.
        clips: clips around alerts written by ``serve``.
        retention: what is deleted, oldest first, and a full disk's handling.
    """

    dir: str = "recordings"
    container: Literal["mp4", "mkv"] = "mp4"
    segment_s: float = Field(default=60.0, gt=0.0, le=86400.0)
    clips: ClipsConfig = ClipsConfig()
    retention: RetentionConfig = RetentionConfig()
