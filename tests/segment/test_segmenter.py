"""The Segmenter on the real small Mask R-CNN: batching, frame resolution, hot swap."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from streamseg.models import build_model
from streamseg.models.checkpoint import CheckpointError, save_checkpoint
from streamseg.segment import Segmenter
from streamseg.segment.segmenter import done_future
from streamseg.types import FrameBatch, Instances
from tests.segment.conftest import SMALL, scene_batch


@pytest.fixture(scope="module")
def segmenter() -> Segmenter:
    torch.manual_seed(0)
    return Segmenter(**SMALL)


def _assert_same(a: list[Instances], b: list[Instances]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert x.image_size == y.image_size and len(x) == len(y)
        torch.testing.assert_close(x.boxes, y.boxes, atol=1e-2, rtol=1e-4)
        torch.testing.assert_close(x.scores, y.scores, atol=1e-4, rtol=1e-4)
        assert torch.equal(x.labels, y.labels)
        assert x.masks is not None and y.masks is not None
        assert (x.masks != y.masks).float().mean() < 1e-3


def test_cameras_of_different_sizes_in_one_batch(segmenter: Segmenter) -> None:
    sizes = [(96, 160), (120, 90), (96, 160)]
    results = segmenter.segment(scene_batch(sizes))
    assert [r.image_size for r in results] == sizes
    names = segmenter.class_names
    for r, (h, w) in zip(results, sizes, strict=True):
        assert len(r) > 0  # score_threshold 0: the heads ran
        assert r.masks is not None and r.masks.dtype == torch.bool
        assert tuple(r.masks.shape) == (len(r), h, w)
        assert r.boxes.dtype == torch.float32 and r.labels.dtype == torch.int64
        assert bool((r.boxes[:, 0::2] >= 0).all() and (r.boxes[:, 0::2] <= w).all())
        assert bool((r.boxes[:, 1::2] >= 0).all() and (r.boxes[:, 1::2] <= h).all())
        assert bool((r.labels >= 1).all() and (r.labels < len(names)).all())


def test_a_batch_equals_its_frames_one_by_one(segmenter: Segmenter, batch2: FrameBatch) -> None:
    together = segmenter.segment(batch2)
    alone = [segmenter.segment(FrameBatch((f,)))[0] for f in batch2.frames]
    _assert_same(together, alone)


def test_submit_is_segment_as_a_done_future(segmenter: Segmenter, batch2: FrameBatch) -> None:
    """The pipeline's one interface (``submit``): in this process the batch runs
    at once, its result or its error in a done future, its CPU time counted."""
    cpu0 = segmenter.cpu_seconds
    future = segmenter.submit(batch2)
    assert future.done()
    assert segmenter.cpu_seconds > cpu0
    _assert_same(future.result(), segmenter.segment(batch2))
    assert segmenter.health() is None  # no process of its own

    def refuse(batch: FrameBatch) -> list[Instances]:
        raise RuntimeError(f"no model for {len(batch)} frames")

    failed = done_future(refuse, batch2)  # what submit does with a batch that raises
    assert failed.done() and "no model for 2 frames" in str(failed.exception())


def test_class_names_and_empty_batch(segmenter: Segmenter) -> None:
    assert segmenter.class_names[0] == "__background__"
    assert segmenter.class_names == build_model("maskrcnn_small").class_names
    assert segmenter.segment(FrameBatch(())) == []


def test_bf16_autocast_gives_float32_results(batch2: FrameBatch) -> None:
    seg = Segmenter(precision="bf16", **SMALL)
    results = seg.segment(batch2)
    assert results[0].boxes.dtype == torch.float32 and results[0].scores.dtype == torch.float32
    assert results[0].masks is not None and results[0].masks.shape[1:] == (96, 160)


DEMO = Path(__file__).resolve().parents[2] / "models" / "demo_small.pth"


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_low_precision_finds_what_fp32_finds(precision: str) -> None:
    """The trained demo model: confident detections agree with fp32 to a few pixels."""
    from streamseg.synthetic.scene import SyntheticScene
    from streamseg.types import Frame

    scene = SyntheticScene(seed=1001, height=240, width=320, num_objects=5)
    frames = tuple(
        Frame("cam", i, f.time, 0.0, f.image) for i, f in enumerate(scene.frame(k) for k in (0, 7))
    )
    full = Segmenter(arch="maskrcnn_small", weights=str(DEMO)).segment(FrameBatch(frames))
    low = Segmenter(arch="maskrcnn_small", weights=str(DEMO), precision=precision)
    for a, b in zip(full, low.segment(FrameBatch(frames)), strict=True):
        assert b.boxes.dtype == torch.float32 and b.masks is not None
        sure = a.scores > 0.7
        assert int(sure.sum()) >= 2
        for box, label in zip(a.boxes[sure], a.labels[sure], strict=True):
            gap = (b.boxes - box).abs().max(dim=1).values
            j = int(gap.argmin())
            assert float(gap[j]) < 4.0 and int(b.labels[j]) == int(label), (precision, box)


def _checkpoint(path: Path, seed: int, **meta_changes: object) -> Path:
    torch.manual_seed(seed)
    options = {k: v for k, v in SMALL.items() if k != "arch"}
    model = build_model("maskrcnn_small", **options, **meta_changes)  # type: ignore[arg-type]
    names = list(model.class_names)
    save_checkpoint(
        path,
        model.state_dict(),
        arch="maskrcnn_small",
        class_names=names,
        num_classes=len(names),
        model_options={**options, **meta_changes},
    )
    return path


def test_hot_swap_loads_new_weights_in_place(tmp_path: Path, batch2: FrameBatch) -> None:
    seg = Segmenter(**SMALL)
    before = seg.segment(batch2)
    ckpt = _checkpoint(tmp_path / "best.pth", seed=7)
    seg.load_weights(str(ckpt))
    after = seg.segment(batch2)
    fresh = Segmenter(weights=str(ckpt), **SMALL)
    _assert_same(after, fresh.segment(batch2))
    assert not torch.allclose(before[0].scores[:5], after[0].scores[:5])
    assert seg.weights == str(ckpt)


def test_failed_hot_swap_keeps_the_old_weights(tmp_path: Path, batch2: FrameBatch) -> None:
    seg = Segmenter(**SMALL)
    before = seg.segment(batch2)
    truncated = tmp_path / "truncated.pth"
    good = _checkpoint(tmp_path / "good.pth", seed=3)
    truncated.write_bytes(good.read_bytes()[:1000])
    with pytest.raises(CheckpointError, match="truncated"):
        seg.load_weights(str(truncated))
    with pytest.raises(CheckpointError, match="does not exist"):
        seg.load_weights(str(tmp_path / "missing.pth"))
    other = _checkpoint(tmp_path / "classes.pth", seed=3, num_classes=3)
    with pytest.raises(CheckpointError, match="num_classes"):
        seg.load_weights(str(other))
    _assert_same(seg.segment(batch2), before)
    assert seg.weights is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"precision": "fp64"}, "precision must be one of fp32, bf16, fp16"),
        ({"backend": "onnx"}, "backend must be one of eager, inductor, aot, tensorrt"),
        ({"device": "tpu"}, "device must be 'cpu', 'cuda' or 'cuda:N'"),
        ({"backend": "aot"}, "needs model.aot_package"),
        ({"backend": "aot", "aot_package": "/nowhere/x.pt2"}, "does not exist"),
    ],
)
def test_bad_settings_are_clear_errors(kwargs: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Segmenter(**{**SMALL, **kwargs})


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only message")
def test_cuda_without_a_gpu_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="sees no CUDA GPU; use device: cpu"):
        Segmenter(device="cuda", **SMALL)


def test_warm_up_segments_the_largest_landscape_input(segmenter: Segmenter) -> None:
    spec = segmenter.input_spec
    assert segmenter.backend.warm_up_frame(spec.min_size, spec.max_size) == (
        spec.min_size,
        spec.max_size,
    )
    assert segmenter.warm_up() > 0
    # Nothing of the blank frame stays behind: a real batch still segments.
    assert len(segmenter.segment(scene_batch([(96, 160)]))) == 1
    # On the CPU the C++ kernels run: no op was moved to the reference.
    assert segmenter.ops_on_reference == {}


def test_mask_crops_publish_the_same_messages_as_frame_masks(segmenter: Segmenter) -> None:
    """Serving's crops path and the frame-size path: the same RLE strings, byte for byte.

    The trained demo model on synthetic scenes (confident masks), and the
    random small model at score 0 (many boxes, some across the frame's edges).
    """
    from streamseg.publish.encode import detections_message
    from streamseg.synthetic.scene import SyntheticScene
    from streamseg.types import Frame, FrameResult, MaskCrops

    scene = SyntheticScene(seed=1001, height=240, width=320, num_objects=6)
    frames = tuple(
        Frame("cam", i, f.time, 0.0, f.image) for i, f in enumerate(scene.frame(k) for k in (0, 9))
    )
    demo = Segmenter(arch="maskrcnn_small", weights=str(DEMO))
    cases = [(demo, FrameBatch(frames)), (segmenter, scene_batch([(120, 200), (90, 160)]))]
    for seg, batch in cases:
        published = 0
        frame_path = seg.segment(batch)
        seg.mask_crops = True
        try:
            crop_path = seg.segment(batch)
        finally:
            seg.mask_crops = False
        for frame, old, new in zip(batch.frames, frame_path, crop_path, strict=True):
            assert isinstance(old.masks, torch.Tensor) and isinstance(new.masks, MaskCrops)
            assert torch.equal(new.frame_masks(), old.masks)
            messages = [
                detections_message(
                    FrameResult(frame.without_image(), inst),
                    arch="maskrcnn_small",
                    class_names=seg.class_names,
                    published_time=1.0,
                )
                for inst in (old, new)
            ]
            assert messages[0] == messages[1]
            published += sum(int(m.any()) for m in old.masks)
        assert published >= 4  # non-empty masks compared
