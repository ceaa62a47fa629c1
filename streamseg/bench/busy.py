"""Busy neighbours for ``bench track``'s loaded mode: what runs beside tracking in ``serve``.

In ``serve`` the tracking stage never runs alone: the model keeps the
machine's cores busy (in a process of its own with ``runtime.model_process``)
and other threads of the same process (message encoding, the sinks'
writers) run Python and so want the GIL. :class:`Busy` starts both kinds
for the length of a ``with`` block:

* ``processes``: child processes each multiplying 256x256 float32 matrices
  in a loop on one thread (numpy; a stand-in for the model's forward
  passes): they compete for the CPUs and their caches. ``nice``: the CPU
  priority steps they run below this process, as ``serve`` runs the
  model's process (``runtime.model_nice``).
* ``threads``: threads of this process encoding a detections-like message
  to JSON in a loop: they compete for the GIL. Any call of the tracking
  path that gives the GIL up lets such a thread take it, and the tracker
  then waits up to a whole switch interval (``sys.getswitchinterval()``,
  5 ms) to get it back.

Example::

    >>> with Busy(processes=1, threads=1):
    ...     pass
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from types import TracebackType

__all__ = ["Busy"]

_MODEL = """
import numpy as np
a = np.random.default_rng(0).random((256, 256), dtype=np.float32)
b = a.copy()
while True:
    b = (a @ b) * np.float32(1e-3)
"""

_MESSAGE = {
    "camera_id": "bench",
    "frame_seq": 1,
    "detections": [
        {"track_id": i, "label": "box", "score": 0.9, "box": [1.5, 2.5, 30.5, 40.5]}
        for i in range(20)
    ],
}


class Busy:
    """``processes`` busy child processes and ``threads`` busy threads, while in ``with``.

    The children run with one BLAS thread each and are killed on exit; the
    threads stop at the next message. ``started`` waits until every child
    is running (its interpreter started), so the load is there from the
    first timed frame.
    """

    def __init__(self, *, processes: int, threads: int, nice: int = 0) -> None:
        self.processes = processes
        self.threads = threads
        self.nice = nice
        self._children: list[subprocess.Popen[bytes]] = []
        self._workers: list[threading.Thread] = []
        self._stop = threading.Event()

    def __enter__(self) -> Busy:
        env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
        lower = f"import os; os.nice({self.nice})\n" if self.nice > 0 else ""
        code = lower + "import sys; sys.stdout.write('go'); sys.stdout.flush()\n" + _MODEL
        for _ in range(self.processes):
            child = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE)
            self._children.append(child)
        for child in self._children:
            assert child.stdout is not None
            child.stdout.read(2)  # running
        for i in range(self.threads):
            worker = threading.Thread(target=self._encode, name=f"busy-{i}", daemon=True)
            worker.start()
            self._workers.append(worker)
        time.sleep(0.05)
        return self

    @property
    def pids(self) -> list[int]:
        """The busy child processes' pids."""
        return [child.pid for child in self._children]

    def _encode(self) -> None:
        while not self._stop.is_set():
            json.dumps(_MESSAGE)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        for worker in self._workers:
            worker.join()
        for child in self._children:
            child.kill()
            child.wait()
            if child.stdout is not None:
                child.stdout.close()
