"""The ``telemetry:`` section of pipeline.yaml: OpenTelemetry exporters."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from streamseg.configbase.base import StrictModel

__all__ = ["TelemetryConfig"]


class TelemetryConfig(StrictModel):
    """OpenTelemetry exporters.

    ``traces``: ``none``, ``console`` (spans as JSON on stderr) or ``otlp``
    (OTLP over HTTP to ``otlp_endpoint``). ``metrics``: ``none``,
    ``console``, ``otlp`` or ``prometheus`` (scraped at ``/metrics`` on the
    ``http`` port, and also on ``prometheus_port`` when that is set).
    """

    service_name: str = "streamseg"
    traces: Literal["none", "console", "otlp"] = "none"
    metrics: Literal["none", "console", "otlp", "prometheus"] = "prometheus"
    otlp_endpoint: str = "http://127.0.0.1:4318"
    prometheus_port: int | None = Field(default=None, ge=1, le=65535)
    export_interval: float = Field(
        default=10.0, gt=0, le=3600, description="seconds between metric exports"
    )
    trace_sample_ratio: float = Field(default=1.0, ge=0, le=1)

    @model_validator(mode="after")
    def _endpoint(self) -> TelemetryConfig:
        if "otlp" in (self.traces, self.metrics) and not self.otlp_endpoint.startswith(
            ("http://", "https://")
        ):
            raise ValueError("otlp_endpoint must be an http:// or https:// url (OTLP over HTTP)")
        return self
