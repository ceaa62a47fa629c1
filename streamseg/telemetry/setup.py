"""Installing OpenTelemetry providers and exporters from the ``telemetry:`` section.

``Telemetry.start(...)`` builds a meter provider and a tracer provider with
the chosen exporters and installs them as the process-wide providers (the
OpenTelemetry API allows that once per process; stages call
``opentelemetry.metrics.get_meter("streamseg.<stage>")``). The runtime's own
instruments come from ``telemetry.meter``/``telemetry.tracer`` directly, so a
second pipeline in the same process (tests) still gets its own.
"""

from __future__ import annotations

import logging
import sys
import threading
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.sampling import ParentBasedTraceIdRatio

from streamseg import __version__

__all__ = ["Telemetry"]

log = logging.getLogger("streamseg.telemetry")

_GLOBALS_LOCK = threading.Lock()
_GLOBALS_SET = False


class Telemetry:
    """Meter and tracer providers for one pipeline, and a Prometheus registry when asked.

    Args:
        service_name: the ``service.name`` resource attribute.
        traces: ``none`` | ``console`` | ``otlp``.
        metrics: ``none`` | ``console`` | ``otlp`` | ``prometheus``.
        otlp_endpoint: base URL of an OTLP/HTTP receiver (``/v1/traces`` and
            ``/v1/metrics`` are appended).
        export_interval: seconds between metric exports (push exporters).
        trace_sample_ratio: fraction of frame traces kept.
        install_globals: make these the process-wide providers (first call wins).
    """

    def __init__(
        self,
        *,
        service_name: str = "streamseg",
        traces: str = "none",
        metrics: str = "none",
        otlp_endpoint: str = "http://127.0.0.1:4318",
        export_interval: float = 10.0,
        trace_sample_ratio: float = 1.0,
        install_globals: bool = True,
    ) -> None:
        resource = Resource.create({"service.name": service_name, "service.version": __version__})
        self.traces_enabled = traces != "none"
        self.prometheus_registry: Any = None
        readers = self._metric_readers(metrics, otlp_endpoint, export_interval)
        self.meter_provider = MeterProvider(resource=resource, metric_readers=readers)
        self.tracer_provider = TracerProvider(
            resource=resource, sampler=ParentBasedTraceIdRatio(trace_sample_ratio)
        )
        if self.traces_enabled:
            self.tracer_provider.add_span_processor(_span_processor(traces, otlp_endpoint))
        self.meter = self.meter_provider.get_meter("streamseg.runtime", __version__)
        self.tracer = self.tracer_provider.get_tracer("streamseg.runtime", __version__)
        if install_globals:
            self._install_globals()

    def _metric_readers(self, kind: str, endpoint: str, interval: float) -> list[MetricReader]:
        if kind == "none":
            return []
        if kind == "prometheus":
            from opentelemetry.exporter.prometheus import PrometheusMetricReader
            from prometheus_client import CollectorRegistry

            self.prometheus_registry = CollectorRegistry(auto_describe=True)
            return [PrometheusMetricReader(registry=self.prometheus_registry)]
        from opentelemetry.sdk.metrics.export import (
            ConsoleMetricExporter,
            PeriodicExportingMetricReader,
        )

        exporter: Any
        if kind == "otlp":
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

            exporter = OTLPMetricExporter(endpoint=endpoint.rstrip("/") + "/v1/metrics")
        else:
            exporter = ConsoleMetricExporter(out=sys.stderr)
        return [PeriodicExportingMetricReader(exporter, export_interval_millis=interval * 1000)]

    def _install_globals(self) -> None:
        global _GLOBALS_SET
        with _GLOBALS_LOCK:
            if _GLOBALS_SET:
                log.debug("OpenTelemetry providers already installed in this process")
                return
            metrics.set_meter_provider(self.meter_provider)
            trace.set_tracer_provider(self.tracer_provider)
            _GLOBALS_SET = True

    def metrics_text(self) -> tuple[bytes, str]:
        """The Prometheus exposition of the current metrics, and its content type."""
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        if self.prometheus_registry is None:
            return b"# metrics exporter is not 'prometheus'\n", CONTENT_TYPE_LATEST
        return generate_latest(self.prometheus_registry), CONTENT_TYPE_LATEST

    def start_prometheus_server(self, port: int, host: str = "0.0.0.0") -> None:
        """Serve ``/metrics`` on a port of its own (besides the health endpoint's)."""
        from prometheus_client import start_http_server

        if self.prometheus_registry is not None:
            start_http_server(port, addr=host, registry=self.prometheus_registry)

    def shutdown(self) -> None:
        """Flush and stop exporters (spans and metrics still pending are sent)."""
        for provider in (self.tracer_provider, self.meter_provider):
            try:
                provider.shutdown()
            except Exception:  # an exporter that cannot reach its collector
                log.warning("telemetry: shutting down %s failed", type(provider).__name__)


def _span_processor(kind: str, endpoint: str) -> Any:
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

    if kind == "otlp":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint.rstrip("/") + "/v1/traces"))
    return BatchSpanProcessor(ConsoleSpanExporter(out=sys.stderr))
