"""Bounded camera queues: live drops oldest (counted), files block, fair batching."""

from __future__ import annotations

import threading
import time

import torch

from streamseg.runtime.queues import CameraQueues, StageQueue
from streamseg.types import Frame


def frame(cam: str, seq: int) -> Frame:
    return Frame(cam, seq, seq / 10, time.time(), torch.zeros((2, 2, 3), dtype=torch.uint8))


def test_live_queue_drops_oldest_and_counts() -> None:
    dropped: list[Frame] = []
    q = CameraQueues(on_drop=dropped.append)
    q.add_camera("live", live=True, capacity=3)
    for i in range(10):
        assert q.put(frame("live", i))
    assert [f.seq for f in dropped] == list(range(7))
    assert q.dropped() == {"live": 7}
    batch = q.take_batch(8, 0.0)
    assert batch is not None
    assert [f.seq for f in batch] == [7, 8, 9]  # the newest survive, in order


def test_file_queue_blocks_and_loses_nothing() -> None:
    q = CameraQueues()
    q.add_camera("file", live=False, capacity=2)
    produced = 50

    def produce() -> None:
        for i in range(produced):
            q.put(frame("file", i))
        q.close_camera("file")

    t = threading.Thread(target=produce)
    t.start()
    time.sleep(0.05)
    assert q.depths()["file"] == 2  # the producer waits for room
    seen = []
    while (batch := q.take_batch(3, 0.01)) is not None:
        seen += [f.seq for f in batch]
    t.join(5)
    assert seen == list(range(produced))
    assert q.dropped() == {"file": 0}


def test_round_robin_across_cameras() -> None:
    q = CameraQueues()
    for cam in ("a", "b", "c"):
        q.add_camera(cam, live=True, capacity=10)
    for i in range(4):
        q.put(frame("a", i))
    q.put(frame("b", 0))
    q.put(frame("c", 0))
    batch = q.take_batch(3, 0.0)
    assert batch is not None
    assert sorted(f.camera_id for f in batch) == ["a", "b", "c"]


def test_take_batch_waits_at_most_max_wait() -> None:
    q = CameraQueues()
    q.add_camera("a", live=True, capacity=10)
    q.put(frame("a", 0))
    t0 = time.monotonic()
    batch = q.take_batch(4, 0.15)
    waited = time.monotonic() - t0
    assert batch is not None and len(batch) == 1
    assert 0.1 <= waited < 2.0
    assert q.last_fill_wait >= 0.1


def test_take_batch_fills_when_frames_arrive() -> None:
    q = CameraQueues()
    q.add_camera("a", live=True, capacity=10)

    def later() -> None:
        for i in range(4):
            q.put(frame("a", i))
            time.sleep(0.01)

    threading.Thread(target=later).start()
    batch = q.take_batch(4, 5.0)
    assert batch is not None and len(batch) == 4


def test_full_file_queue_does_not_wait_for_batch() -> None:
    q = CameraQueues()
    q.add_camera("f", live=False, capacity=2)
    q.put(frame("f", 0))
    q.put(frame("f", 1))
    t0 = time.monotonic()
    batch = q.take_batch(8, 5.0)
    assert batch is not None and len(batch) == 2
    assert time.monotonic() - t0 < 1.0  # no frame can arrive until we take some


def test_end_of_stream_after_close() -> None:
    q = CameraQueues()
    q.add_camera("a", live=True, capacity=4)
    q.add_camera("b", live=False, capacity=4)
    q.put(frame("a", 0))
    q.close_all()
    assert not q.put(frame("b", 0))  # closed queues take nothing
    assert [f.seq for f in q.take_batch(4, 0.0) or []] == [0]
    assert q.take_batch(4, 0.0) is None


def test_put_returns_false_when_stopping() -> None:
    q = CameraQueues()
    q.add_camera("f", live=False, capacity=1)
    stop = threading.Event()
    assert q.put(frame("f", 0), stop)
    threading.Timer(0.1, stop.set).start()
    assert not q.put(frame("f", 1), stop)


def test_stage_queue_end_marker() -> None:
    q: StageQueue[int] = StageQueue("x", 4)
    for i in range(3):
        q.put(i)
    q.close()
    items, end = q.get_many(2, 0.1)
    assert items == [0, 1] and not end
    items, end = q.get_many(10, 0.1)
    assert items == [2] and end


def test_a_removed_camera_leaves_and_the_last_one_removed_does_not_end_the_stream() -> None:
    q = CameraQueues()
    q.add_camera("a", live=True, capacity=2)
    q.add_camera("b", live=True, capacity=2)
    q.put(frame("b", 0))
    q.close_camera("b")
    assert not q.remove_camera("b")  # a frame still waits: it goes through first
    assert [f.seq for f in q.take_batch(4, 0.0) or []] == [0]
    assert q.remove_camera("b") and q.depths() == {"a": 0}  # gone from the depth gauge
    q.close_camera("a")
    assert q.remove_camera("a") and q.depths() == {}
    # Every camera removed: the batcher waits for one added later, not the end of stream.
    got: list[list[Frame] | None] = []
    taker = threading.Thread(target=lambda: got.append(q.take_batch(1, 0.0)))
    taker.start()
    taker.join(0.3)
    assert taker.is_alive() and not got
    q.add_camera("a", live=True, capacity=2)  # the same id, added again
    q.put(frame("a", 7))
    taker.join(5)
    assert got and [f.seq for f in got[0] or []] == [7]
    # end(): a stopping pipeline with no camera left ends.
    q.close_camera("a")
    q.remove_camera("a")
    q.end()
    assert q.take_batch(1, 0.0) is None


def test_the_last_camera_closing_while_being_removed_does_not_end_the_stream() -> None:
    # Pipeline.remove_source: removing() first, then the source stops and its queue closes
    # while the batcher waits; only then is the queue removed. A fleet worker whose last
    # camera moves elsewhere must keep running, waiting for the next one.
    q = CameraQueues()
    q.add_camera("a", live=True, capacity=2)
    got: list[list[Frame] | None] = []
    taker = threading.Thread(target=lambda: got.append(q.take_batch(1, 0.0)))
    taker.start()
    q.removing("a")
    q.close_camera("a")
    taker.join(0.3)
    assert taker.is_alive() and not got  # not the end of the stream
    assert q.remove_camera("a")
    q.add_camera("b", live=True, capacity=2)
    q.put(frame("b", 3))
    taker.join(5)
    assert got and [f.seq for f in got[0] or []] == [3]
