"""The model's own process (``runtime.model_process``): the worker.

:class:`streamseg.hosting.child.Child` starts :func:`run_worker` in a
spawned process. Frames come to it through shared memory blocks the parent
owns, instances go back as numpy arrays (:mod:`streamseg.hosting.wire`),
log records through a queue (the parent's ``forward_logs`` hands them to
its handlers).

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
import logging
import logging.handlers
import multiprocessing.connection
import os
import pickle
import signal
import threading
import time
import traceback
from typing import Any

import torch

from streamseg.config.model import ModelConfig
from streamseg.errors import StartupError
from streamseg.hosting.memory import keep_heap_memory
from streamseg.hosting.wire import ModelProcessError, attach_block, pack_instances, read_batch

__all__ = ["run_worker"]

# Seconds between two looks at whether the parent is still there.
PARENT_CHECK_S = 0.5


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
        from streamseg.hosting.build import build_segmenter

        segmenter: Any = build_segmenter(model)  # it logs its warm-up's time
    except BaseException as exc:
        _reply_error(conn, exc)
        return
    ready = {
        "class_names": tuple(segmenter.class_names),
        "process_cpu": time.process_time(),
        # The ops on the PyTorch reference after the warm-up (a GPU kernel failed).
        "ops_on_reference": dict(segmenter.ops_on_reference),
    }
    conn.send(("ok", ready))
    blocks: dict[str, Any] = {}
    try:
        _serve(conn, segmenter, blocks)
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
                shm = attach_block(blocks, request[1]["shm"])
                results = segmenter.segment(read_batch(shm, request[1]))
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
