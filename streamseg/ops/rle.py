"""COCO compressed RLE: the reference encoder (PyTorch runs, numpy strings) and crops.

A mask ``(h, w)`` is read column-major (down the first column, then the
next); ``counts`` are alternating run lengths starting with a run of zeros
(possibly empty). The string form is COCO's: from the third run on, each
count is stored as the difference to the count two before, written in
little-endian groups of 5 bits, each group a character ``48 + bits``, with
``0x20`` set on every group but the last and sign extension from bit
``0x10`` of the last group. The result equals ``pycocotools.mask.encode``
(with ``counts`` as ``str`` instead of ``bytes``).

:func:`crops_to_rle` writes the same strings from box-local crops (a mask
known to be zero outside an integer box): its work follows the crops' area,
not the frame's, since the runs of zeros between the box's columns and
around it are counted, not scanned.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

__all__ = [
    "counts_to_string",
    "crop_run_lengths",
    "crops_to_rle",
    "mask_to_rle",
    "masks_to_rle",
    "rle_to_mask",
    "string_to_counts",
]


def run_lengths(masks: Tensor) -> tuple[Tensor, Tensor]:
    """Column-major runs of ``(N, h, w)`` bool masks.

    Returns ``counts`` (int64, all masks' runs concatenated, each mask's
    starting with its zero run) and ``per_mask`` (int64 ``(N,)`` number of
    runs of each mask).
    """
    n = masks.shape[0]
    flat = masks.transpose(1, 2).reshape(n, -1).to(torch.int8)
    length = flat.shape[1]
    # A run starts at every change and at every mask's first pixel; a leading
    # 1 gets an empty zero run before it.
    prev = torch.cat((torch.zeros_like(flat[:, :1]), flat[:, :-1]), dim=1)
    starts = flat != prev
    starts[:, 0] = True
    row, col = torch.nonzero(starts, as_tuple=True)
    ends = torch.cat((col[1:], col.new_full((1,), length)))
    new_mask = torch.cat((row[1:] != row[:-1], row.new_ones(1, dtype=torch.bool)))
    ends = torch.where(new_mask, length, ends)
    lengths = ends - col
    # Empty leading zero run where the first pixel is set.
    lead = (flat[:, 0] == 1).long()
    per_mask = torch.bincount(row, minlength=n) + lead
    out_pos = torch.arange(lengths.numel(), device=masks.device) + torch.cumsum(lead, 0)[row]
    counts = lengths.new_zeros(int(per_mask.sum()))
    counts[out_pos] = lengths
    return counts, per_mask


def counts_to_string(counts: Tensor | np.ndarray, per_mask: Tensor | np.ndarray) -> list[str]:
    """Run lengths (as from :func:`run_lengths`) -> one COCO string per mask.

    Runs on the host in numpy (the values are few: two per column a mask
    crosses); ``counts`` and ``per_mask`` may be tensors on any device.
    """
    counts = _host_int64(counts)
    per_mask = _host_int64(per_mask)
    n = per_mask.size
    mask_of = np.repeat(np.arange(n), per_mask)
    starts = np.cumsum(per_mask) - per_mask
    pos = np.arange(counts.size) - starts[mask_of]
    values = counts.copy()
    delta = np.flatnonzero(pos > 2)
    values[delta] -= counts[delta - 2]
    # 5-bit groups a value needs with its sign bit: one more per bound it reaches.
    magnitude = np.where(values < 0, ~values, values)
    length = np.ones(values.size, dtype=np.int64)
    bound = 16
    while bound < (1 << 63):
        over = magnitude >= bound
        if not over.any():
            break
        length += over
        bound <<= 5
    k = np.arange(int(length.max()) if length.size else 1)
    groups = (values[:, None] >> (5 * k)) & 0x1F  # arithmetic shift, as in C on longs
    chars = groups | np.where(k < (length - 1)[:, None], 0x20, 0)
    text = (chars + 48).astype(np.uint8)[k < length[:, None]].tobytes()
    sizes = np.bincount(mask_of, weights=length, minlength=n).astype(np.int64)
    ends = np.cumsum(sizes)
    pairs = zip(ends.tolist(), sizes.tolist(), strict=True)
    return [text[end - size : end].decode("ascii") for end, size in pairs]


def _host_int64(values: Tensor | np.ndarray) -> np.ndarray:
    if isinstance(values, Tensor):
        return values.to("cpu", torch.int64).numpy()
    return np.asarray(values, dtype=np.int64)


def string_to_counts(text: str | bytes) -> list[int]:
    """Decode a COCO RLE string into run lengths (inverse of :func:`counts_to_string`)."""
    data = text.encode("ascii") if isinstance(text, str) else text
    counts: list[int] = []
    p = 0
    while p < len(data):
        x = 0
        k = 0
        more = True
        while more:
            if p >= len(data):
                raise ValueError("truncated COCO RLE string")
            c = data[p] - 48
            x |= (c & 0x1F) << (5 * k)
            more = bool(c & 0x20)
            p += 1
            k += 1
            if not more and (c & 0x10):
                x |= -1 << (5 * k)
        if len(counts) > 2:
            x += counts[-2]
        counts.append(x)
    return counts


def masks_to_rle(masks: Tensor) -> list[dict[str, Any]]:
    """``(N, h, w)`` bool masks -> COCO compressed RLEs ``{"size": [h, w], "counts": str}``."""
    n, h, w = masks.shape
    if n == 0:
        return []
    if h * w == 0:
        return [{"size": [h, w], "counts": "0"} for _ in range(n)]
    counts, per_mask = run_lengths(masks.bool())
    strings = counts_to_string(counts, per_mask)
    return [{"size": [h, w], "counts": s} for s in strings]


def crop_run_lengths(
    crops: Sequence[np.ndarray], boxes: np.ndarray, image_size: tuple[int, int]
) -> tuple[np.ndarray, np.ndarray]:
    """Frame-size COCO runs of bool ``crops`` placed at integer ``boxes`` in the frame.

    ``boxes`` ``(N, 4)`` int64 ``x0, y0, x1, y1`` (exclusive ends, inside
    the frame), ``crops[i]`` of shape ``(y1 - y0, x1 - x0)``. Returns the
    runs of the frame-size masks that are each crop in its box and zero
    elsewhere, as :func:`run_lengths` does: ``counts`` (int64, all masks'
    runs concatenated) and ``per_mask`` (int64 ``(N,)``).

    Every crop is written transposed (column-major) into one flat buffer,
    each column between a zero above and a zero below, so that a run of
    ones starts at a rise and ends at a fall of the buffer and no run spans
    two columns or two crops; a rise or a fall at crop row ``r`` of column
    ``c`` is frame position ``(x0 + c) * height + y0 + r``. Counting the
    runs between those positions costs the crops' area, not the frame's.
    """
    h, w = int(image_size[0]), int(image_size[1])
    n = len(crops)
    heights = (boxes[:, 3] - boxes[:, 1]) + 2
    sizes = (boxes[:, 2] - boxes[:, 0]) * heights
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    buffer = np.zeros(int(offsets[-1]) + 1, dtype=np.bool_)
    for i, crop in enumerate(crops):
        if crop.size:
            column = buffer[offsets[i] : offsets[i + 1]].reshape(crop.shape[1], -1)
            column[:, 1:-1] = crop.T
    # Index k of a change is between buffer[k] and buffer[k + 1].
    change = np.flatnonzero(buffer[1:] != buffer[:-1]) + 1
    owner = np.searchsorted(offsets, change, side="right") - 1
    col, row = np.divmod(change - offsets[owner], heights[owner])
    edges = (boxes[owner, 0] + col) * h + boxes[owner, 1] + row - 1
    # A run that reaches the frame's bottom and one that starts at the top of
    # the next column are one run: drop the fall and the rise between them.
    joined = np.flatnonzero((edges[1:] == edges[:-1]) & (owner[1:] == owner[:-1]))
    if joined.size:
        drop = np.concatenate((joined, joined + 1))
        edges, owner = np.delete(edges, drop), np.delete(owner, drop)
    first = np.ones(edges.size, dtype=np.bool_)
    first[1:] = owner[1:] != owner[:-1]
    previous = np.empty_like(edges)
    previous[1:] = edges[:-1]
    counts = np.where(first, edges, edges - previous)
    # Each mask ends with the zeros after its last one (or, without ones,
    # the whole frame), unless a one is the frame's last pixel.
    edges_per_mask = np.bincount(owner, minlength=n)
    ends = np.cumsum(edges_per_mask)
    last = np.where(edges_per_mask > 0, edges[np.maximum(ends - 1, 0)] if edges.size else 0, 0)
    closing = h * w - last
    closed = (closing > 0) | (edges_per_mask == 0)
    counts = np.insert(counts, ends[closed], closing[closed])
    return counts, edges_per_mask + closed


def crops_to_rle(
    crops: Sequence[Tensor], boxes: Tensor, image_size: tuple[int, int]
) -> list[dict[str, Any]]:
    """Box-local bool crops -> the frame-size COCO compressed RLEs of :func:`masks_to_rle`.

    ``boxes`` ``(N, 4)`` integer ``x0, y0, x1, y1`` inside the frame;
    ``crops[i]`` bool ``(y1 - y0, x1 - x0)``. The result is byte for byte
    what :func:`masks_to_rle` gives for the frame-size masks (the crops
    pasted into zeros), at a cost that follows the crops' area.
    """
    h, w = int(image_size[0]), int(image_size[1])
    if not crops:
        return []
    arrays = [c.to("cpu", torch.bool).numpy() for c in crops]
    counts, per_mask = crop_run_lengths(arrays, boxes.to("cpu", torch.int64).numpy(), (h, w))
    strings = counts_to_string(counts, per_mask)
    return [{"size": [h, w], "counts": text} for text in strings]


def mask_to_rle(mask: Tensor) -> dict[str, Any]:
    """``(h, w)`` bool mask -> COCO compressed RLE ``{"size": [h, w], "counts": str}``."""
    return masks_to_rle(mask[None])[0]


def rle_to_mask(rle: dict[str, Any]) -> Tensor:
    """COCO RLE (compressed ``str``/``bytes`` counts, or a list of ints) -> ``(h, w)`` bool."""
    h, w = (int(v) for v in rle["size"])
    raw = rle["counts"]
    counts = list(raw) if isinstance(raw, list) else string_to_counts(raw)
    total = sum(counts)
    if total != h * w or any(c < 0 for c in counts):
        raise ValueError(
            f"RLE counts sum to {total} (or are negative) but size {h}x{w} needs {h * w} pixels"
        )
    values = torch.arange(len(counts)) % 2 == 1
    flat = torch.repeat_interleave(values, torch.tensor(counts, dtype=torch.int64))
    return flat.reshape(w, h).t().contiguous()
