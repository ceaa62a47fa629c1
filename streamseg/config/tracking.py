"""The ``tracking:`` section of pipeline.yaml (filled in by the tracking work)."""

from __future__ import annotations

from streamseg.config.base import StrictModel


class TrackingConfig(StrictModel):
    """Multi-object tracking settings."""

    enabled: bool = True
