"""Process groups for multi-GPU / multi-node training under ``torchrun``.

``torchrun --nproc_per_node=N -m streamseg train CONFIG`` starts N processes
with ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and
``MASTER_PORT`` set; :func:`init_from_env` joins them into one group (NCCL on
GPUs, gloo on CPUs). Without those variables training runs in one process.
"""

from __future__ import annotations

import dataclasses
import datetime
import os

import torch
import torch.distributed as dist

__all__ = [
    "DistInfo",
    "all_reduce_mean",
    "barrier",
    "broadcast_object",
    "init_from_env",
    "shutdown",
]


@dataclasses.dataclass(frozen=True)
class DistInfo:
    """This process's place in the group."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        """Rank 0 logs, evaluates and writes checkpoints."""
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1


def init_from_env(device_type: str, timeout_s: float = 1800.0) -> DistInfo:
    """Join the process group torchrun describes in the environment, if any.

    Args:
        device_type: ``"cuda"`` uses NCCL and pins this process to GPU
            ``LOCAL_RANK``; anything else uses gloo.
        timeout_s: how long collective operations wait (evaluation on rank 0
            makes the others wait at a barrier).
    """
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return DistInfo()
    rank = int(os.environ["RANK"])
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if not dist.is_initialized():
        backend = "nccl" if device_type == "cuda" else "gloo"
        if device_type == "cuda":
            torch.cuda.set_device(local)
        dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout_s))
    return DistInfo(rank=rank, world_size=world, local_rank=local)


def barrier(info: DistInfo) -> None:
    if info.enabled:
        dist.barrier()


def all_reduce_mean(values: dict[str, float], info: DistInfo) -> dict[str, float]:
    """Average scalar values over the group (for logging)."""
    if not info.enabled or not values:
        return values
    keys = sorted(values)
    t = torch.tensor([values[k] for k in keys], dtype=torch.float64)
    if dist.get_backend() == "nccl":
        t = t.cuda()
    dist.all_reduce(t)
    t = t.cpu() / info.world_size
    return {k: float(v) for k, v in zip(keys, t.tolist(), strict=True)}


def broadcast_object(obj: object, info: DistInfo) -> object:
    """Rank 0's ``obj`` on every rank."""
    if not info.enabled:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def shutdown(info: DistInfo) -> None:
    if info.enabled and dist.is_initialized():
        dist.destroy_process_group()
