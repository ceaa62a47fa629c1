"""The ``runtime:`` section of pipeline.yaml: queues, threads, shutdown."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from streamseg.configbase.base import StrictModel

__all__ = ["RuntimeConfig", "usable_cpus"]


class RuntimeConfig(StrictModel):
    """How the stages run.

    ``camera_queue``: frames waiting per camera before segmentation (a live
    camera drops its oldest frame when full; a file source waits).
    ``results_queue``/``publish_queue``: items between segment, track and
    publish (bounded; full means backpressure). ``torch_threads``: intra-op
    threads for inference (``null``: the usable cores less one, at least one,
    so that decoding, tracking and publishing keep a core: intra-op threads
    that must share every core with those stages stall at each parallel
    region). ``host_cpu``: the CPU for the stages that run Python for every
    frame (tracking and rules, encoding, the sinks' writers); ``null``: no
    pinning (see docs/operations.md, "Threads, the GIL and small torch
    calls"). ``model_process``: run the model in a process of its own, so
    that its torch calls never wait for those stages' Python (same section).
    ``model_timeout``: with ``model_process``, seconds the model's process
    may take to answer one batch before it is ended and started again (its
    batches count as failed); a model that hangs never stalls the service.
    ``model_nice``: with ``model_process``, how many steps of CPU priority
    (``nice``) the model's process runs below the service's own, so that on
    a saturated CPU the per-frame host work (decoding, tracking and rules,
    publishing, fleet lease renewals, the console) is scheduled ahead of the
    next forward pass instead of waiting behind it (0: the same priority).
    ``drain_timeout``: seconds to finish in-flight frames and flush
    Redis on shutdown.
    """

    camera_queue: int = Field(default=2, ge=1, le=10_000)
    results_queue: int = Field(default=8, ge=1, le=10_000)
    publish_queue: int = Field(default=64, ge=1, le=100_000)
    torch_threads: int | None = Field(default=None, ge=1, le=1024)
    host_cpu: Annotated[int, Field(ge=0, le=65535)] | Literal["last"] | None = Field(
        default=None,
        description="the CPU for tracking, rules, encoding and the sinks' threads: a number, "
        "or last (the highest-numbered CPU this process may use); null: not pinned",
    )
    model_process: bool = Field(
        default=False,
        description="run the model in its own process (frames through shared memory), so that "
        "tracking, rules and publishing never hold the GIL the model's torch calls need",
    )
    model_timeout: float = Field(
        default=120.0,
        gt=0,
        le=3600,
        description="model_process: seconds one batch may take before the model's process "
        "is ended and started again",
    )
    model_nice: int = Field(
        default=10,
        ge=0,
        le=19,
        description="model_process: CPU priority steps (nice) of the model's process below "
        "the service's own, so decoding, tracking and publishing run first on a busy CPU",
    )
    drain_timeout: float = Field(default=15.0, gt=0, le=3600)
    status_interval: float = Field(
        default=10.0, gt=0, le=3600, description="seconds between status log lines"
    )

    def pinned_cpu(self) -> int | None:
        """The CPU of ``host_cpu`` (``last`` resolved), or ``None``.

        Raises ``ValueError`` naming the field when ``host_cpu_problem`` finds one.
        """
        problem = self.host_cpu_problem()
        if problem is not None:
            raise ValueError(f"runtime.host_cpu: {problem[0]}; {problem[1]}")
        if self.host_cpu is None:
            return None
        return max(usable_cpus()) if self.host_cpu == "last" else self.host_cpu

    def host_cpu_problem(self) -> tuple[str, str] | None:
        """Why ``host_cpu`` cannot be used here, as ``(problem, fix)``; ``None`` when it can."""
        if self.host_cpu is None:
            return None
        import os

        if not hasattr(os, "sched_setaffinity"):
            return "threads cannot be pinned to a CPU on this system", "remove runtime.host_cpu"
        cpus = sorted(usable_cpus())
        if self.host_cpu != "last" and self.host_cpu not in cpus:
            return (
                f"CPU {self.host_cpu} is not one this process may run on",
                f"use one of {', '.join(map(str, cpus))}, last, or remove runtime.host_cpu",
            )
        return None

    def inference_threads(self) -> int:
        """``torch_threads``, or the usable cores less one (at least one)."""
        if self.torch_threads is not None:
            return self.torch_threads
        return max(1, len(usable_cpus()) - 1)


def usable_cpus() -> set[int]:
    """The CPUs this process may run on (all of ``os.cpu_count()`` off Linux)."""
    import os

    try:
        return set(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return set(range(os.cpu_count() or 1))
