"""Mask R-CNN: building, inference on synthetic frames, options, checkpoints."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from streamseg.models import build_model
from streamseg.models.checkpoint import CheckpointError, save_checkpoint
from streamseg.segment.preprocess import preprocess
from streamseg.synthetic.scene import SYNTHETIC_CLASS_NAMES, SyntheticScene
from streamseg.types import Instances


def _inputs(model: torch.nn.Module, images: list[torch.Tensor]):  # type: ignore[no-untyped-def]
    own = [(int(im.shape[0]), int(im.shape[1])) for im in images]  # no resize
    inputs = preprocess(images, model.input_spec, sizes=own)
    return inputs.images, inputs.image_sizes


def _run(model: torch.nn.Module, images: list[torch.Tensor]) -> list[Instances]:
    x, sizes = _inputs(model, images)
    with torch.inference_mode():
        out = model(x, sizes)
        return model.postprocess(out, sizes, sizes)  # type: ignore[operator,no-any-return]


@pytest.fixture(scope="module")
def small() -> torch.nn.Module:
    torch.manual_seed(0)
    return build_model("maskrcnn_small", score_threshold=0.0, detections_per_image=20)


def test_small_model_contract(small: torch.nn.Module) -> None:
    assert small.class_names == SYNTHETIC_CLASS_NAMES
    spec = small.input_spec
    assert (spec.channel_order, spec.min_size, spec.size_divisibility) == ("RGB", 360, 32)
    assert not small.training


def test_inference_on_synthetic_frames_gives_wellformed_instances(small: torch.nn.Module) -> None:
    frames = [
        SyntheticScene(seed=3, height=120, width=160).frame(0).image,
        SyntheticScene(seed=4, height=96, width=128).frame(2).image,
    ]
    results = _run(small, frames)
    assert len(results) == 2
    for inst, frame in zip(results, frames, strict=True):
        h, w = frame.shape[:2]
        assert inst.image_size == (h, w)
        n = len(inst)
        assert 0 < n <= 20  # score_threshold 0: random weights still give detections
        assert inst.boxes.dtype == torch.float32 and inst.labels.dtype == torch.int64
        assert inst.masks is not None and inst.masks.dtype == torch.bool
        assert inst.masks.shape == (n, h, w)
        assert bool((inst.labels >= 1).all()) and bool((inst.labels <= 4).all())
        assert bool((inst.scores >= 0).all()) and bool((inst.scores <= 1).all())
        assert bool((inst.scores[:-1] >= inst.scores[1:]).all())
        b = inst.boxes
        assert bool((b[:, 0] >= 0).all() and (b[:, 2] <= w).all() and (b[:, 3] <= h).all())
        assert bool((b[:, 2] >= b[:, 0]).all() and (b[:, 3] >= b[:, 1]).all())
        # A mask never reaches outside its (slightly expanded) box.
        for box, mask in zip(b, inst.masks, strict=True):
            ys, xs = torch.where(mask)
            if len(xs):
                assert xs.min() >= box[0] - 2 and xs.max() <= box[2] + 2
                assert ys.min() >= box[1] - 2 and ys.max() <= box[3] + 2


def test_postprocess_scales_to_frame_size(small: torch.nn.Module) -> None:
    frame = SyntheticScene(seed=5, height=240, width=320).frame(0).image
    small_frame = frame[::2, ::2].contiguous()  # the model sees a half-size image
    x, sizes = _inputs(small, [small_frame])
    with torch.inference_mode():
        out = small(x, sizes)
        full = small.postprocess(out, sizes, [(240, 320)])[0]
        half = small.postprocess(out, sizes, sizes)[0]
    assert full.image_size == (240, 320) and full.masks is not None
    torch.testing.assert_close(full.boxes, half.boxes * 2)
    assert full.masks.shape == (len(full), 240, 320)


def test_threshold_and_count_options() -> None:
    torch.manual_seed(0)
    model = build_model("maskrcnn_small", score_threshold=0.99, detections_per_image=3)
    inst = _run(model, [SyntheticScene(seed=1, height=96, width=128).frame(0).image])[0]
    assert len(inst) <= 3 and bool((inst.scores > 0.99).all())
    assert model.roi_heads.settings.detections_per_image == 3


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"bogus_option": 1}, "unknown maskrcnn_small option(s): bogus_option"),
        ({"num_classes": 3, "class_names": ["__background__", "a"]}, "num_classes=3"),
        ({"class_names": ["a", "b"]}, "class_names[0] must be '__background__'"),
        ({"min_size": 500, "max_size": 400}, "max_size (400) must be >= min_size (500)"),
    ],
)
def test_bad_options_are_named(options: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError) as info:
        build_model("maskrcnn_small", **options)
    assert message in str(info.value)


def test_num_classes_sets_heads_and_names() -> None:
    model = build_model("maskrcnn_small", num_classes=3)
    assert model.class_names == ("__background__", "class_1", "class_2")
    assert model.roi_heads.box_predictor.cls_score.out_features == 3
    assert model.roi_heads.mask_predictor.mask_fcn_logits.out_channels == 3
    named = build_model("maskrcnn_small", class_names=["__background__", "car"])
    assert named.class_names == ("__background__", "car")


# ---------------------------------------------------------------- checkpoints


def _same_weights(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    sb = b.state_dict()
    return all(torch.equal(v, sb[k]) for k, v in a.state_dict().items())


def test_streamseg_checkpoint_roundtrip(tmp_path: Path, small: torch.nn.Module) -> None:
    names = ["__background__", "cat", "dog"]
    torch.manual_seed(1)
    src = build_model("maskrcnn_small", class_names=names)
    path = tmp_path / "best.pth"
    save_checkpoint(path, src.state_dict(), arch="maskrcnn_small", class_names=names)
    # The class names come from the checkpoint's meta when not given.
    loaded = build_model("maskrcnn_small", weights=str(path))
    assert loaded.class_names == tuple(names)
    assert _same_weights(src, loaded)


def test_torchvision_style_state_dict_loads(tmp_path: Path) -> None:
    torch.manual_seed(2)
    src = build_model("maskrcnn_small")
    state = src.state_dict()
    # torchvision < 0.13 named the mask convs mask_fcn1..4; both layouts load.
    for i in range(4):
        for part in ("weight", "bias"):
            state[f"roi_heads.mask_head.mask_fcn{i + 1}.{part}"] = state.pop(
                f"roi_heads.mask_head.{i}.0.{part}"
            )
    path = tmp_path / "tv.pth"
    torch.save(state, path)
    assert _same_weights(src, build_model("maskrcnn_small", weights=str(path)))


def test_truncated_checkpoint_is_a_clear_error(tmp_path: Path, small: torch.nn.Module) -> None:
    path = tmp_path / "cut.pth"
    torch.save(small.state_dict(), path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError) as info:
        build_model("maskrcnn_small", weights=str(path))
    assert "cut.pth" in str(info.value) and "truncated" in str(info.value)


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="does not exist"):
        build_model("maskrcnn_small", weights=str(tmp_path / "nope.pth"))


def test_wrong_architecture_lists_keys(tmp_path: Path, small: torch.nn.Module) -> None:
    path = tmp_path / "small.pth"
    torch.save(small.state_dict(), path)  # no meta: a third-party file
    with pytest.raises(CheckpointError) as info:
        build_model("maskrcnn_r50_fpn", weights=str(path))
    msg = str(info.value)
    assert "small.pth (torchvision format) does not match the model" in msg
    assert "missing keys: backbone.body.layer1.0.conv3.weight" in msg
    shapes = "checkpoint (24, 3, 3, 3) vs model (64, 3, 7, 7)"
    assert f"mis-shaped keys: backbone.body.conv1.weight: {shapes}" in msg
    assert "hint: check that `arch`" in msg


def test_checkpoint_meta_of_another_arch_is_refused(tmp_path: Path, small: torch.nn.Module) -> None:
    path = tmp_path / "v2.pth"
    save_checkpoint(path, small.state_dict(), arch="maskrcnn_r50_fpn_v2")
    with pytest.raises(
        CheckpointError, match="holds a 'maskrcnn_r50_fpn_v2' model, not 'maskrcnn_small'"
    ):
        build_model("maskrcnn_small", weights=str(path))


def test_class_count_mismatch_names_the_predictor(tmp_path: Path, small: torch.nn.Module) -> None:
    path = tmp_path / "five.pth"
    torch.save(small.state_dict(), path)
    with pytest.raises(CheckpointError) as info:
        build_model("maskrcnn_small", num_classes=3, weights=str(path))
    assert "roi_heads.box_predictor.cls_score.weight: checkpoint (5, 256) vs model (3, 256)" in str(
        info.value
    )
