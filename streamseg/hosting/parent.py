"""One worker process as the parent holds it: the process, its pipe, its logs.

:class:`Child` starts :func:`streamseg.hosting.worker.run_worker` in a
spawned process, waits for its first answer (the model built and warmed up,
or why not) and ends it; :class:`streamseg.hosting.process.ModelProcess`
owns one at a time and starts another when it ends. The worker's log
records come back through a queue to this process's handlers
(:func:`forward_logs`, redaction included).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import multiprocessing.connection
import os
import queue
import signal
import threading
import time
from concurrent.futures import Future
from typing import Any

from streamseg.hosting.wire import ModelProcessError
from streamseg.hosting.worker import run_worker
from streamseg.segment.config import ModelConfig

__all__ = ["STILL_STARTING_S", "Child", "Pending", "StartCancelled", "forward_logs", "how_ended"]

log = logging.getLogger("streamseg.runtime")

# Seconds a worker may take to build and warm up its model.
START_TIMEOUT = 900.0
# A start that takes longer is logged again every this many seconds.
STILL_STARTING_S = 30.0


class StartCancelled(ModelProcessError):
    """The first start was cancelled (the service was asked to stop meanwhile)."""


class Child:
    """A started worker process: ``proc``, the parent's end of its pipe ``conn``,
    and the thread that forwards its log records.

    Args:
        ctx: the ``spawn`` multiprocessing context (never fork a threaded process).
        model / threads: what the worker builds, with how many torch threads.
        nice: CPU priority steps the worker takes below this process.
    """

    def __init__(self, ctx: Any, model: ModelConfig, threads: int, nice: int = 0) -> None:
        self._logs = ctx.Queue()
        self._logs_done = threading.Event()
        self._log_thread = threading.Thread(
            target=forward_logs,
            args=(self._logs, self._logs_done),
            name="model-process-logs",
            daemon=True,
        )
        self._log_thread.start()
        ours, theirs = ctx.Pipe()
        level = logging.getLogger().getEffectiveLevel()
        self.proc = ctx.Process(
            target=run_worker,
            args=(theirs, self._logs, model, threads, level, os.getpid(), nice),
            name="streamseg-model",
            daemon=True,
        )
        self.proc.start()
        theirs.close()
        self.conn: multiprocessing.connection.Connection = ours
        log.info("model: started its own process (pid %d)", self.proc.pid)

    @property
    def pid(self) -> int:
        return int(self.proc.pid)

    def first_answer(self, cancel: threading.Event | None) -> dict[str, Any]:
        """The worker's ready message (``class_names``, ``process_cpu``,
        ``ops_on_reference``); raises what building its model raised, a
        ``ModelProcessError`` when it ended or took longer than
        ``START_TIMEOUT``, or ``StartCancelled`` once ``cancel`` is set."""
        conn, proc = self.conn, self.proc
        start = time.monotonic()
        said = start
        while not conn.poll(0.1):
            now = time.monotonic()
            if cancel is not None and cancel.is_set():
                raise StartCancelled("the model's start was cancelled")
            if not proc.is_alive():
                raise ModelProcessError(f"the model's process {how_ended(proc)} while starting")
            if now - start > START_TIMEOUT:
                raise ModelProcessError(f"the model's process did not start in {START_TIMEOUT} s")
            if now - said >= STILL_STARTING_S:
                said, took = now, now - start
                log.warning("model: its process (pid %d) still starts after %.0f s", proc.pid, took)
        try:
            kind, payload = conn.recv()
        except (EOFError, OSError) as exc:
            proc.join(1.0)
            raise ModelProcessError(
                f"the model's process {how_ended(proc)} while starting"
            ) from exc
        if kind == "error":
            raise payload
        return dict(payload)

    def ask_to_close(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.conn.send(("close",))

    def join(self, timeout: float) -> None:
        """Wait ``timeout`` seconds for the worker to end, then kill it."""
        self.proc.join(timeout)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(5.0)

    def release(self) -> None:
        """Close the pipe and the log queue (after :meth:`join`)."""
        self.conn.close()
        # Not a marker put on the queue: a worker killed while writing a
        # record holds the queue's write lock, and a put from here would
        # then leave a thread that blocks this process's exit.
        self._logs_done.set()
        self._log_thread.join(5.0)
        self._logs.close()


def how_ended(proc: Any) -> str:
    """``ended (exit code 70)``, ``ended (killed by SIGKILL)``, or ``ended``."""
    code = proc.exitcode
    if code is None:
        return "ended"
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"ended (killed by {signal.Signals(-code).name})"
    return f"ended (exit code {code})"


@dataclasses.dataclass
class Pending:
    """A request sent to a worker and not answered yet (``block``: its frames'
    shared memory block; ``sends``: to how many workers it was sent)."""

    future: Future[Any]
    request: tuple[Any, ...]
    block: int | None
    sent: float  # time.monotonic()
    sends: int = 1


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
