"""Telemetry: OpenTelemetry traces and metrics, HTTP health endpoints."""
