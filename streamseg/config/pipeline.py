"""The root of pipeline.yaml: every section in one model."""

from __future__ import annotations

from pydantic import Field

from streamseg.config.alerts import AlertsConfig
from streamseg.config.base import StrictModel
from streamseg.config.cameras import CameraConfig
from streamseg.config.model import ModelConfig
from streamseg.config.record import RecordConfig
from streamseg.config.redis import RedisConfig
from streamseg.config.runtime import RuntimeConfig
from streamseg.config.telemetry import HttpConfig, TelemetryConfig
from streamseg.config.tracking import TrackingConfig

__all__ = ["PipelineConfig"]


class PipelineConfig(StrictModel):
    """A whole pipeline: cameras in, one model, tracking and alerts, Redis out."""

    version: int = Field(default=1, ge=1, le=1, description="config format version")
    cameras: list[CameraConfig] = Field(min_length=1)
    model: ModelConfig = ModelConfig()
    tracking: TrackingConfig = TrackingConfig()
    alerts: AlertsConfig = AlertsConfig()
    redis: RedisConfig = RedisConfig()
    telemetry: TelemetryConfig = TelemetryConfig()
    http: HttpConfig = HttpConfig()
    runtime: RuntimeConfig = RuntimeConfig()
    record: RecordConfig = RecordConfig()

    def camera(self, camera_id: str) -> CameraConfig:
        for cam in self.cameras:
            if cam.id == camera_id:
                return cam
        raise KeyError(camera_id)
