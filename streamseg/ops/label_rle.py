"""COCO RLE of every class of a label map in one pass over the map.

``label_map_rle(label_map, labels)`` gives what ``masks_to_rle(label_map ==
label)`` gives for each label, without forming one frame-size mask per
label: the map is read once (column-major, as COCO runs go), cut into runs
of equal labels, and each label's RLE counts are the gaps between its own
runs and their lengths. The work follows the frame once plus the number of
runs, not the frame times the number of regions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from streamseg.ops.rle import counts_to_string

__all__ = ["label_map_rle"]


def _runs(label_map: Tensor) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(starts, lengths, values)`` of the column-major runs of ``label_map (H, W)``.

    On the CPU in numpy (its transpose and compare are several times faster
    than torch's on int16); on a GPU in torch, only the run starts come back.
    """
    if label_map.device.type == "cpu":
        flat = np.ascontiguousarray(label_map.numpy().T).reshape(-1)
        starts = np.concatenate(([0], np.flatnonzero(flat[1:] != flat[:-1]) + 1))
        values = flat[starts].astype(np.int64)
    else:
        t = label_map.t().reshape(-1)
        change = (t[1:] != t[:-1]).nonzero().flatten() + 1
        first = torch.cat((change.new_zeros(1), change))
        starts, values = first.cpu().numpy(), t[first].long().cpu().numpy()
    ends = np.append(starts[1:], label_map.numel())
    return starts, ends - starts, values


def label_map_rle(label_map: Tensor, labels: Sequence[int] | Tensor) -> list[dict[str, Any]]:
    """COCO compressed RLE (``{"size": [H, W], "counts": str}``) of ``label_map == label``
    for each of ``labels``, in their order (an absent label gives an empty mask)."""
    h, w = (int(v) for v in label_map.shape)
    n = h * w
    wanted = np.asarray(torch.as_tensor(labels).cpu(), dtype=np.int64).reshape(-1)
    if wanted.size == 0:
        return []
    starts, lengths, values = _runs(label_map)
    picked = np.nonzero(np.isin(values, wanted))[0]
    picked = picked[np.argsort(values[picked], kind="stable")]  # by label, then position
    s, length, v = starts[picked], lengths[picked], values[picked]
    first = np.ones(len(v), dtype=bool)
    first[1:] = v[1:] != v[:-1]  # the first run of its label
    last = np.append(first[1:], True)  # the last run of its label
    ends = s + length
    gaps = s - np.where(first, 0, np.roll(ends, 1))
    tails = n - ends  # the zeros after a label's last run, if any
    has_tail = last & (tails > 0)
    counts = np.stack((gaps, length, tails), axis=1)
    keep = np.stack((np.ones_like(first), np.ones_like(first), has_tail), axis=1)
    present, runs = np.unique(v, return_counts=True)  # v is sorted: groups in order
    per_label = 2 * runs + has_tail[last]
    strings = counts_to_string(counts[keep], per_label)
    by_label = dict(zip(present.tolist(), strings, strict=True))
    empty = counts_to_string(np.array([n]), np.array([1]))[0]
    return [{"size": [h, w], "counts": by_label.get(int(k), empty)} for k in wanted.tolist()]
