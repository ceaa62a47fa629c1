"""The model in a process of its own (``runtime.model_process: true``).

Why: an eager model makes a few hundred torch calls per batch, and each one
gives up the GIL and must take it back. In one process the tracking,
rules, encoding and publishing threads take it meanwhile, so the model
waits for them and pays for every hand-over (docs/operations.md, "Threads,
the GIL and small torch calls"). In its own process the model has a GIL
to itself.

How, and what a worker that ends or hangs does: :mod:`streamseg.hosting`.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import multiprocessing
import threading
import time
from concurrent.futures import Future
from typing import Any

import torch

from streamseg.hosting.parent import Child, Pending, StartCancelled, how_ended
from streamseg.hosting.wire import FrameBlocks, ModelProcessError, unpack_instances
from streamseg.segment.config import ModelConfig
from streamseg.types import FrameBatch, Instances

__all__ = ["ModelProcess", "ModelProcessError", "StartCancelled"]

log = logging.getLogger("streamseg.runtime")

# Seconds a worker may take to answer one request before it is ended.
ANSWER_TIMEOUT = 120.0
# The longest wait before starting a worker again, seconds (see _backoff).
MAX_RESTART_BACKOFF = 10.0
# Workers that may end in a row without answering a batch before it gives up.
MAX_ENDED_IN_A_ROW = 4
# How often one batch is sent to a worker (once more when the first ended).
SENDS = 2


class ModelProcess:
    """A segmenter (``SegmenterLike``) whose model runs in a child process.

    Args:
        model: the ``model:`` section; the worker builds it as ``serve``
            does in process (weights, backend, warm-up).
        threads: the worker's torch intra-op threads.
        nice: CPU priority steps the worker runs below this process
            (``runtime.model_nice``; 0: the same).
        answer_timeout: seconds one request may take before the worker is
            ended (and its batches failed).
        cancel: set while the first start is under way: the worker is ended
            and :class:`StartCancelled` raised within a fraction of a second.

    Raises what building the model raises (a missing checkpoint, a bad
    config) when the worker cannot start.

    ``submit`` sends a batch and returns at once (a future of its
    instances), so the pipeline can send the next batch while the worker
    runs this one: up to ``IN_FLIGHT`` batches, each with its own shared
    memory block. ``segment`` is ``submit(...).result()``. Requests are
    answered in the order sent; a thread of this process reads the answers.
    """

    IN_FLIGHT = 2

    def __init__(
        self,
        model: ModelConfig,
        *,
        threads: int,
        nice: int = 0,
        answer_timeout: float = ANSWER_TIMEOUT,
        cancel: threading.Event | None = None,
    ) -> None:
        self.model_config, self.threads, self.nice = model, threads, nice
        self.answer_timeout = answer_timeout
        self.device = torch.device(model.device)
        self.cpu_seconds = 0.0  # the worker's CPU time in segment(), every batch so far
        self.restarts = 0
        self.peak_rss_mb = 0.0  # the largest resident size a worker reported
        self.last_error: str | None = None  # how the last worker ended, or why a start failed
        self._state = "starting"
        self._ended_in_a_row = 0  # workers that ended without answering a batch since
        self._gave_up: ModelProcessError | None = None
        self._restarting = False  # a thread is starting a worker again
        self._ended_cpu = 0.0  # all CPU time of workers that ended
        self._worker_cpu = 0.0  # all CPU time of the running worker, at its last answer
        self._ctx = multiprocessing.get_context("spawn")  # never fork a threaded process
        self._cond = threading.Condition()  # guards everything below
        self._blocks = FrameBlocks(self.IN_FLIGHT)
        self._free = list(range(self.IN_FLIGHT))
        self._pending: collections.deque[Pending] = collections.deque()
        self._again: list[Pending] = []  # batches of a worker that ended, for the next
        self._weights: str | None = None  # the last hot-swapped checkpoint
        self._child: Child | None = None
        self._reader: threading.Thread | None = None
        # Whether the reader still takes answers. It stops at the worker's end
        # of the pipe, which can come a moment before is_alive() turns False;
        # a request sent after that would never be answered.
        self._reading = False
        self._ended_why: str | None = None  # set by the reader when it ends the worker
        self._closed = False
        self.class_names: tuple[str, ...] = ()
        self.region_classes: tuple[str, ...] | None = None  # see Segmenter.region_classes
        # The worker's ops on the PyTorch reference after its warm-up (a GPU kernel failed).
        self.ops_on_reference: dict[str, str] = {}
        with self._cond:
            self._start(cancel)

    # -- the worker's life (called with the lock held) -------------------------
    def _start(self, cancel: threading.Event | None = None) -> None:
        self._state = "starting"
        child = self._child = Child(self._ctx, self.model_config, self.threads, self.nice)
        try:
            reply = child.first_answer(cancel)
        except BaseException as exc:
            self.last_error = f"{type(exc).__name__}: {exc}"
            self._stop_worker(timeout=0.0 if isinstance(exc, StartCancelled) else 5.0)
            self._state = "failed"
            self._ended_in_a_row += 1
            raise
        self._worker_cpu = float(reply["process_cpu"])
        self.class_names = tuple(reply["class_names"])
        regions = reply.get("region_classes")
        self.region_classes = None if regions is None else tuple(regions)
        self.ops_on_reference = dict(reply.get("ops_on_reference", {}))
        self._reader = threading.Thread(
            target=self._read_answers,
            args=(child.conn, child.proc),
            name="model-process-answers",
            daemon=True,
        )
        self._reading, self._ended_why, self._state = True, None, "running"
        self._reader.start()

    def _stop_worker(self, timeout: float = 10.0) -> None:
        child, reader = self._child, self._reader
        self._child = self._reader = None
        if child is None:
            return
        child.ask_to_close()
        self._cond.release()  # the reader may need the lock to finish
        try:
            child.join(timeout)
            if reader is not None:
                reader.join(5.0)
        finally:
            self._cond.acquire()
        child.release()

    def _ensure_running(self) -> None:
        """Start a new worker if the last one ended (once its answers are all
        settled), after the backoff of :func:`_backoff`, and send it the
        batches the last one held; give up after :data:`MAX_ENDED_IN_A_ROW`."""
        while True:
            if self._closed:
                raise ModelProcessError("the model's process is closed")
            if self._gave_up is not None:
                raise self._gave_up
            if self._child is not None and self._child.proc.is_alive() and self._reading:
                return  # (perhaps started again by another thread meanwhile)
            if not self._pending and not self._restarting:
                break
            # The reader settles what the ended worker had; another thread's
            # restart (which lets go of the lock while it waits) finishes.
            self._cond.wait(0.5)
        self._restarting = True
        try:
            self._restart()
        except BaseException as exc:
            again, self._again = self._again, []
            self._settle_failed(again, exc if isinstance(exc, Exception) else None)
            raise
        finally:
            self._restarting = False
            self._cond.notify_all()

    def _restart(self) -> None:
        proc = self._child.proc if self._child is not None else None
        self._stop_worker(timeout=1.0)  # reaps it (kills it if it is still there)
        if proc is not None:
            self.last_error = self._ended_why or f"the model's process {how_ended(proc)}"
            self._ended_cpu += self._worker_cpu
            self._worker_cpu = 0.0
        if self._ended_in_a_row >= MAX_ENDED_IN_A_ROW:
            self._state = "failed"
            self._gave_up = ModelProcessError(
                f"{self.last_error}; {self._ended_in_a_row} of its processes in a row ended "
                "without answering a batch: giving up"
            )
            log.critical("model: %s", self._gave_up)
            raise self._gave_up
        delay = _backoff(self._ended_in_a_row - 1)
        log.error(
            "model: %s; starting it again%s",
            self.last_error,
            f" in {delay:.0f} s" if delay else "",
        )
        self._state = "restarting"
        deadline = time.monotonic() + delay
        while not self._closed and (left := deadline - time.monotonic()) > 0:
            self._cond.wait(left)
        if self._closed:
            raise ModelProcessError("the model's process is closed")
        self.restarts += 1
        self._start()
        if self._weights is not None:
            weights = self._send(("load_weights", self._weights), None)
            self._cond.release()
            try:
                weights.result(self.answer_timeout + 5)
            finally:
                self._cond.acquire()
        again, self._again = self._again, []
        for entry in again:  # what the last worker held, in the order it was sent
            entry.sends += 1
            self._resend(entry)

    # -- requests and answers -----------------------------------------------------
    def _send(self, request: tuple[Any, ...], block: int | None) -> Future[Any]:
        entry = Pending(Future(), request, block, time.monotonic())
        self._resend(entry)
        return entry.future

    def _resend(self, entry: Pending) -> None:
        entry.sent = time.monotonic()
        self._pending.append(entry)
        assert self._child is not None
        with contextlib.suppress(OSError, ValueError):  # gone: the reader settles it
            self._child.conn.send(entry.request)

    def _read_answers(self, conn: Any, proc: Any) -> None:
        """Settle each request's future as its answer comes, in order; when the
        worker ends (or answers nothing in time and is ended), fail every
        request it had."""
        why = None
        while why is None:
            try:
                if not conn.poll(0.5):
                    why = self._overdue(proc)
                    continue
                kind, payload = conn.recv()
            except (EOFError, OSError):
                break
            self._settle(kind, payload)
        proc.join(1.0)  # its exit code, for the message
        why = why or f"the model's process {how_ended(proc)}"
        with self._cond:
            self._reading, self._ended_why = False, why
            self._ended_in_a_row += 1
            ended = list(self._pending)
            self._pending.clear()
            again = [
                e
                for e in ended
                if e.request[0] == "segment" and e.sends < SENDS and not self._closed
            ]
            self._again += again
            failed = [e for e in ended if e not in again]
            self._cond.notify_all()
        self._settle_failed(failed, ModelProcessError(f"{why} before it answered"))
        if again:  # started again now, not at the next batch: these must be answered
            threading.Thread(
                target=self._start_again, name="model-process-restart", daemon=True
            ).start()

    def _start_again(self) -> None:
        with self._cond, contextlib.suppress(Exception):  # the batches were failed with it
            self._ensure_running()

    def _settle_failed(self, entries: list[Pending], error: Exception | None) -> None:
        """Fail ``entries`` with ``error`` (default: closed); their blocks are free again."""
        error = error or ModelProcessError("the model's process is closed")
        with self._cond:
            for entry in entries:
                if entry.block is not None:
                    self._free.append(entry.block)
            self._cond.notify_all()
        for entry in entries:
            entry.future.set_exception(error)

    def _overdue(self, proc: Any) -> str | None:
        """End a worker whose oldest request waits longer than ``answer_timeout``."""
        with self._cond:
            sent = self._pending[0].sent if self._pending else None
        if sent is None or time.monotonic() - sent <= self.answer_timeout:
            return None
        why = f"the model's process answered nothing for {self.answer_timeout:.0f} s; ended it"
        log.error("model: %s (pid %d)", why, proc.pid)
        proc.kill()
        return why

    def _settle(self, kind: str, payload: Any) -> None:
        with self._cond:
            if not self._pending:
                return
            entry = self._pending.popleft()
            future = entry.future
            if entry.block is not None:
                self._free.append(entry.block)
            if kind == "ok":
                self._worker_cpu = float(payload.get("process_cpu", self._worker_cpu))
                rss = float(payload.get("peak_rss_mb", 0.0))
                self.peak_rss_mb = max(self.peak_rss_mb, rss)
                self.cpu_seconds += float(payload.get("cpu", 0.0))
                if "instances" in payload:
                    self._ended_in_a_row = 0
            self._cond.notify_all()
        if kind == "error":
            future.set_exception(payload)
        elif "instances" in payload:
            try:
                future.set_result([unpack_instances(p) for p in payload["instances"]])
            except Exception as exc:
                future.set_exception(exc)
        else:
            future.set_result(payload)

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
                header = self._blocks.write(block, batch.frames)
            except BaseException:
                self._free.append(block)
                raise
            return self._send(("segment", header), block)

    def segment(self, batch: FrameBatch) -> list[Instances]:
        # Every future settles within answer_timeout (the worker is ended then).
        result: list[Instances] = self.submit(batch).result(self.answer_timeout + 30)
        return result

    def warm_up(self) -> float:
        return float(self._request(("warm_up",), self.answer_timeout + 30)["seconds"])

    def load_weights(self, path: str) -> None:
        """Load ``path`` in the worker (hot swap); raises as ``Segmenter.load_weights`` does.

        Batches sent before run with the old weights, batches sent after
        with the new ones.
        """
        self._request(("load_weights", path), self.answer_timeout + 30)
        self._weights = path

    def close(self) -> None:
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._cond.notify_all()  # a restart's backoff ends
            self._stop_worker()
            self._state = "closed"
            again, self._again = self._again, []
            self._settle_failed(again, None)
            self._blocks.close()

    def process_cpu_seconds(self) -> float:
        """CPU seconds of the model's processes so far (every thread), as of their last answer."""
        return self._ended_cpu + self._worker_cpu

    def pid(self) -> int | None:
        """The worker's process id (``None`` when none runs)."""
        child = self._child
        return child.pid if child is not None else None

    def health(self) -> dict[str, Any]:
        """The worker as ``/readyz`` shows it: ``pid``, ``state`` (``starting``,
        ``running``, ``restarting``, ``failed``, ``closed``), ``restarts`` and
        ``last_error`` (how the last worker ended, or why a start failed)."""
        state = self._state
        if state == "running" and not self._reading:
            state = "restarting"  # ended; the next batch starts it again
        info = {"pid": self.pid(), "state": state, "restarts": self.restarts}
        return {**info, "last_error": self.last_error}


def _backoff(ended_in_a_row: int) -> float:
    """Seconds to wait before starting a worker after ``ended_in_a_row`` ended before it:
    none after the first, then 1, 2, 4 ... up to ``MAX_RESTART_BACKOFF``."""
    return 0.0 if ended_in_a_row <= 0 else min(MAX_RESTART_BACKOFF, 2.0 ** (ended_in_a_row - 1))
