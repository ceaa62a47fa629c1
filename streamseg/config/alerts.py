"""The ``alerts:`` section of pipeline.yaml (filled in by the alerts work)."""

from __future__ import annotations

from streamseg.config.base import StrictModel


class AlertsConfig(StrictModel):
    """Alert rules: zones, lines, dwell and crowding, per camera."""

    enabled: bool = True
