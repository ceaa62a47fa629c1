"""The model's own process (``runtime.model_process``): the worker.

:class:`streamseg.hosting.parent.Child` starts :func:`run_worker` in a
spawned process. Frames come to it through shared memory blocks the parent
owns, instances go back as numpy arrays (:mod:`streamseg.hosting.wire`),
log records through a queue (the parent's ``forward_logs`` hands them to
its handlers).

The worker builds the model as ``serve`` does in process (weights,
backend, warm-up), answers ``("ok", {"class_names"})`` or ``("error",
exc)``, then serves requests from its pipe, one at a time, in order:
``("segment", header)`` (the frames are in a shared memory block the
parent wrote), ``("load_weights", path)``, ``("warm_up",)``, ``("close",)``.
The parent sends the next batch before the last is answered; thread
``requests`` reads it meanwhile and stages its frames on the model's device
(``Segmenter.stage``: pinned memory and a copy stream on a GPU), so that
copy overlaps the running batch's compute.

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
from typing import TYPE_CHECKING, Any

import torch

from streamseg.errors import StartupError
from streamseg.hosting.memory import keep_heap_memory
from streamseg.hosting.wire import ModelProcessError, attach_block, pack_instances, read_batch
from streamseg.segment.config import ModelConfig
from streamseg.types import FrameBatch

if TYPE_CHECKING:
    from streamseg.segment.segmenter import Segmenter

__all__ = ["STAGED_AHEAD", "Request", "lower_priority", "read_requests", "run_worker", "serve"]

# Seconds between two looks at whether the parent is still there.
PARENT_CHECK_S = 0.5
# Requests read (a batch's frames staged on the device) ahead of the one running.
STAGED_AHEAD = 1


def run_worker(
    conn: multiprocessing.connection.Connection,
    logs: Any,
    model: ModelConfig,
    threads: int,
    level: int,
    parent: int,
    nice: int = 0,
) -> None:
    """The worker process's main function (``parent``: the parent's pid;
    ``nice``: CPU priority steps below the parent's, see :func:`lower_priority`).

    It ends with ``os._exit`` once its log records are flushed: nothing in it
    needs the interpreter's teardown, which takes seconds with torch loaded
    (start-up's "exit within 5 s" waits for it).
    """
    _tie_to_parent(parent)
    lower_priority(nice)
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


def lower_priority(steps: int) -> None:
    """Run this process ``steps`` nice levels below where it started (at most 19).

    The model's forward passes take whatever CPU they are given; the
    service's own per-frame work is short and waits on it only when the
    scheduler runs the model first. A lower priority for the model lets the
    short work go first on a saturated CPU, and costs the model nothing
    while a core is idle. ``bench track --load`` lowers its stand-in for the
    model by the same setting. Raising a process's own nice value needs no
    privilege; a system that refuses it leaves the priority as it was.
    """
    if steps <= 0:
        return
    with contextlib.suppress(OSError):
        os.nice(steps)


def _build_and_serve(conn: multiprocessing.connection.Connection, model: ModelConfig) -> None:
    try:
        from streamseg.hosting.segmenter import build_segmenter

        segmenter = build_segmenter(model)  # it logs its warm-up's time
    except BaseException as exc:
        _reply_error(conn, exc)
        return
    ready = {
        "class_names": tuple(segmenter.class_names),
        "region_classes": tuple(segmenter.region_classes),
        "process_cpu": time.process_time(),
        # The ops on the PyTorch reference after the warm-up (a GPU kernel failed).
        "ops_on_reference": dict(segmenter.ops_on_reference),
    }
    conn.send(("ok", ready))
    blocks: dict[str, Any] = {}
    try:
        serve(conn, segmenter, blocks)
    finally:
        for shm in blocks.values():
            shm.close()
        segmenter.close()


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


@dataclasses.dataclass
class Request:
    """One request from the parent as thread ``requests`` hands it on: a
    ``segment`` request's frames already read from shared memory and staged
    on the model's device (or why that failed), with the CPU time it took."""

    op: str
    arg: Any = None
    batch: FrameBatch | None = None
    error: Exception | None = None
    cpu: float = 0.0


def serve(
    conn: multiprocessing.connection.Connection, segmenter: Segmenter, blocks: dict[str, Any]
) -> None:
    """Answer the parent's requests, in order, until ``close`` (or its end of the pipe closes).

    Thread ``requests`` (:func:`read_requests`) reads them and stages each
    batch's frames ahead (``Segmenter.stage``) while this thread runs the
    batch before it: the next batch's copy to the device overlaps this
    one's compute. ``blocks``: the shared memory blocks opened so far.
    """
    requests: queue.Queue[Request] = queue.Queue(maxsize=STAGED_AHEAD)
    reader = threading.Thread(
        target=read_requests, args=(conn, segmenter, blocks, requests), name="requests", daemon=True
    )
    reader.start()
    while (request := requests.get()).op != "close":
        try:
            reply = _answer(segmenter, request)
        except Exception as exc:
            _reply_error(conn, exc)
            continue
        reply["process_cpu"] = time.process_time()
        reply["peak_rss_mb"] = _peak_rss_mb()
        conn.send(("ok", reply))
    reader.join(1.0)


def read_requests(
    conn: multiprocessing.connection.Connection,
    segmenter: Segmenter,
    blocks: dict[str, Any],
    out: queue.Queue[Request],
) -> None:
    """Thread ``requests``: each request from the pipe onto ``out``, a batch
    read from its shared memory block and staged first; ends after ``close``
    (also put there when the parent is gone)."""
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            message = ("close",)  # the parent is gone
        request = Request(message[0], message[1] if len(message) > 1 else None)
        if request.op == "segment":
            c0 = time.thread_time()
            try:
                shm = attach_block(blocks, request.arg["shm"])
                request.batch = segmenter.stage(read_batch(shm, request.arg))
            except Exception as exc:
                request.error = exc
            request.cpu = time.thread_time() - c0
        out.put(request)
        if request.op == "close":
            return


def _answer(segmenter: Segmenter, request: Request) -> dict[str, Any]:
    if request.error is not None:
        raise request.error
    if request.op == "segment":
        assert request.batch is not None
        c0 = time.thread_time()
        results = segmenter.segment(request.batch)
        packed = [pack_instances(r) for r in results]
        return {"instances": packed, "cpu": time.thread_time() - c0 + request.cpu}
    if request.op == "load_weights":
        segmenter.load_weights(request.arg)
        return {}
    if request.op == "warm_up":
        return {"seconds": segmenter.warm_up()}
    raise ValueError(f"unknown request {request.op!r}")


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
