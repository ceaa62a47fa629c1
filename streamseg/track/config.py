"""The ``tracking:`` section of pipeline.yaml: the multi-object tracker.

Every camera gets its own tracker (ByteTrack family, see
``streamseg/track/tracker.py`` and docs/tracking.md). Scores are the model's
confidences in ``[0, 1]``; ages are seconds of capture time, so frames
dropped under load do not shorten them.

Example::

    tracking:
      enabled: true
      match: box_iou          # or mask_iou
      high_score: 0.5         # first association round
      low_score: 0.1          # second round: low-score detections keep tracks alive
      new_track_score: 0.6    # an unmatched detection this confident starts a track
      confirm_hits: 2         # frames before a track is confirmed (and may alert)
      max_lost_seconds: 1.0   # a lost track is dropped after this long unseen
      lost_match_distance: 0.5  # lost tracks also take nearby low-score detections
      score_box_noise: 1.0    # low-score boxes change a track's size and velocity less
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from streamseg.configbase.base import StrictModel

__all__ = ["TrackingConfig"]


class TrackingConfig(StrictModel):
    """Multi-object tracking settings (one tracker per camera).

    ``enabled: false`` turns the tracker off: instances keep the ``track_ids``
    they arrive with (replays of recorded detections), and alert rules run on
    those ids.
    """

    enabled: bool = True
    match: Literal["box_iou", "mask_iou"] = Field(
        default="box_iou",
        description="association cost: box IoU, or mask IoU (needs a model with masks)",
    )
    high_score: float = Field(default=0.5, ge=0, le=1, description="first-round detections")
    low_score: float = Field(
        default=0.1, ge=0, le=1, description="detections below this are ignored by the tracker"
    )
    new_track_score: float = Field(
        default=0.6,
        ge=0,
        le=1,
        description="an unmatched detection at least this sure starts a track",
    )
    match_iou: float = Field(
        default=0.2, gt=0, le=1, description="least IoU to pair a track and a high-score detection"
    )
    low_match_iou: float = Field(
        default=0.5, gt=0, le=1, description="least IoU to pair a track and a low-score detection"
    )
    low_match_inside: float | None = Field(
        default=None,
        gt=0,
        le=1,
        description="second round: also pair a track with a low-score detection whose box lies "
        "at least this share inside the track's predicted (or, lost, last) box; null: IoU only",
    )
    lost_match_distance: float | None = Field(
        default=0.5,
        gt=0,
        le=10,
        description="last round: a lost track may take a free low-score detection of its class "
        "whose centre lies within this many track sizes of its predicted or last seen centre; "
        "null: off",
    )
    lost_match_score: float = Field(
        default=0.2,
        ge=0,
        le=1,
        description="least score of a detection in that last round (lower ones are mostly junk)",
    )
    score_box_noise: float = Field(
        default=1.0,
        ge=0,
        le=10,
        description="Kalman noise of a matched box's size and motion from its score: "
        "0.05 + this * (1 - score)^2 box sizes (the centre keeps 0.05), so the shrunken, shifted "
        "box of a partly hidden object (low score) barely changes the track's size and "
        "velocity; 0: every box counts the same",
    )
    tentative_match_iou: float = Field(
        default=0.3, gt=0, le=1, description="least IoU to pair a tentative track"
    )
    confirm_hits: int = Field(
        default=2, ge=1, le=100, description="matched frames before a track is confirmed"
    )
    max_lost_seconds: float = Field(
        default=1.0, ge=0, le=3600, description="a lost track is removed after this long unseen"
    )
    max_lost_frames: int | None = Field(
        default=None, ge=0, description="optional cap in processed frames as well"
    )
    class_aware: bool = Field(
        default=False, description="never pair a track with a detection of another class"
    )
    duplicate_iou: float = Field(
        default=0.7,
        gt=0,
        le=1,
        description="an unmatched detection overlapping a tracked or surer one this much "
        "(box IoU, or grid-mask IoU) starts no track: a second report of the same object; "
        "1 limits copy handling to identical boxes",
    )
    duplicate_frames: int = Field(
        default=10,
        ge=1,
        le=1000,
        description="a younger track overlapping an older one by duplicate_iou in this many "
        "frames in a row is a copy of the same object and is removed",
    )
    fuse_score: bool = Field(
        default=False, description="first round cost is 1 - IoU * score (ByteTrack's fuse_score)"
    )
    label_decay: float = Field(
        default=0.9, ge=0, le=1, description="weight kept by old class votes at each match"
    )
    score_smoothing: float = Field(
        default=0.7, ge=0, lt=1, description="weight kept by the old smoothed score at each match"
    )
    publish_tentative: bool = Field(
        default=False, description="give tentative tracks' detections their id (else -1)"
    )
    mask_iou_resolution: int = Field(
        default=64, ge=8, le=1024, description="mask IoU grid: pixels on the frame's longer side"
    )

    @model_validator(mode="after")
    def _score_order(self) -> TrackingConfig:
        if self.low_score > self.high_score:
            raise ValueError(
                f"low_score ({self.low_score}) must be <= high_score ({self.high_score})"
            )
        if self.new_track_score < self.high_score:
            raise ValueError(
                f"new_track_score ({self.new_track_score}) must be >= high_score "
                f"({self.high_score}): only first-round detections start tracks"
            )
        return self
