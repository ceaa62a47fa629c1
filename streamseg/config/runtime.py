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
    threads for inference (``null``: the usable cores less one, at least one,
    so that decoding, tracking and publishing keep a core: intra-op threads
    that must share every core with those stages stall at each parallel
    region). ``drain_timeout``: seconds to finish in-flight frames and flush
    Redis on shutdown.
    """

    camera_queue: int = Field(default=2, ge=1, le=10_000)
    results_queue: int = Field(default=8, ge=1, le=10_000)
    publish_queue: int = Field(default=64, ge=1, le=100_000)
    torch_threads: int | None = Field(default=None, ge=1, le=1024)
    drain_timeout: float = Field(default=15.0, gt=0, le=3600)
    status_interval: float = Field(
        default=10.0, gt=0, le=3600, description="seconds between status log lines"
    )

    def inference_threads(self) -> int:
        """``torch_threads``, or the usable cores less one (at least one)."""
        if self.torch_threads is not None:
            return self.torch_threads
        import os

        try:
            cores = len(os.sched_getaffinity(0))
        except AttributeError:  # not on Linux
            cores = os.cpu_count() or 1
        return max(1, cores - 1)
