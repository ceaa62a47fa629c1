"""The model's own process (``runtime.model_process``): the worker, and what crosses to it.

:class:`streamseg.runtime.model_process.ModelProcess` starts :func:`run_worker`
in a spawned process. Frames go to it through shared memory blocks the
parent owns (:class:`FrameBlocks` writes them, the worker reads them),
instances come back as numpy arrays (:func:`pack_instances`), log records
through a queue (:func:`forward_logs` hands them to the parent's handlers).

The worker builds the model as ``serve`` does in process (weights,
backend, warm-up), answers ``("ok", {"class_names"})`` or ``("error",
exc)``, then serves requests from its pipe, one at a time, in order:
``("segment", header)`` (the frames are in a shared memory block the
parent wrote), ``("load_weights", path)``, ``("warm_up",)``, ``("close",)``.

Its life is tied to its parent's:

* it leaves the parent's process group, so a signal sent to the group (a
  terminal's Ctrl-C, ``kill -- -PGID``) reaches only the parent, which
  drains and then asks the worker to close; SIGINT is ignored for the
  moment before it has left;
* SIGTERM sent to the worker itself ends it (as a service manager that
  signals every process does); the parent then sees it ended;
* it ends when the parent asks (``close``, or its end of the pipe closes)
  and within a second when the parent dies, even while it is still
  building the model.

An exception is sent back as it is when it survives pickling
(:class:`streamseg.errors.StartupError` always does), else as a
``ModelProcessError`` naming its type and message.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import logging.handlers
import multiprocessing.connection
import os
import pickle
import queue
import signal
import threading
import time
import traceback
from collections.abc import Sequence
from concurrent.futures import Future
from multiprocessing.shared_memory import SharedMemory
from typing import Any

import numpy as np
import torch

from streamseg.config.model import ModelConfig
from streamseg.errors import StartupError
from streamseg.runtime.memory import keep_heap_memory
from streamseg.types import Frame, FrameBatch, Instances, MaskCrops, Regions

__all__ = [
    "FrameBlocks",
    "ModelProcessError",
    "Pending",
    "forward_logs",
    "how_ended",
    "pack_instances",
    "run_worker",
    "unpack_instances",
]

# Shared memory blocks a worker keeps open (the parent's in-flight blocks and
# the ones they replaced when they grew).
OPEN_BLOCKS = 4
# Seconds between two looks at whether the parent is still there.
PARENT_CHECK_S = 0.5


class ModelProcessError(RuntimeError):
    """The model's process ended or answered nothing that can be used.

    Its traceback (this process waiting for an answer) says nothing: the
    pipeline logs the message alone.
    """

    log_traceback = False


def run_worker(
    conn: multiprocessing.connection.Connection,
    logs: Any,
    model: ModelConfig,
    threads: int,
    level: int,
    parent: int,
) -> None:
    """The worker process's main function (``parent``: the parent's pid).

    It ends with ``os._exit`` once its log records are flushed: nothing in it
    needs the interpreter's teardown, which takes seconds with torch loaded
    (start-up's "exit within 5 s" waits for it).
    """
    _tie_to_parent(parent)
    root = logging.getLogger()
    root.handlers[:] = [logging.handlers.QueueHandler(logs)]
    root.setLevel(level)
    keep_heap_memory()
    torch.set_num_threads(threads)
    try:
        _build_and_serve(conn, model)
    finally:
        with contextlib.suppress(Exception):
            logs.close()
            logs.join_thread()  # the records still on their way to the parent
        os._exit(0)


def _build_and_serve(conn: multiprocessing.connection.Connection, model: ModelConfig) -> None:
    try:
        from streamseg.runtime.factory import build_segmenter

        segmenter: Any = build_segmenter(model)  # it logs its warm-up's time
    except BaseException as exc:
        _reply_error(conn, exc)
        return
    ready = {
        "class_names": tuple(segmenter.class_names),
        "process_cpu": time.process_time(),
        # The ops on the PyTorch reference after the warm-up (a GPU kernel failed).
        "ops_on_reference": dict(getattr(segmenter, "ops_on_reference", {})),
    }
    conn.send(("ok", ready))
    blocks: dict[str, Any] = {}
    try:
        _serve(conn, segmenter, blocks)
    finally:
        for shm in blocks.values():
            shm.close()
        segmenter.close()


def how_ended(proc: Any) -> str:
    """``ended (exit code 70)``, ``ended (killed by SIGKILL)``, or ``ended``."""
    code = proc.exitcode
    if code is None:
        return "ended"
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"ended (killed by {signal.Signals(-code).name})"
    return f"ended (exit code {code})"


def _tie_to_parent(parent: int) -> None:
    """Signals and the parent's death, as the module docstring says."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_CHECK_S)
        os._exit(0)  # the parent is gone: nobody will read what this process makes

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _serve(conn: multiprocessing.connection.Connection, segmenter: Any, blocks: dict) -> None:  # type: ignore[type-arg]
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):
            return  # the parent is gone
        op = request[0]
        if op == "close":
            return
        try:
            if op == "segment":
                c0 = time.thread_time()
                shm = _attach(blocks, request[1]["shm"])
                results = segmenter.segment(_batch(shm, request[1]))
                packed = [pack_instances(r) for r in results]
                reply = {"instances": packed, "cpu": time.thread_time() - c0}
            elif op == "load_weights":
                segmenter.load_weights(request[1])
                reply = {}
            elif op == "warm_up":
                reply = {"seconds": segmenter.warm_up()}
            else:
                raise ValueError(f"unknown request {op!r}")
        except Exception as exc:
            _reply_error(conn, exc)
            continue
        reply["process_cpu"] = time.process_time()
        reply["peak_rss_mb"] = _peak_rss_mb()
        conn.send(("ok", reply))


def _peak_rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _reply_error(conn: multiprocessing.connection.Connection, exc: BaseException) -> None:
    """Send ``exc`` itself when it survives pickling both ways, else its type and text;
    where it was raised in this process goes with it as a note (logged with it)."""
    where = "".join(traceback.format_tb(exc.__traceback__))
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:
        exc = ModelProcessError(f"{type(exc).__name__}: {exc}")
    if where and not isinstance(exc, StartupError):  # a user mistake needs no traceback
        exc.add_note(f"raised in the model's process (pid {os.getpid()}):\n{where.rstrip()}")
    exc.__traceback__ = None
    exc.__context__ = exc.__cause__ = None
    with contextlib.suppress(OSError, ValueError):  # the parent is gone
        conn.send(("error", exc))


@dataclasses.dataclass
class Pending:
    """A request sent to a worker and not answered yet (``block``: its frames'
    shared memory block; ``sends``: to how many workers it was sent)."""

    future: Future[Any]
    request: tuple[Any, ...]
    block: int | None
    sent: float  # time.monotonic()
    sends: int = 1


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


def forward_logs(logs: Any, done: threading.Event) -> None:
    """Hand the worker's log records to this process's loggers; once ``done``
    is set, return when none is waiting."""
    while True:
        try:
            record = logs.get(timeout=0.2)
        except queue.Empty:
            if done.is_set():
                return
            continue
        except Exception:  # a record cut short by a killed worker, a closed queue
            return
        logging.getLogger(record.name).handle(record)


def _attach(blocks: dict[str, Any], name: str) -> Any:
    """The parent's block ``name``, opened once; blocks it replaced are closed."""
    shm = blocks.get(name)
    if shm is None:
        while len(blocks) >= OPEN_BLOCKS:  # the oldest was replaced
            blocks.pop(next(iter(blocks))).close()
        # The parent creates and unlinks the blocks (spawned children share its
        # resource tracker, so opening one here registers nothing new).
        shm = blocks[name] = SharedMemory(name=name)
    return shm


def _batch(shm: Any, header: dict[str, Any]) -> FrameBatch:
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
