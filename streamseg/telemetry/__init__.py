"""Telemetry: OpenTelemetry providers and exporters, runtime metrics, frame traces,
and the HTTP health/metrics endpoint.

Importing this package loads nothing; the submodules pull in the
OpenTelemetry SDK when used.
"""
