"""Mask to COCO RLE on the GPU: run boundaries on the device, strings on the host.

``_boundary_kernel`` reads a tile of a mask and marks, in COCO's
column-major order, every pixel that differs from the pixel before it (the
first pixel is compared with 0). The run lengths are the distances between
marks, computed on the device too; only the run lengths cross to the host,
where :func:`streamseg.ops.rle.counts_to_string` writes COCO's strings
(:func:`masks_to_rle`, what :func:`streamseg.ops.masks_to_rle` runs for
CUDA masks).
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl
from torch import Tensor
from torch.library import triton_op, wrap_triton

from streamseg.ops._launch import launch
from streamseg.ops.rle import counts_to_string

__all__ = ["boundaries", "masks_to_rle", "run_lengths"]

TILE_Y = 64
TILE_X = 64


@triton.jit
def _boundary_kernel(masks, flags, height, width, TILE_Y: tl.constexpr, TILE_X: tl.constexpr):
    k = tl.program_id(0)
    y = tl.program_id(1) * TILE_Y + tl.arange(0, TILE_Y)[:, None]
    x = tl.program_id(2) * TILE_X + tl.arange(0, TILE_X)[None, :]
    live = (y < height) & (x < width)
    mask = masks + k.to(tl.int64) * height * width
    cur = tl.load(mask + y * width + x, mask=live, other=0) != 0
    # Column-major predecessor: the pixel above, or the last pixel of the
    # previous column; none (0) for the first pixel.
    prev_y = tl.where(y > 0, y - 1, height - 1)
    prev_x = tl.where(y > 0, x, x - 1)
    has_prev = live & (prev_x >= 0)
    prev = tl.load(mask + prev_y * width + prev_x, mask=has_prev, other=0) != 0
    dest = flags + k.to(tl.int64) * height * width + x * height + y
    tl.store(dest, cur != prev, mask=live)


@triton_op("streamseg_triton::rle_boundaries", mutates_args=())
def boundaries(masks: Tensor) -> Tensor:
    """``(N, h, w)`` bool/uint8 masks -> ``(N, h * w)`` bool: pixel ``p`` (column-major)
    starts a run (differs from pixel ``p - 1``, or is set when ``p == 0``)."""
    n, height, width = masks.shape
    flags = torch.empty((n, height * width), dtype=torch.bool, device=masks.device)
    if flags.numel() == 0:
        return flags
    data = masks.contiguous()
    if data.dtype == torch.bool:
        data = data.view(torch.uint8)

    def kernel() -> Tensor:
        grid = (n, triton.cdiv(height, TILE_Y), triton.cdiv(width, TILE_X))
        wrap_triton(_boundary_kernel)[grid](
            data, flags, height, width, TILE_Y=TILE_Y, TILE_X=TILE_X
        )
        return flags

    return launch("masks_to_rle", masks, kernel, lambda: _boundaries_reference(masks))


def _boundaries_reference(masks: Tensor) -> Tensor:
    """:func:`boundaries` in torch: each column-major pixel against the one before."""
    flat = (masks != 0).transpose(1, 2).reshape(masks.shape[0], -1)
    return flat != torch.nn.functional.pad(flat[:, :-1], (1, 0))


def _boundaries_fake(masks: Tensor) -> Tensor:
    n, height, width = masks.shape
    return masks.new_empty((n, height * width), dtype=torch.bool)


boundaries.register_fake(_boundaries_fake)


def run_lengths(masks: Tensor) -> tuple[Tensor, Tensor]:
    """COCO run lengths of ``(N, h, w)`` masks, computed where the masks are.

    Returns ``counts`` (int64, every mask's runs in turn, each mask's first
    run being its zeros, possibly empty) and ``per_mask`` (int64 ``(N,)``).
    """
    n, height, width = masks.shape
    length = height * width
    mask_of, pos = torch.nonzero(boundaries(masks), as_tuple=True)
    marks = torch.bincount(mask_of, minlength=n)
    # Each mask's runs: one per mark, plus the last run to the mask's end.
    per_mask = marks + 1
    first = torch.cat((mask_of.new_ones(1, dtype=torch.bool), mask_of[1:] != mask_of[:-1]))
    prev = torch.where(first, 0, torch.cat((pos.new_zeros(1), pos[:-1])))
    counts = pos.new_zeros(int(n + mask_of.numel()))
    counts[torch.arange(mask_of.numel(), device=pos.device) + mask_of] = pos - prev
    last = torch.zeros(n, dtype=pos.dtype, device=pos.device).scatter_reduce(
        0, mask_of, pos, "amax"
    )
    ends = torch.cumsum(per_mask, 0) - 1
    counts[ends] = length - last
    return counts, per_mask


def masks_to_rle(masks: Tensor) -> list[dict[str, Any]]:
    """``(N, h, w)`` bool/uint8 masks -> COCO RLEs ``{"size": [h, w], "counts": str}``."""
    counts, per_mask = run_lengths(masks)
    size = [int(masks.shape[1]), int(masks.shape[2])]
    strings = counts_to_string(counts.cpu(), per_mask.cpu())
    return [{"size": list(size), "counts": text} for text in strings]
