"""The model in a process of its own (``runtime.model_process: true``).

Why: an eager model makes a few hundred torch calls per batch, and each one
gives up the GIL and must take it back. In one process the tracking,
rules, encoding and publishing threads take it meanwhile, so the model
waits for them and pays for every hand-over (docs/operations.md, "Threads,
the GIL and small torch calls"). In its own process the model has a GIL
to itself.

How: :class:`ModelProcess` stands in for the segmenter in the pipeline. A
batch's frames are copied into one shared memory block (grown when a batch
needs more), a small header goes through a pipe, and the worker answers
with the instances as numpy arrays (masks as box-local crops, packed in one
array). Two batches may be in flight, each in its own block: the pipeline
sends the next batch while the worker runs one, which hides the round
trip. The worker's log records come back to this process's handlers
(redaction included).

A worker that dies is started again at the next batch (the batch it had is
reported as a segment error), with the weights last loaded. Hot swap loads
new weights in the worker; a refused checkpoint raises here as it would in
process and the old weights stay.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import logging.handlers
import multiprocessing
import multiprocessing.connection
import pickle
import queue
import signal
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from multiprocessing.shared_memory import SharedMemory
from typing import Any

import numpy as np
import torch

from streamseg.config.model import ModelConfig
from streamseg.runtime.memory import keep_heap_memory
from streamseg.types import Frame, FrameBatch, Instances, MaskCrops, Regions

__all__ = ["ModelProcess", "ModelProcessError"]

log = logging.getLogger("streamseg.runtime")

# Seconds a worker may take to build and warm up its model.
START_TIMEOUT = 900.0
# Seconds one batch may take before segment() gives up on it.
SEGMENT_TIMEOUT = 600.0


class ModelProcessError(RuntimeError):
    """The model's process ended or answered nothing that can be used."""


class ModelProcess:
    """A segmenter (``SegmenterLike``) whose model runs in a child process.

    Args:
        model: the ``model:`` section; the worker builds it as ``serve``
            does in process (weights, backend, warm-up).
        threads: the worker's torch intra-op threads.

    Raises what building the model raises (a missing checkpoint, a bad
    config) when the worker cannot start.

    ``submit`` sends a batch and returns at once (a future of its
    instances), so the pipeline can send the next batch while the worker
    runs this one: up to ``IN_FLIGHT`` batches, each with its own shared
    memory block. ``segment`` is ``submit(...).result()``. Requests are
    answered in the order sent; a thread of this process reads the answers.
    """

    IN_FLIGHT = 2

    def __init__(self, model: ModelConfig, *, threads: int) -> None:
        self.model_config, self.threads = model, threads
        self.device = torch.device(model.device)
        self.cpu_seconds = 0.0  # the worker's CPU time in segment(), every batch so far
        self.restarts = 0
        self.peak_rss_mb = 0.0  # the largest resident size a worker reported
        self._ended_cpu = 0.0  # all CPU time of workers that ended
        self._worker_cpu = 0.0  # all CPU time of the running worker, at its last answer
        self._ctx = multiprocessing.get_context("spawn")  # never fork a threaded process
        self._cond = threading.Condition()  # guards everything below
        self._blocks: list[SharedMemory | None] = [None] * self.IN_FLIGHT
        self._free = list(range(self.IN_FLIGHT))
        self._pending: collections.deque[tuple[Future[Any], int | None]] = collections.deque()
        self._weights: str | None = None  # the last hot-swapped checkpoint
        self._proc: Any = None
        self._conn: multiprocessing.connection.Connection | None = None
        self._reader: threading.Thread | None = None
        # Whether the reader still takes answers. It stops at the worker's end
        # of the pipe, which can come a moment before is_alive() turns False;
        # a request sent after that would never be answered.
        self._reading = False
        self._logs: Any = None
        self._logs_done: threading.Event  # made with each worker's log queue
        self._log_thread: threading.Thread | None = None
        self._closed = False
        self.class_names: tuple[str, ...] = ()
        with self._cond:
            self._start()

    # -- the worker's life (called with the lock held) -------------------------
    def _start(self) -> None:
        self._logs = self._ctx.Queue()
        self._logs_done = threading.Event()
        self._log_thread = threading.Thread(
            target=_forward_logs,
            args=(self._logs, self._logs_done),
            name="model-process-logs",
            daemon=True,
        )
        self._log_thread.start()
        ours, theirs = self._ctx.Pipe()
        level = logging.getLogger().getEffectiveLevel()
        self._proc = self._ctx.Process(
            target=_worker,
            args=(theirs, self._logs, self.model_config, self.threads, level),
            name="streamseg-model",
            daemon=True,
        )
        self._proc.start()
        theirs.close()
        self._conn = ours
        log.info("model: started its own process (pid %d)", self._proc.pid)
        try:
            reply = self._first_answer(ours, self._proc)
        except BaseException:
            self._stop_worker(timeout=5.0)
            raise
        self.class_names = tuple(reply["class_names"])
        # The worker's ops on the PyTorch reference after its warm-up (a GPU kernel failed).
        self.ops_on_reference: dict[str, str] = dict(reply.get("ops_on_reference", {}))
        self._reader = threading.Thread(
            target=self._read_answers, args=(ours,), name="model-process-answers", daemon=True
        )
        self._reading = True
        self._reader.start()

    def _first_answer(self, conn: Any, proc: Any) -> dict[str, Any]:
        deadline = time.monotonic() + START_TIMEOUT
        while not conn.poll(0.2):
            if not proc.is_alive():
                raise ModelProcessError(
                    f"the model's process ended while starting (exit code {proc.exitcode})"
                )
            if time.monotonic() > deadline:
                raise ModelProcessError("the model's process did not start in time")
        try:
            kind, payload = conn.recv()
        except (EOFError, OSError) as exc:
            raise ModelProcessError("the model's process ended while starting") from exc
        if kind == "error":
            raise payload
        self._worker_cpu = float(payload["process_cpu"])
        return dict(payload)

    def _stop_worker(self, timeout: float = 10.0) -> None:
        conn, proc, reader = self._conn, self._proc, self._reader
        self._conn = self._proc = self._reader = None
        if conn is not None:
            with contextlib.suppress(OSError, ValueError):
                conn.send(("close",))
        if proc is not None:
            self._cond.release()  # the reader may need the lock to finish
            try:
                proc.join(timeout)
                if proc.is_alive():
                    proc.kill()
                    proc.join(5.0)
                if reader is not None:
                    reader.join(5.0)
            finally:
                self._cond.acquire()
        if conn is not None:
            conn.close()
        if self._logs is not None:
            # Not a marker put on the queue: a worker killed while writing a
            # record holds the queue's write lock, and a put from here would
            # then leave a thread that blocks this process's exit.
            self._logs_done.set()
            if self._log_thread is not None:
                self._log_thread.join(5.0)
            self._logs.close()
            self._logs = None

    def _ensure_running(self) -> None:
        """Start a new worker if the last one died (once its answers are all failed)."""
        if self._closed:
            raise ModelProcessError("the model's process is closed")
        if self._proc is not None and self._proc.is_alive() and self._reading:
            return
        while self._pending:  # the reader fails what the dead worker had
            self._cond.wait(0.5)
        proc = self._proc
        self._stop_worker(timeout=1.0)  # reaps it (kills it if it is still there)
        code = proc.exitcode if proc is not None else None
        log.error("model: its process ended (exit code %s); starting it again", code)
        self._ended_cpu += self._worker_cpu
        self._worker_cpu = 0.0
        self.restarts += 1
        self._start()
        if self._weights is not None:
            weights = self._send(("load_weights", self._weights), None)
            self._cond.release()
            try:
                weights.result(600.0)
            finally:
                self._cond.acquire()

    # -- requests and answers -----------------------------------------------------
    def _send(self, request: tuple[Any, ...], block: int | None) -> Future[Any]:
        future: Future[Any] = Future()
        self._pending.append((future, block))
        assert self._conn is not None
        with contextlib.suppress(OSError, ValueError):  # gone: the reader fails it
            self._conn.send(request)
        return future

    def _read_answers(self, conn: Any) -> None:
        """Settle each request's future as its answer comes, in order; when the
        worker is gone, fail every request it had."""
        while True:
            try:
                kind, payload = conn.recv()
            except (EOFError, OSError):
                break
            with self._cond:
                if not self._pending:
                    continue
                future, block = self._pending.popleft()
                if block is not None:
                    self._free.append(block)
                if kind == "ok":
                    self._worker_cpu = float(payload.get("process_cpu", self._worker_cpu))
                    rss = float(payload.get("peak_rss_mb", 0.0))
                    self.peak_rss_mb = max(self.peak_rss_mb, rss)
                    self.cpu_seconds += float(payload.get("cpu", 0.0))
                self._cond.notify_all()
            if kind == "error":
                future.set_exception(payload)
            elif "instances" in payload:
                try:
                    future.set_result([_instances(p) for p in payload["instances"]])
                except Exception as exc:
                    future.set_exception(exc)
            else:
                future.set_result(payload)
        with self._cond:
            self._reading = False
            failed = list(self._pending)
            self._pending.clear()
            for _future, block in failed:
                if block is not None:
                    self._free.append(block)
            self._cond.notify_all()
        error = ModelProcessError("the model's process ended before it answered")
        for future, _block in failed:
            future.set_exception(error)

    def _request(self, request: tuple[Any, ...], timeout: float) -> Any:
        with self._cond:
            self._ensure_running()
            future = self._send(request, None)
        return future.result(timeout)

    # -- SegmenterLike ---------------------------------------------------------------
    def submit(self, batch: FrameBatch) -> Future[list[Instances]]:
        """Send ``batch``; returns once it is sent (waits while ``IN_FLIGHT`` are)."""
        with self._cond:
            self._ensure_running()
            while not self._free:
                self._cond.wait(0.5)
                self._ensure_running()
            block = self._free.pop()
            try:
                header = self._write(block, batch.frames)
            except BaseException:
                self._free.append(block)
                raise
            return self._send(("segment", header), block)

    def segment(self, batch: FrameBatch) -> list[Instances]:
        result: list[Instances] = self.submit(batch).result(SEGMENT_TIMEOUT)
        return result

    def warm_up(self) -> float:
        return float(self._request(("warm_up",), 600.0)["seconds"])

    def load_weights(self, path: str) -> None:
        """Load ``path`` in the worker (hot swap); raises as ``Segmenter.load_weights`` does.

        Batches sent before run with the old weights, batches sent after
        with the new ones.
        """
        self._request(("load_weights", path), 600.0)
        self._weights = path

    def close(self) -> None:
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._stop_worker()
            for i, shm in enumerate(self._blocks):
                if shm is not None:
                    shm.close()
                    shm.unlink()
                    self._blocks[i] = None

    def process_cpu_seconds(self) -> float:
        """CPU seconds of the model's processes so far (every thread), as of their last answer."""
        return self._ended_cpu + self._worker_cpu

    def pid(self) -> int | None:
        """The worker's process id (``None`` when none runs)."""
        return self._proc.pid if self._proc is not None else None

    # -- frames into shared memory --------------------------------------------------------
    def _write(self, index: int, frames: Sequence[Frame]) -> dict[str, Any]:
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


# -- the worker process ----------------------------------------------------------------------
def _worker(
    conn: multiprocessing.connection.Connection,
    logs: Any,
    model: ModelConfig,
    threads: int,
    level: int,
) -> None:
    # The parent drains on SIGINT/SIGTERM and closes us when it is done; a
    # signal sent to the whole group must not end the model first.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    root = logging.getLogger()
    root.handlers[:] = [logging.handlers.QueueHandler(logs)]
    root.setLevel(level)
    keep_heap_memory()
    torch.set_num_threads(threads)
    try:
        from streamseg.runtime.factory import build_segmenter

        segmenter: Any = build_segmenter(model)  # it logs its warm-up's time
    except BaseException as exc:
        _reply_error(conn, exc)
        return
    ready = {
        "class_names": tuple(segmenter.class_names),
        "process_cpu": time.process_time(),
        "ops_on_reference": dict(getattr(segmenter, "ops_on_reference", {})),
    }
    conn.send(("ok", ready))
    blocks: dict[str, SharedMemory] = {}
    try:
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
                    packed = [_pack(r) for r in results]
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
    finally:
        for shm in blocks.values():
            shm.close()
        segmenter.close()


def _peak_rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _reply_error(conn: multiprocessing.connection.Connection, exc: BaseException) -> None:
    """Send ``exc`` itself when it survives pickling both ways, else its type and text."""
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:
        exc = ModelProcessError(f"{type(exc).__name__}: {exc}")
    exc.__traceback__ = None
    conn.send(("error", exc))


def _attach(blocks: dict[str, SharedMemory], name: str) -> SharedMemory:
    """The parent's block ``name``, opened once; blocks it replaced are closed."""
    shm = blocks.get(name)
    if shm is None:
        while len(blocks) >= 2 * ModelProcess.IN_FLIGHT:  # the oldest was replaced
            blocks.pop(next(iter(blocks))).close()
        # The parent creates and unlinks the blocks (spawned children share its
        # resource tracker, so opening one here registers nothing new).
        shm = blocks[name] = SharedMemory(name=name)
    return shm


def _batch(shm: SharedMemory, header: dict[str, Any]) -> FrameBatch:
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
def _pack(inst: Instances) -> dict[str, Any]:
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


def _instances(packed: dict[str, Any]) -> Instances:
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


def _forward_logs(logs: Any, done: threading.Event) -> None:
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
