"""The ``runtime:`` section of pipeline.yaml: queues, threads, shutdown."""

from __future__ import annotations

from pydantic import Field

from streamseg.config.base import StrictModel

__all__ = ["RuntimeConfig"]


class RuntimeConfig(StrictModel):
    """How the stages run.

    ``camera_queue``: frames waiting per camera before segmentation (a live
    camera drops its oldest frame when full; a file source waits).
    ``results_queue``/``publish_queue``: items between segment, track and
    publish (bounded; full means backpressure). ``torch_threads``: intra-op
    threads for inference (``null``: all cores). ``drain_timeout``: seconds
    to finish in-flight frames and flush Redis on shutdown.
    """

    camera_queue: int = Field(default=4, ge=1, le=10_000)
    results_queue: int = Field(default=8, ge=1, le=10_000)
    publish_queue: int = Field(default=64, ge=1, le=100_000)
    torch_threads: int | None = Field(default=None, ge=1, le=1024)
    drain_timeout: float = Field(default=15.0, gt=0, le=3600)
    status_interval: float = Field(
        default=10.0, gt=0, le=3600, description="seconds between status log lines"
    )
