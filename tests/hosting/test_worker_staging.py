"""The model's own process stages the next batch while it runs one.

The parent sends batch ``N + 1`` before batch ``N`` is answered; the
worker's thread ``requests`` reads it then and calls ``Segmenter.stage`` on
it (pinned buffers and a copy stream on a GPU), so its copy to the device
overlaps batch ``N``'s compute. On the CPU ``stage`` copies nothing, but
when and in what order it is called is the same: this test runs the
worker's serving loop in a thread, with a real small model that records
its calls, and the parent's side of the pipe and shared memory.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from typing import Any

import torch

from streamseg.hosting.wire import FrameBlocks, unpack_instances
from streamseg.hosting.worker import serve
from streamseg.segment import Segmenter
from streamseg.synthetic.scene import SyntheticScene
from streamseg.types import Frame, FrameBatch, Instances
from tests.segment.conftest import SMALL

BATCHES = 4
WAIT_S = 10.0


class RecordingSegmenter(Segmenter):
    """The small Mask R-CNN, noting each ``stage`` and ``segment`` call by batch.

    While it segments a batch it waits (at most ``WAIT_S``) for the next batch
    to be staged: a worker that stages only after answering never stages it
    meanwhile, and the order below shows it.
    """

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.calls: list[tuple[str, int]] = []
        self._staged = [threading.Event() for _ in range(BATCHES)]

    def stage(self, batch: FrameBatch) -> FrameBatch:
        index = batch.frames[0].seq
        self.calls.append(("stage", index))
        self._staged[index].set()
        return super().stage(batch)

    def segment(self, batch: FrameBatch) -> list[Instances]:
        index = batch.frames[0].seq
        self.calls.append(("segment", index))
        if index + 1 < BATCHES:
            self._staged[index + 1].wait(WAIT_S)
        results = super().segment(batch)
        self.calls.append(("answered", index))
        return results


def _batch(scene: SyntheticScene, index: int) -> FrameBatch:
    image = scene.frame(index).image
    return FrameBatch((Frame("cam", index, scene.time(index), time.time(), image),))


def test_the_next_batch_is_staged_while_one_runs() -> None:
    torch.manual_seed(0)
    segmenter = RecordingSegmenter(**SMALL)
    scene = SyntheticScene(seed=3, height=96, width=128)
    parent, child = multiprocessing.Pipe()
    worker = threading.Thread(target=serve, args=(child, segmenter, {}), daemon=True)
    worker.start()
    blocks = FrameBlocks(2)
    answers = []
    try:
        for index in range(2):  # two in flight, as ModelProcess sends them
            parent.send(("segment", blocks.write(index, _batch(scene, index).frames)))
        for index in range(BATCHES):
            assert parent.poll(60), f"batch {index} was not answered"
            kind, payload = parent.recv()
            assert kind == "ok", payload
            answers.append([unpack_instances(p) for p in payload["instances"]])
            if index + 2 < BATCHES:  # its block is free again
                frames = _batch(scene, index + 2).frames
                parent.send(("segment", blocks.write(index % 2, frames)))
        parent.send(("close",))
        worker.join(10)
    finally:
        blocks.close()
    assert not worker.is_alive()
    assert [len(a) for a in answers] == [1] * BATCHES
    assert all(a[0].image_size == (96, 128) for a in answers)
    calls = segmenter.calls
    assert [i for op, i in calls if op == "stage"] == list(range(BATCHES))  # each once, in order
    assert [i for op, i in calls if op == "segment"] == list(range(BATCHES))
    for index in range(BATCHES):
        assert calls.index(("stage", index)) < calls.index(("segment", index))
    for index in range(BATCHES - 1):  # staged while the batch before it ran
        assert calls.index(("stage", index + 1)) < calls.index(("answered", index)), calls
