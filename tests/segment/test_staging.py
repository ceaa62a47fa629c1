"""Frames to the device: pinned buffers in turn, one non-blocking copy per frame size.

CUDA's part (pinned memory, the copy stream and its events) runs only on a
GPU (scripts/gpu-check.sh runs this file there); the buffer rotation, the
grouping and the order run here on the emulated GPU, where a non-blocking
copy is counted as a launch and not as a host sync.
"""

from __future__ import annotations

import pytest
import torch

from streamseg.bench.emulated import emulated_gpu
from streamseg.segment.staging import BUFFERS, FrameStaging


def frames(*sizes: tuple[int, int], start: int = 0) -> list[torch.Tensor]:
    return [torch.full((h, w, 3), start + i, dtype=torch.uint8) for i, (h, w) in enumerate(sizes)]


def test_on_the_cpu_frames_stay_as_they_are() -> None:
    images = frames((4, 6), (4, 6))
    staging = FrameStaging(torch.device("cpu"))
    assert staging.stage(images) == images and not staging.pinned


def test_frames_go_over_in_one_copy_per_size_and_come_back_in_order() -> None:
    images = frames((4, 6), (8, 10), (4, 6))
    with emulated_gpu() as (device, counts):
        staging = FrameStaging(device)
        sent = staging.stage(images)
        assert counts.launches["copy:H2D"] == 2 and counts.totals()["syncs"] == 0
        assert all(t.device == device for t in sent)
        assert [t.cpu()[0, 0, 0].item() for t in sent] == [0, 1, 2]
        assert sent[0].cpu().shape == (4, 6, 3) and sent[1].cpu().shape == (8, 10, 3)
        assert staging.stage(sent) == sent  # already there: nothing to copy
    assert not staging.pinned  # no CUDA here: plain host buffers


def test_buffers_are_used_in_turn() -> None:
    with emulated_gpu() as (device, _):
        staging = FrameStaging(device)
        seen = []
        for batch in range(BUFFERS + 1):
            staging.stage(frames((4, 6), (4, 6), start=10 * batch))
            (buffers,) = staging.buffers().values()
            seen.append([int(b[0, 0, 0, 0]) for b in buffers])
    assert len(buffers) == BUFFERS
    # Batch 0 fills buffer 0, batch 1 buffer 1, batch 2 buffer 0 again.
    assert seen[0][0] == 0 and seen[1] == [0, 10] and seen[2] == [20, 10]


def test_the_segmenter_sends_its_frames_without_a_host_sync() -> None:
    from streamseg.bench.model import synthetic_batches
    from streamseg.segment import Segmenter

    batch = synthetic_batches((64, 96), 2, 1)[0]
    with emulated_gpu() as (device, counts):
        with counts.paused():
            segmenter = Segmenter(arch="maskrcnn_small", device=device, min_size=64)
        staged = segmenter.stage(batch)
        assert all(f.image.device == device for f in staged)
        assert [f.camera_id for f in staged] == [f.camera_id for f in batch]
        assert counts.totals()["syncs"] == 0
        counts.clear()
        with counts.paused():
            segmenter.segment(staged)
        again = segmenter.stage(staged)  # nothing left to send
        assert all(a.image is b.image for a, b in zip(again, staged, strict=True))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_staging_pins_its_buffers_and_copies_on_a_stream() -> None:
    """On a GPU: pinned buffers, a copy stream, frames intact and in order, batch after batch."""
    staging = FrameStaging(torch.device("cuda"))
    assert staging.pinned
    for batch in range(2 * BUFFERS + 1):
        images = frames((4, 6), (8, 10), (4, 6), start=10 * batch)
        sent = staging.stage(images)
        assert all(t.device.type == "cuda" for t in sent)
        assert [int(t[0, 0, 0]) for t in sent] == [10 * batch, 10 * batch + 1, 10 * batch + 2]
    pinned = [b for group in staging.buffers().values() for b in group]
    assert len(pinned) == 2 * BUFFERS and all(b.is_pinned() for b in pinned)
