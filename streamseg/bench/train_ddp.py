"""``bench train --processes 2``: data-parallel training against one process, timed.

Two processes (gloo, one CPU thread each, the model in
``DistributedDataParallel`` as ``streamseg train`` under ``torchrun`` wraps
it) each run ``accumulation`` micro-batches of ``batch`` images per
iteration; one process (one thread) runs ``2 * accumulation`` micro-batches:
the same images per iteration, the same effective batch. Each is timed as
:mod:`streamseg.bench.train` times one process (rank 0's phases: its
backward includes waiting for the gradients' all-reduce), and
``scaling_efficiency`` is ``images_per_s(2 processes) / (2 *
images_per_s(1 process))``: 1.0 when two processes train twice as fast.
On a machine whose cores are busy with other work that figure measures the
machine; ``cpu_efficiency`` (CPU milliseconds per image of the one process
over those of a rank) measures what data parallelism itself costs: the
gradients' all-reduce and DDP's bookkeeping.
That the two follow the same loss curve is a test
(``tests/train/test_train_ddp.py``); here the ranks see the same images,
which changes nothing in the time.
"""

from __future__ import annotations

import dataclasses
import os
import socket
from typing import Any

import torch

from streamseg.bench.train import (
    TrainBenchSpec,
    build_bench,
    peak_memory_mb,
    reset_peak_memory,
    summarize,
    time_iteration,
)

__all__ = ["bench_data_parallel"]


def bench_data_parallel(spec: TrainBenchSpec) -> dict[str, Any]:
    """Time ``spec`` in two processes and in one with twice the accumulation (CPU)."""
    if torch.device(spec.device).type != "cpu":
        raise ValueError("--processes 2 runs on the CPU (gloo); on GPUs use torchrun")
    one = _spawn(dataclasses.replace(spec, accumulation=2 * spec.accumulation), world=1)
    two = _spawn(spec, world=2)
    return {
        "benchmark": "train_data_parallel",
        **spec.settings(),
        "torch": torch.__version__,
        "threads_per_process": 1,
        "one_process": one,
        "two_processes": two,
        "scaling_efficiency": round(two["images_per_s"] / (2 * one["images_per_s"]), 3),
        "cpu_efficiency": round(_cpu_per_image(one) / _cpu_per_image(two, ranks=2), 3),
    }


def _cpu_per_image(result: dict[str, Any], ranks: int = 1) -> float:
    """Rank 0's CPU milliseconds per image it trains on."""
    return float(result["cpu_ms"]["total"]) / (result["images_per_iteration"] / ranks)


def _spawn(spec: TrainBenchSpec, *, world: int) -> dict[str, Any]:
    """Rank 0's summary of ``spec`` run by ``world`` processes."""
    import torch.multiprocessing as mp

    context = mp.get_context("spawn")
    results = context.SimpleQueue()
    port = _free_port()
    procs = [
        context.Process(target=_worker, args=(spec, rank, world, port, results), daemon=True)
        for rank in range(world)
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join()
    failed = [p.exitcode for p in procs if p.exitcode != 0]
    if failed:
        raise RuntimeError(f"a benchmark process failed (exit codes {failed})")
    result: dict[str, Any] = results.get()
    if "error" in result:
        raise RuntimeError(result["error"])
    return result


def _worker(spec: TrainBenchSpec, rank: int, world: int, port: int, results: Any) -> None:
    torch.set_num_threads(1)
    try:
        result = _run(spec, rank, world, port)
    except Exception as exc:  # reported by the parent
        result = {"error": f"rank {rank}: {type(exc).__name__}: {exc}"}
        if rank == 0 or world == 1:
            results.put(result)
        raise SystemExit(1) from None
    if rank == 0:
        results.put(result)


def _run(spec: TrainBenchSpec, rank: int, world: int, port: int) -> dict[str, Any]:
    import torch.distributed as dist

    if world > 1:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        parts = build_bench(spec)
        if world > 1:
            parts.trainer.model = torch.nn.parallel.DistributedDataParallel(
                parts.trainer.model, find_unused_parameters=True
            )
        rows = []
        for i in range(spec.warmup + spec.iters):
            if i == spec.warmup:
                reset_peak_memory(parts.device)
            row, _ = time_iteration(parts, number=i * world + rank)
            if i >= spec.warmup:
                rows.append(row)
        images = spec.batch * spec.accumulation * world
        return {
            "processes": world,
            "accumulation": spec.accumulation,
            **summarize(rows, images),
            "peak_memory_mb_rank0": peak_memory_mb(parts.device),
        }
    finally:
        if world > 1:
            dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port
