"""COCO compressed RLE in pure PyTorch (the reference of the native encoder).

A mask ``(h, w)`` is read column-major (down the first column, then the
next); ``counts`` are alternating run lengths starting with a run of zeros
(possibly empty). The string form is COCO's: from the third run on, each
count is stored as the difference to the count two before, written in
little-endian groups of 5 bits, each group a character ``48 + bits``, with
``0x20`` set on every group but the last and sign extension from bit
``0x10`` of the last group. The result equals ``pycocotools.mask.encode``
(with ``counts`` as ``str`` instead of ``bytes``).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

__all__ = ["counts_to_string", "mask_to_rle", "masks_to_rle", "rle_to_mask", "string_to_counts"]

_MAX_GROUPS = 13  # 5-bit groups in a signed 64-bit value


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


def _encode_values(values: Tensor) -> tuple[Tensor, Tensor]:
    """COCO's variable-length code of int64 ``values`` -> (chars ``(V, G)`` uint8, lengths)."""
    shifts = torch.arange(_MAX_GROUPS, device=values.device) * 5
    rest = values[:, None] >> shifts[None, :]  # arithmetic shift, as in C on longs
    groups = rest & 0x1F
    after = rest >> 5
    more = torch.where((groups & 0x10) != 0, after != -1, after != 0)
    # A value's length is one past its first group with nothing more to say.
    length = torch.argmin(more.to(torch.int8), dim=1) + 1
    take = torch.arange(_MAX_GROUPS, device=values.device)[None, :] < length[:, None]
    cont = torch.arange(_MAX_GROUPS, device=values.device)[None, :] < (length - 1)[:, None]
    chars = (groups | (cont.long() << 5)) + 48
    chars = torch.where(take, chars, 0)
    return chars.to(torch.uint8), length


def counts_to_string(counts: Tensor, per_mask: Tensor) -> list[str]:
    """Run lengths (as from :func:`run_lengths`) -> one COCO string per mask."""
    starts = torch.cumsum(per_mask, 0) - per_mask
    mask_of = torch.repeat_interleave(torch.arange(per_mask.numel()), per_mask.cpu()).to(
        counts.device
    )
    pos = torch.arange(counts.numel(), device=counts.device) - starts[mask_of]
    values = counts.clone()
    delta = pos > 2
    values[delta] -= counts[torch.nonzero(delta).squeeze(1) - 2]
    chars, lengths = _encode_values(values)
    flat = chars[chars != 0].cpu().numpy().tobytes()
    chars_per_mask = torch.zeros_like(per_mask).index_add_(0, mask_of, lengths).cpu().tolist()
    out = []
    offset = 0
    for size in chars_per_mask:
        out.append(flat[offset : offset + size].decode("ascii"))
        offset += size
    return out


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
