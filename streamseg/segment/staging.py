"""Decoded frames from the host to the GPU: pinned buffers, non-blocking copies, a copy stream.

``tensor.to("cuda")`` from ordinary (pageable) memory is a host sync: CUDA
synchronises the stream, so the CPU waits until the GPU has run everything
queued before the copy (the previous batch's tail included), and the copy
itself goes at pageable speed. :class:`FrameStaging` does what the GPU
needs instead:

* the frames of one size are stacked into a page-locked (pinned) buffer,
  a host ``memcpy`` that needs no GPU;
* one ``non_blocking`` copy per size sends them to the device on a copy
  stream of its own, so it runs beside whatever the compute stream is
  doing (the previous batch, when ``stage`` is called before that batch
  has finished: ``Segmenter.stage``);
* the compute stream waits for the copy on the GPU (``wait_stream``), not
  on the host;
* each shape has :data:`BUFFERS` pinned buffers used in turn; one is written
  again only after its last copy has finished (its CUDA event), which, one
  batch later, it always has.

Without CUDA (a CPU build, or the emulated GPU that counts dispatches) there
is no pinned memory and no stream: the frames are stacked and sent with one
``non_blocking`` copy per size, which the emulated GPU counts as a launch
and not as a sync, as on CUDA. The buffer rotation is the same everywhere,
so the tests run it on the CPU.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from streamseg.ops.syncs import record_sync

__all__ = ["BUFFERS", "FrameStaging"]

# Pinned buffers per frame shape, used in turn.
BUFFERS = 2


class FrameStaging:
    """Host ``uint8 (H, W, 3)`` frames -> the same frames on ``device``.

    Args:
        device: where the frames go; on the CPU :meth:`stage` returns them
            as they are.
        pinned: use page-locked buffers and a copy stream; default: when
            ``device`` is a CUDA device and CUDA is available.

    ``stage`` may be called from one thread while ``segment`` runs in
    another (it takes its own lock).
    """

    def __init__(self, device: torch.device, *, pinned: bool | None = None) -> None:
        self.device = torch.device(device)
        cuda = self.device.type == "cuda" and torch.cuda.is_available()
        self.pinned = cuda if pinned is None else pinned
        self._stream: Any = torch.cuda.Stream(self.device) if cuda else None
        self._buffers: dict[tuple[int, ...], list[Tensor]] = {}
        self._events: dict[tuple[int, ...], list[Any]] = {}
        self._turn: dict[tuple[int, ...], int] = {}
        self._lock = threading.Lock()

    def stage(self, images: Sequence[Tensor]) -> list[Tensor]:
        """``images`` on the device, in order: one copy per distinct frame size.

        Each returned frame is a view of its size's ``(n, H, W, 3)`` batch on
        the device; frames already there are returned as they are.
        """
        if self.device.type == "cpu":
            return list(images)
        out: list[Tensor | None] = [im if im.device == self.device else None for im in images]
        on_host = [i for i, im in enumerate(images) if out[i] is None]
        with self._lock:
            for group in _by_shape([images[i] for i in on_host]):
                indices = [on_host[g] for g in group]
                stacked = self._send([images[i] for i in indices])
                for j, i in enumerate(indices):
                    out[i] = stacked[j]
        return [t for t in out if t is not None]

    def _send(self, frames: list[Tensor]) -> Tensor:
        """One size's frames stacked in a host buffer and copied to the device."""
        key = (len(frames), *frames[0].shape)
        turn = self._turn.get(key, 0)
        self._turn[key] = (turn + 1) % BUFFERS
        buffer = self._buffer(key, turn)
        torch.stack(frames, out=buffer)
        if self._stream is None:
            return buffer.to(self.device, non_blocking=True)
        with torch.cuda.stream(self._stream):
            sent = buffer.to(self.device, non_blocking=True)
            self._events[key][turn].record(self._stream)
        compute = torch.cuda.current_stream(self.device)
        compute.wait_stream(self._stream)
        sent.record_stream(compute)  # the allocator must not reuse it before compute is done
        return sent

    def _buffer(self, key: tuple[int, ...], turn: int) -> Tensor:
        """Buffer ``turn`` of ``key``'s, free to write (its last copy has finished)."""
        buffers = self._buffers.get(key)
        if buffers is None:
            buffers = [
                torch.empty(key, dtype=torch.uint8, pin_memory=self.pinned) for _ in range(BUFFERS)
            ]
            self._buffers[key] = buffers
            if self._stream is not None:
                self._events[key] = [torch.cuda.Event() for _ in range(BUFFERS)]
        if self._stream is not None:
            # Recorded after the copy of the last batch but one that used it: long done
            # by now, normally; only if not does the host wait.
            event = self._events[key][turn]
            if not event.query():
                record_sync("pinned frame buffer still being copied")
                event.synchronize()
        return buffers[turn]

    def buffers(self) -> dict[tuple[int, ...], list[Tensor]]:
        """The host buffers by ``(n, H, W, 3)`` (for tests and memory accounting)."""
        return dict(self._buffers)


def _by_shape(images: Sequence[Tensor]) -> list[list[int]]:
    """Indices of the frames of each distinct shape, in first-seen order."""
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, image in enumerate(images):
        groups.setdefault(tuple(image.shape), []).append(i)
    return list(groups.values())
