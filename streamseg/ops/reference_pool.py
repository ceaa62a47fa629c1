"""RoIAlign in batched tensor expressions (the PyTorch reference), one level or several at once.

torchvision's RoIAlign: each output bin of a RoI averages ``grid_h x
grid_w`` bilinear samples of the feature map, the grid side being
``sampling_ratio`` or, when that is ``<= 0``, ``ceil(roi_side / out_side)``
per RoI. A sample outside ``[-1, size]`` counts as zero; one inside is
clamped to the map and read from its four neighbours.

:func:`roi_align_levels` pools every RoI from its own FPN level in one pass:
the levels are flattened into one ``(C, sum B*Hl*Wl)`` buffer and each RoI
carries its level's height, width, scale and offset into it, so no step
depends on how many RoIs fall on a level. The work is one gather of four
taps per sample point of the grid (``grid_h * grid_w`` of them: 4 for a
sampling ratio of 2), over every RoI at once; RoIs are split in chunks only
when one gather would pass :data:`GATHER_BUDGET` elements.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from streamseg.ops.transfer import to_device

__all__ = ["GATHER_BUDGET", "roi_align", "roi_align_levels"]

# Largest temporary one gather may make, in elements (512 MiB of float32): a
# batch of 6 frames x 100 detections pools their 14x14 masks in one chunk.
GATHER_BUDGET = 1 << 27


def roi_align(
    input: Tensor,
    rois: Tensor,
    output_size: tuple[int, int],
    spatial_scale: float = 1.0,
    sampling_ratio: int = -1,
    aligned: bool = False,
) -> Tensor:
    """RoIAlign (torchvision semantics), differentiable w.r.t. ``input``.

    ``input (B, C, H, W)``, ``rois (K, 5)`` rows ``(batch_index, x1, y1, x2, y2)``
    in image pixels, scaled by ``spatial_scale`` -> ``(K, C, oh, ow)``.
    """
    levels = torch.zeros(rois.shape[0], dtype=torch.int64, device=rois.device)
    return roi_align_levels(
        [input], rois, levels, [spatial_scale], output_size, sampling_ratio, aligned
    )


def roi_align_levels(
    features: Sequence[Tensor],
    rois: Tensor,
    levels: Tensor,
    scales: Sequence[float],
    output_size: tuple[int, int],
    sampling_ratio: int,
    aligned: bool,
) -> Tensor:
    """RoIAlign of each RoI from ``features[levels[k]]`` (``-1``: no level, zeros).

    Args:
        features: per level ``(B, C, Hl, Wl)``, one dtype and device.
        rois: ``(K, 5)`` rows ``(batch_index, x1, y1, x2, y2)`` image pixels.
        levels: ``(K,)`` int64 level of each RoI.
        scales: per level, feature pixels per image pixel.
        output_size: ``(oh, ow)`` bins.
        sampling_ratio, aligned: as torchvision's ``roi_align``.

    Returns:
        ``(K, C, oh, ow)`` of the features' dtype.
    """
    first = features[0]
    oh, ow = output_size
    k, channels = rois.shape[0], first.shape[1]
    if k == 0 or any(f.shape[-1] * f.shape[-2] == 0 for f in features):
        return first.new_zeros((k, channels, oh, ow))
    cdtype = first.dtype if first.dtype in (torch.float32, torch.float64) else torch.float32
    flat = torch.cat([f.transpose(0, 1).reshape(channels, -1) for f in features], dim=1)
    rois = rois.detach().to(cdtype)
    geometry = _level_table(features, scales, rois.device, cdtype)
    per_level = [g[levels.clamp(min=0)] for g in geometry]
    live = levels >= 0
    grid = _grid(rois, per_level[3], (oh, ow), sampling_ratio, aligned)
    if sampling_ratio > 0:
        samples = (sampling_ratio, sampling_ratio)
    else:  # a sync, only for adaptive grids (training's mask targets)
        samples = (max(int(grid[4].max()), 1), max(int(grid[5].max()), 1))
    flat = flat.to(cdtype)
    batch = rois[:, 0].long()
    step = max(1, GATHER_BUDGET // (channels * oh * ow * 4))
    parts = [
        _pool_chunk(
            flat,
            [t[lo : lo + step] for t in (*per_level[:3], *grid, batch, live)],
            (oh, ow),
            samples,
        )
        for lo in range(0, k, step)
    ]
    out = parts[0] if len(parts) == 1 else torch.cat(parts)
    return out.to(first.dtype)


def _level_table(
    features: Sequence[Tensor], scales: Sequence[float], device: torch.device, dtype: torch.dtype
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Per level: height, width, start in the flat buffer (int64) and scale.

    Built on the host and sent with a non-blocking copy each (no sync,
    :mod:`streamseg.ops.transfer`).
    """
    sizes = [(int(f.shape[-2]), int(f.shape[-1])) for f in features]
    starts, start = [], 0
    for f, (h, w) in zip(features, sizes, strict=True):
        starts.append(start)
        start += int(f.shape[0]) * h * w
    ints = to_device(
        torch.tensor([[h, w, s] for (h, w), s in zip(sizes, starts, strict=True)]), device
    )
    floats = to_device(torch.tensor([float(s) for s in scales], dtype=dtype), device)
    return ints[:, 0], ints[:, 1], ints[:, 2], floats


def _grid(
    rois: Tensor, scale: Tensor, pooled: tuple[int, int], sampling_ratio: int, aligned: bool
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    """Per RoI: start y/x, bin height/width and grid size along y/x (int64)."""
    offset = 0.5 if aligned else 0.0
    sx = rois[:, 1] * scale - offset
    sy = rois[:, 2] * scale - offset
    rw = rois[:, 3] * scale - offset - sx
    rh = rois[:, 4] * scale - offset - sy
    if not aligned:
        rw = rw.clamp(min=1.0)
        rh = rh.clamp(min=1.0)
    bh, bw = rh / pooled[0], rw / pooled[1]
    if sampling_ratio > 0:
        gh = torch.full_like(sx, sampling_ratio, dtype=torch.int64)
        return sy, sx, bh, bw, gh, gh
    return sy, sx, bh, bw, torch.ceil(rh / pooled[0]).long(), torch.ceil(rw / pooled[1]).long()


def _taps(
    start: Tensor, size: Tensor, grid: Tensor, limit: Tensor, pooled: int, gmax: int
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """Bilinear taps along one axis, ``(K, pooled, gmax)`` each: low and high
    index, their weights, and whether the sample counts (inside ``[-1, limit]``
    and within the RoI's grid)."""
    dtype = start.dtype
    p = torch.arange(pooled, device=start.device, dtype=dtype)
    i = torch.arange(gmax, device=start.device, dtype=dtype)
    g = grid.clamp(min=1).to(dtype)[:, None, None]
    b = size[:, None, None]
    lim = limit[:, None, None]
    coord = (start[:, None, None] + p[None, :, None] * b) + (i[None, None, :] + 0.5) * b / g
    valid = (coord >= -1.0) & (coord <= lim) & (i[None, None, :] < grid[:, None, None])
    coord = coord.clamp(min=0)
    low = coord.floor().long()
    edge = low >= lim - 1
    low = torch.where(edge, lim - 1, low)
    high = torch.where(edge, lim - 1, low + 1)
    coord = torch.where(edge, low.to(dtype), coord)
    frac = coord - low.to(dtype)
    return low, high, 1.0 - frac, frac, valid


def _pool_chunk(
    flat: Tensor, rows: list[Tensor], pooled: tuple[int, int], samples: tuple[int, int]
) -> Tensor:
    """``(k, C, oh, ow)`` for one chunk of RoIs (``rows``: their level's height,
    width and start, their grid, image and whether they have a level)."""
    height, width, start, sy, sx, bh, bw, gh, gw, batch, live = rows
    oh, ow = pooled
    y_lo, y_hi, y_wl, y_wh, y_ok = _taps(sy, bh, gh, height, oh, samples[0])
    x_lo, x_hi, x_wl, x_wh, x_ok = _taps(sx, bw, gw, width, ow, samples[1])
    base = (start + batch * height * width)[:, None, None, None, None]
    # (k, oh, 2, ow, 2) tap indices and weights of one sample point, rows as (k, oh, 2, 1, 1).
    rows_i = torch.stack((y_lo, y_hi), dim=2) * width[:, None, None, None]
    rows_w = torch.stack((y_wl, y_wh), dim=2) * y_ok[:, :, None, :]
    cols_i = torch.stack((x_lo, x_hi), dim=2)
    cols_w = torch.stack((x_wl, x_wh), dim=2) * x_ok[:, :, None, :]
    out = flat.new_zeros((flat.shape[0], live.shape[0], oh, ow))
    for a in range(samples[0]):
        for b in range(samples[1]):
            index = (base + rows_i[..., a, None, None]) + cols_i[:, None, None, :, :, b]
            weight = rows_w[..., a, None, None] * cols_w[:, None, None, :, :, b]
            taps = flat[:, index]  # (C, k, oh, 2, ow, 2)
            out += (taps * weight).sum(dim=(3, 5))
    count = (gh * gw).clamp(min=1).to(flat.dtype)
    out = out / count[None, :, None, None]
    return torch.where(live[None, :, None, None], out, 0.0).transpose(0, 1)
