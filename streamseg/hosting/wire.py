"""What crosses between the parent and the model's own process.

Frames go to the worker through shared memory blocks the parent owns
(:class:`FrameBlocks` writes them, :func:`read_batch` rebuilds the batch in
the worker); instances come back as numpy arrays (:func:`pack_instances`,
:func:`unpack_instances`: masks as box-local crops packed in one array).
"""

from __future__ import annotations

from collections.abc import Sequence
from multiprocessing.shared_memory import SharedMemory
from typing import Any

import numpy as np
import torch

from streamseg.types import Frame, FrameBatch, Instances, MaskCrops, Regions

__all__ = [
    "OPEN_BLOCKS",
    "FrameBlocks",
    "ModelProcessError",
    "attach_block",
    "pack_instances",
    "read_batch",
    "unpack_instances",
]

# Shared memory blocks a worker keeps open (the parent's in-flight blocks and
# the ones they replaced when they grew).
OPEN_BLOCKS = 4


class ModelProcessError(RuntimeError):
    """The model's process ended or answered nothing that can be used.

    Its traceback (this process waiting for an answer) says nothing: the
    pipeline logs the message alone.
    """


class FrameBlocks:
    """The parent's shared memory blocks, one per batch in flight (grown when needed).

    ``write(index, frames)`` copies a batch's images into block ``index`` and
    returns the header the worker rebuilds the batch from; ``close()``
    unlinks them all.
    """

    def __init__(self, count: int) -> None:
        self._blocks: list[SharedMemory | None] = [None] * count

    def names(self) -> list[str]:
        return [b.name for b in self._blocks if b is not None]

    def write(self, index: int, frames: Sequence[Frame]) -> dict[str, Any]:
        images = [f.image if f.image.device.type == "cpu" else f.image.cpu() for f in frames]
        arrays = [np.ascontiguousarray(img.numpy()) for img in images]
        need = sum(a.nbytes for a in arrays)
        shm = self._blocks[index]
        if shm is None or shm.size < need:
            if shm is not None:
                shm.close()
                shm.unlink()
            shm = self._blocks[index] = SharedMemory(create=True, size=max(need, 1 << 20) * 2)
        offset, layout = 0, []
        for a in arrays:
            block = np.ndarray((a.nbytes,), np.uint8, buffer=shm.buf, offset=offset)
            block[:] = a.reshape(-1).view(np.uint8)
            layout.append((offset, a.shape, a.dtype.str))
            offset += a.nbytes
        meta = [(f.camera_id, f.seq, f.pts, f.capture_time, f.camera_time) for f in frames]
        return {"shm": shm.name, "layout": layout, "frames": meta}

    def close(self) -> None:
        for i, shm in enumerate(self._blocks):
            if shm is not None:
                shm.close()
                shm.unlink()
                self._blocks[i] = None


def attach_block(blocks: dict[str, Any], name: str) -> Any:
    """The parent's block ``name``, opened once; blocks it replaced are closed."""
    shm = blocks.get(name)
    if shm is None:
        while len(blocks) >= OPEN_BLOCKS:  # the oldest was replaced
            blocks.pop(next(iter(blocks))).close()
        # The parent creates and unlinks the blocks (spawned children share its
        # resource tracker, so opening one here registers nothing new).
        shm = blocks[name] = SharedMemory(name=name)
    return shm


def read_batch(shm: Any, header: dict[str, Any]) -> FrameBatch:
    frames, buf = [], shm.buf
    assert buf is not None
    for (offset, shape, dtype), (cid, seq, pts, captured, cam_time) in zip(
        header["layout"], header["frames"], strict=True
    ):
        count = int(np.prod(shape))
        array = np.frombuffer(buf, dtype=np.dtype(dtype), count=count, offset=offset)
        # A copy: the block is written again for the next batch, and a view
        # would keep it from being closed.
        image = torch.from_numpy(array.reshape(shape).copy())
        frames.append(Frame(cid, seq, pts, captured, image, camera_time=cam_time))
    return FrameBatch(tuple(frames))


# -- instances across the pipe ---------------------------------------------------------------
def pack_instances(inst: Instances) -> dict[str, Any]:
    """``inst`` as numpy arrays (masks as box-local crops in one flat array)."""
    out: dict[str, Any] = {
        "size": inst.image_size,
        "boxes": inst.boxes.detach().cpu().numpy(),
        "scores": inst.scores.detach().cpu().numpy(),
        "labels": inst.labels.detach().cpu().numpy(),
    }
    masks = inst.masks
    if isinstance(masks, MaskCrops):
        crops = [c.detach().cpu().reshape(-1).numpy() for c in masks.crops]
        out["crop_boxes"] = masks.boxes.numpy()
        out["crops"] = np.concatenate(crops) if crops else np.zeros(0, dtype=bool)
    elif masks is not None:
        out["masks"] = masks.detach().cpu().numpy()
    if inst.track_ids is not None:
        out["track_ids"] = inst.track_ids.detach().cpu().numpy()
    if inst.regions is not None:
        out["regions"] = inst.regions.arrays()
    return out


def unpack_instances(packed: dict[str, Any]) -> Instances:
    """The ``Instances`` :func:`pack_instances` packed."""
    masks: torch.Tensor | MaskCrops | None = None
    if "crops" in packed:
        boxes, flat = packed["crop_boxes"], packed["crops"]
        shapes = np.stack((boxes[:, 3] - boxes[:, 1], boxes[:, 2] - boxes[:, 0]), 1)
        ends = np.cumsum([0, *(shapes[:, 0] * shapes[:, 1]).tolist()]).tolist()
        # numpy slices, not torch ones: no torch call per crop in this process
        crops = [
            torch.from_numpy(flat[a:b].reshape(h, w))
            for a, b, (h, w) in zip(ends[:-1], ends[1:], shapes.tolist(), strict=True)
        ]
        masks = MaskCrops(image_size=packed["size"], boxes=torch.from_numpy(boxes), crops=crops)
    elif "masks" in packed:
        masks = torch.from_numpy(packed["masks"])
    track_ids, regions = packed.get("track_ids"), packed.get("regions")
    return Instances(
        image_size=packed["size"],
        boxes=torch.from_numpy(packed["boxes"]),
        scores=torch.from_numpy(packed["scores"]),
        labels=torch.from_numpy(packed["labels"]),
        masks=masks,
        track_ids=torch.from_numpy(track_ids) if track_ids is not None else None,
        regions=Regions.from_arrays(regions) if regions is not None else None,
    )
