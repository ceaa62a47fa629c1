"""The root of pipeline.yaml: every section in one model."""

from __future__ import annotations

from pydantic import Field, field_validator

from streamseg.config.alerts import AlertsConfig
from streamseg.config.base import StrictModel
from streamseg.config.cameras import CameraConfig
from streamseg.config.model import ModelConfig
from streamseg.config.record import RecordConfig
from streamseg.config.redis import RedisConfig
from streamseg.config.runtime import RuntimeConfig
from streamseg.config.sinks import SinkConfig, check_sink_names
from streamseg.config.telemetry import HttpConfig, TelemetryConfig
from streamseg.config.tracking import TrackingConfig

__all__ = ["PipelineConfig"]


class PipelineConfig(StrictModel):
    """A whole pipeline: cameras in, one model, tracking and alerts, Redis (and more sinks) out."""

    version: int = Field(default=1, ge=1, le=1, description="config format version")
    cameras: list[CameraConfig] = Field(min_length=1)
    model: ModelConfig = ModelConfig()
    tracking: TrackingConfig = TrackingConfig()
    alerts: AlertsConfig = AlertsConfig()
    redis: RedisConfig = RedisConfig()
    sinks: list[SinkConfig] = Field(default=[], description="more sinks besides redis:")
    telemetry: TelemetryConfig = TelemetryConfig()
    http: HttpConfig = HttpConfig()
    runtime: RuntimeConfig = RuntimeConfig()
    record: RecordConfig = RecordConfig()

    _unique_sinks = field_validator("sinks")(check_sink_names)

    def camera(self, camera_id: str) -> CameraConfig:
        for cam in self.cameras:
            if cam.id == camera_id:
                return cam
        raise KeyError(camera_id)
