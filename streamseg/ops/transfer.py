"""Small host tensors onto the device without making the host wait for the GPU.

A blocking copy from the host to a GPU (``tensor.to("cuda")``,
``torch.tensor(data, device="cuda")``) is a host sync: CUDA synchronises
the stream, so the CPU waits until every kernel queued before it has run,
and the GPU then idles until the CPU queues more. A ``non_blocking`` copy
from pinned (page-locked) memory is queued like a kernel instead. PyTorch's
caching host allocator (behind ``Tensor.pin_memory``) hands out the pinned
block and keeps it until the copy has run, so a temporary is safe.

:func:`to_device` is that copy for the small tables post-processing needs
(per-image sizes, scales, box-coder weights). Frames go through
``streamseg.segment.staging``, which reuses its pinned buffers.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["to_device"]


def to_device(tensor: Tensor, device: torch.device | str) -> Tensor:
    """``tensor`` (on the host) on ``device``, copied without a host sync.

    On the CPU it is returned as it is; to CUDA it goes from pinned memory
    with ``non_blocking=True``; to any other device (the emulated GPU of
    :mod:`streamseg.bench.emulated`) with ``non_blocking=True``.
    """
    device = torch.device(device)
    if device.type == "cpu":
        return tensor
    if device.type == "cuda" and torch.cuda.is_available():
        tensor = tensor.pin_memory()
    return tensor.to(device, non_blocking=True)
