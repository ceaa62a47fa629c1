"""Detectron2 ``.pkl`` checkpoints of R50-FPN Mask R-CNN.

The files are written here the way detectron2's model zoo writes them: a
model of ours (detectron2 style, random weights) is mapped back to
detectron2's names and class layout by hand (not with the loader's own
table), its tensors become numpy arrays, and ``pickle`` writes
``{"model": arrays, "__author__": ...}``. Loading such a file must give a
model that computes exactly what the source model computes.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

from streamseg.bench.parity import parity_weights
from streamseg.models import build_model
from streamseg.models.checkpoint import CheckpointError
from streamseg.models.maskrcnn.classes import COCO_CONTIGUOUS_CLASS_NAMES
from streamseg.segment.preprocess import preprocess
from streamseg.synthetic.scene import SyntheticScene
from streamseg.types import Instances
from tests.support.checkpoints import SMALL_INPUT

NORM = ("weight", "bias", "running_mean", "running_var")
WB = ("weight", "bias")
DEPTHS = (3, 4, 6, 3)  # blocks of res2..res5
SMALL = {**SMALL_INPUT, "rpn_post_nms_top_n": 50, "score_threshold": 0.0}

Arrays = dict[str, np.ndarray]


def detectron2_arrays(state: dict[str, torch.Tensor]) -> Arrays:
    """Our R50-FPN state dict in detectron2's names and class layout (written out by hand)."""
    out: Arrays = {}

    def put(theirs: str, ours: str, rows: list[int] | None = None) -> None:
        t = state[ours]
        out[theirs] = (t if rows is None else t[rows]).numpy().copy()

    put("backbone.bottom_up.stem.conv1.weight", "backbone.body.conv1.weight")
    for p in NORM:
        put(f"backbone.bottom_up.stem.conv1.norm.{p}", f"backbone.body.bn1.{p}")
    for stage, depth in zip(range(2, 6), DEPTHS, strict=True):
        for i in range(depth):
            theirs, ours = (
                f"backbone.bottom_up.res{stage}.{i}",
                f"backbone.body.layer{stage - 1}.{i}",
            )
            for k in (1, 2, 3):
                put(f"{theirs}.conv{k}.weight", f"{ours}.conv{k}.weight")
                for p in NORM:
                    put(f"{theirs}.conv{k}.norm.{p}", f"{ours}.bn{k}.{p}")
            if i == 0:
                put(f"{theirs}.shortcut.weight", f"{ours}.downsample.0.weight")
                for p in NORM:
                    put(f"{theirs}.shortcut.norm.{p}", f"{ours}.downsample.1.{p}")
    for level in range(2, 6):
        for p in WB:
            put(f"backbone.fpn_lateral{level}.{p}", f"backbone.fpn.inner_blocks.{level - 2}.0.{p}")
            put(f"backbone.fpn_output{level}.{p}", f"backbone.fpn.layer_blocks.{level - 2}.0.{p}")
    num = state["roi_heads.box_predictor.cls_score.bias"].shape[0]  # with background
    background_last = [*range(1, num), 0]
    without_background = list(range(1, num))
    box_rows = list(range(4, 4 * num))
    for p in WB:
        put(f"proposal_generator.rpn_head.conv.{p}", f"rpn.head.conv.0.0.{p}")
        put(f"proposal_generator.rpn_head.objectness_logits.{p}", f"rpn.head.cls_logits.{p}")
        put(f"proposal_generator.rpn_head.anchor_deltas.{p}", f"rpn.head.bbox_pred.{p}")
        put(f"roi_heads.box_head.fc1.{p}", f"roi_heads.box_head.fc6.{p}")
        put(f"roi_heads.box_head.fc2.{p}", f"roi_heads.box_head.fc7.{p}")
        predictor = "roi_heads.box_predictor"
        put(f"{predictor}.cls_score.{p}", f"{predictor}.cls_score.{p}", background_last)
        put(f"{predictor}.bbox_pred.{p}", f"{predictor}.bbox_pred.{p}", box_rows)
        for k in range(1, 5):
            put(f"roi_heads.mask_head.mask_fcn{k}.{p}", f"roi_heads.mask_head.{k - 1}.0.{p}")
        put(f"roi_heads.mask_head.deconv.{p}", f"roi_heads.mask_predictor.conv5_mask.{p}")
        put(
            f"roi_heads.mask_head.predictor.{p}",
            f"roi_heads.mask_predictor.mask_fcn_logits.{p}",
            without_background,
        )
    return out


def write_pkl(path: Path, arrays: Arrays, *, wrapped: bool = True, protocol: int = 2) -> Path:
    obj = {"model": arrays, "__author__": "Detectron2 Model Zoo"} if wrapped else arrays
    path.write_bytes(pickle.dumps(obj, protocol=protocol))
    return path


@pytest.fixture(scope="module")
def source() -> torch.nn.Module:
    """A detectron2-style model of ours with the 81 COCO classes and random weights."""
    torch.manual_seed(0)
    model = build_model("maskrcnn_r50_fpn", style="detectron2", num_classes=81, **SMALL)
    model.load_state_dict(parity_weights(model.state_dict(), sharpen=False))
    return model


@pytest.fixture(scope="module")
def arrays(source: torch.nn.Module) -> Arrays:
    return detectron2_arrays(source.state_dict())


@pytest.fixture(scope="module")
def pkl(tmp_path_factory: pytest.TempPathFactory, arrays: Arrays) -> Path:
    return write_pkl(tmp_path_factory.mktemp("d2") / "model_final.pkl", arrays)


@pytest.fixture(scope="module")
def loaded(pkl: Path) -> torch.nn.Module:
    return build_model("maskrcnn_r50_fpn", weights=str(pkl), **SMALL)


@pytest.fixture
def make_pkl(tmp_path: Path, arrays: Arrays) -> Iterator[Callable[..., Path]]:
    """Writes a variant of the test file: ``edit(arrays_copy)`` changes it first."""

    def make(edit: Callable[[Arrays], object] | None = None, **kwargs: object) -> Path:
        changed = dict(arrays)
        if edit is not None:
            edit(changed)
        return write_pkl(tmp_path / "variant.pkl", changed, **kwargs)  # type: ignore[arg-type]

    yield make


def frame() -> torch.Tensor:
    return SyntheticScene(seed=4, height=48, width=80, num_objects=3).frame(0).image


def run(model: torch.nn.Module, image: torch.Tensor) -> Instances:
    batch = preprocess([image], model.input_spec)
    with torch.inference_mode():
        out = model(batch.images, batch.image_sizes)
        return model.postprocess(out, batch.image_sizes, batch.frame_sizes)[0]  # type: ignore[no-any-return]


# ---------------------------------------------------------------- loading


def test_loaded_model_computes_what_the_source_computes(
    source: torch.nn.Module, loaded: torch.nn.Module
) -> None:
    image = frame()
    want, got = run(source, image), run(loaded, image)
    assert len(want) > 10  # score_threshold 0: random weights still give detections
    assert torch.equal(got.labels, want.labels)
    torch.testing.assert_close(got.boxes, want.boxes, rtol=0, atol=0)
    torch.testing.assert_close(got.scores, want.scores, rtol=0, atol=0)
    assert got.masks is not None and want.masks is not None
    assert torch.equal(got.masks, want.masks)


def test_file_sets_style_input_and_coco_names(loaded: torch.nn.Module) -> None:
    assert loaded.style == "detectron2"
    spec = loaded.input_spec
    assert (spec.channel_order, spec.scale) == ("BGR", 1.0)
    assert spec.mean == (103.530, 116.280, 123.675) and spec.std == (1.0, 1.0, 1.0)
    assert (spec.min_size, spec.max_size) == (64, 96)  # options still apply
    names = loaded.class_names
    assert names == COCO_CONTIGUOUS_CLASS_NAMES and len(names) == 81
    assert (names[0], names[1], names[12], names[80]) == (
        "__background__",
        "person",
        "stop sign",
        "toothbrush",
    )
    # The structural parts of the style, as built from the file.
    assert loaded.backbone.body.layer2[0].conv1.stride == (2, 2)
    assert loaded.backbone.body.layer2[0].conv2.stride == (1, 1)
    assert loaded.roi_heads.settings.aligned and loaded.roi_heads.settings.sampling_ratio == 0
    assert not loaded.rpn.anchor_generator.rounded


def test_bgr_input_reaches_the_model_as_bgr(loaded: torch.nn.Module) -> None:
    blue = torch.zeros((64, 64, 3), dtype=torch.uint8)
    blue[..., 2] = 200  # RGB frame: pure blue
    x = preprocess([blue], loaded.input_spec).images[0]
    # BGR order, [0, 255] minus the means: channel 0 is blue.
    assert float(x[0, 0, 0]) == pytest.approx(200 - 103.530)
    assert float(x[2, 0, 0]) == pytest.approx(0 - 123.675)


def test_background_moves_first_and_gets_zero_box_and_mask_rows(
    arrays: Arrays, loaded: torch.nn.Module
) -> None:
    heads = loaded.roi_heads
    cls_w = heads.box_predictor.cls_score.weight
    theirs = torch.from_numpy(arrays["roi_heads.box_predictor.cls_score.weight"])
    assert torch.equal(cls_w[0], theirs[80])  # detectron2's last row is the background
    assert torch.equal(cls_w[12], theirs[11])  # contiguous id 11, "stop sign", is our label 12
    box = heads.box_predictor.bbox_pred.weight
    assert box.shape[0] == 81 * 4 and not box[:4].any()
    theirs_box = torch.from_numpy(arrays["roi_heads.box_predictor.bbox_pred.weight"])
    assert torch.equal(box[4 * 12 : 4 * 13], theirs_box[4 * 11 : 4 * 12])
    mask = heads.mask_predictor.mask_fcn_logits.weight
    assert mask.shape[0] == 81 and not mask[0].any()


def test_a_class_favoured_in_the_file_is_detected_under_its_label(
    make_pkl: Callable[..., Path],
) -> None:
    def favour_stop_signs(a: Arrays) -> None:
        bias = a["roi_heads.box_predictor.cls_score.bias"].copy()
        bias[11] = 50.0  # detectron2's contiguous id 11
        a["roi_heads.box_predictor.cls_score.bias"] = bias

    path = make_pkl(favour_stop_signs)
    model = build_model("maskrcnn_r50_fpn", weights=str(path), **{**SMALL, "score_threshold": 0.5})
    inst = run(model, frame())
    assert len(inst) > 0 and set(inst.labels.tolist()) == {12}
    assert model.class_names[12] == "stop sign"


def test_other_class_count_top_level_arrays_and_pixel_mean(make_pkl: Callable[..., Path]) -> None:
    # A 3-class model with the arrays at the top level and its input mean recorded.
    def three_classes(a: Arrays) -> None:
        p = "roi_heads.box_predictor"
        a[f"{p}.cls_score.weight"] = a[f"{p}.cls_score.weight"][[0, 1, 2, 80]]
        a[f"{p}.cls_score.bias"] = a[f"{p}.cls_score.bias"][[0, 1, 2, 80]]
        a[f"{p}.bbox_pred.weight"] = a[f"{p}.bbox_pred.weight"][:12]
        a[f"{p}.bbox_pred.bias"] = a[f"{p}.bbox_pred.bias"][:12]
        m = "roi_heads.mask_head.predictor"
        a[f"{m}.weight"] = a[f"{m}.weight"][:3]
        a[f"{m}.bias"] = a[f"{m}.bias"][:3]
        a["pixel_mean"] = np.array([100.0, 110.0, 120.0], np.float32).reshape(3, 1, 1)
        a["pixel_std"] = np.ones((3, 1, 1), np.float32)
        a["proposal_generator.anchor_generator.cell_anchors.0"] = np.zeros((3, 4), np.float32)

    path = make_pkl(three_classes, wrapped=False, protocol=pickle.HIGHEST_PROTOCOL)
    model = build_model("maskrcnn_r50_fpn", weights=str(path), **SMALL)
    assert model.class_names == ("__background__", "class_1", "class_2", "class_3")
    assert model.input_spec.mean == (100.0, 110.0, 120.0)
    custom = build_model(
        "maskrcnn_r50_fpn",
        weights=str(path),
        class_names=["__background__", "cat", "dog", "owl"],
        **SMALL,
    )
    assert custom.class_names[3] == "owl"


def test_numpy_1_pickles_load(arrays: Arrays, tmp_path: Path) -> None:
    # Zoo files were written by numpy 1.x, whose arrays name numpy.core.multiarray.
    small = {k: v for k, v in arrays.items() if k.startswith("backbone.bottom_up.stem")}
    data = pickle.dumps({"model": small, "__author__": "x"}, protocol=2)
    data = data.replace(b"numpy._core.multiarray", b"numpy.core.multiarray")
    assert b"cnumpy.core.multiarray\n_reconstruct" in data
    path = tmp_path / "old.pkl"
    path.write_bytes(data)
    from streamseg.models.maskrcnn.detectron2 import read_detectron2

    got = read_detectron2(path).state_dict
    assert torch.equal(
        got["backbone.body.bn1.running_var"],
        torch.from_numpy(small["backbone.bottom_up.stem.conv1.norm.running_var"]),
    )


# ---------------------------------------------------------------- refused files


def test_a_pickle_that_would_run_code_is_refused(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"

    class Payload:
        def __reduce__(self):  # type: ignore[no-untyped-def]
            import os

            return (os.system, (f"touch {marker}",))

    path = tmp_path / "evil.pkl"
    path.write_bytes(pickle.dumps({"model": {"w": Payload()}, "__author__": "x"}))
    with pytest.raises(CheckpointError, match=r"refusing to unpickle (posix|os)\.system"):
        build_model("maskrcnn_r50_fpn", weights=str(path))
    assert not marker.exists()


def test_a_truncated_file_is_a_clear_error(pkl: Path, tmp_path: Path) -> None:
    data = pkl.read_bytes()
    for cut in (0, 7, len(data) // 2, len(data) - 1):
        path = tmp_path / "cut.pkl"
        path.write_bytes(data[:cut])
        with pytest.raises(CheckpointError, match="truncated"):
            build_model("maskrcnn_r50_fpn", weights=str(path))


def _drop_mask_head(a: Arrays) -> None:
    for key in [k for k in a if k.startswith("roi_heads.mask_head.")]:
        del a[key]


def _as_r101(a: Arrays) -> None:
    for i in range(6, 23):  # res4 of ResNet-101 has 23 blocks
        for key in [k for k in a if k.startswith("backbone.bottom_up.res4.5.")]:
            a[key.replace("res4.5.", f"res4.{i}.")] = a[key]


def _narrow_lateral(a: Arrays) -> None:
    a["backbone.fpn_lateral2.weight"] = a["backbone.fpn_lateral2.weight"][:128]


@pytest.mark.parametrize(
    ("edit", "wanted"),
    [
        (
            _drop_mask_head,
            [
                "missing keys: roi_heads.mask_head.mask_fcn1.weight",
                "roi_heads.mask_head.deconv.weight",
            ],
        ),
        (_as_r101, ["unexpected keys: backbone.bottom_up.res4.6.conv1.weight"]),
        (
            _narrow_lateral,
            ["mis-shaped keys: backbone.fpn_lateral2.weight: checkpoint (128, 256, 1, 1)"],
        ),
    ],
)
def test_another_architecture_lists_keys_under_detectron2_names(
    make_pkl: Callable[..., Path], edit: Callable[[Arrays], None], wanted: list[str]
) -> None:
    with pytest.raises(CheckpointError) as info:
        build_model("maskrcnn_r50_fpn", weights=str(make_pkl(edit)))
    msg = str(info.value)
    assert "(detectron2 format; keys under detectron2's names) does not match the model" in msg
    for text in wanted:
        assert text in msg
    assert "backbone.body" not in msg and "mask_fcn_logits" not in msg


PREDICTOR = "roi_heads.box_predictor"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            {f"{PREDICTOR}.bbox_pred.weight": np.zeros((4, 1024), np.float32)},
            r"bbox_pred.weight has 4 rows, but cls_score's 81 rows mean 80 classes",
        ),
        (
            {"roi_heads.mask_head.predictor.bias": np.zeros(1, np.float32)},
            r"predictor.bias has 1 rows, but cls_score's 81 rows mean 80 classes with one mask",
        ),
        (
            {"pixel_std": np.array([57.4, 57.1, 58.4], np.float32)},
            r"pixel_std \[57.4, 57.1, 58.4\]: its backbone is not detectron2's MSRA ResNet",
        ),
    ],
)
def test_unsupported_detectron2_files_say_why(
    tmp_path: Path, arrays: Arrays, extra: Arrays, message: str
) -> None:
    # These are found while reading, before the model is built: a few arrays suffice.
    small = {k: v for k, v in arrays.items() if k.startswith(f"{PREDICTOR}.cls_score")}
    path = write_pkl(tmp_path / "odd.pkl", {**small, **extra})
    with pytest.raises(CheckpointError, match=message):
        build_model("maskrcnn_r50_fpn", weights=str(path))


def test_a_caffe2_detectron_file_is_named_as_such(tmp_path: Path) -> None:
    path = tmp_path / "c2.pkl"
    path.write_bytes(pickle.dumps({"blobs": {"conv1_w": np.zeros((64, 3, 7, 7), np.float32)}}))
    with pytest.raises(CheckpointError, match=r"Caffe2 Detectron \(v1\) file"):
        build_model("maskrcnn_r50_fpn", weights=str(path))


def test_pkl_loads_only_into_r50_fpn_and_its_style(pkl: Path) -> None:
    with pytest.raises(CheckpointError, match="loads into maskrcnn_r50_fpn only"):
        build_model("maskrcnn_small", weights=str(pkl))
    with pytest.raises(CheckpointError, match="holds a detectron2-style model but style="):
        build_model("maskrcnn_r50_fpn", weights=str(pkl), style="torchvision")


# ---------------------------------------------------------------- serving and fine-tuning


def test_segmenter_serves_a_pkl_and_a_swap_keeps_the_style(
    pkl: Path, source: torch.nn.Module
) -> None:
    from streamseg.segment import Segmenter
    from streamseg.types import Frame, FrameBatch

    image = frame()
    seg = Segmenter(arch="maskrcnn_r50_fpn", weights=str(pkl), **SMALL)
    assert seg.input_spec.channel_order == "BGR" and seg.class_names == COCO_CONTIGUOUS_CLASS_NAMES
    got = seg.segment(FrameBatch((Frame("cam", 0, None, 0.0, image),)))[0]
    want = run(source, image)
    assert torch.equal(got.labels, want.labels) and torch.equal(got.boxes, want.boxes)
    seg.close()
    # Same tensors, other structure: a torchvision-style model must not take them.
    running = Segmenter(arch="maskrcnn_r50_fpn", num_classes=81, **SMALL)
    with pytest.raises(CheckpointError, match="style 'detectron2' vs running 'torchvision'"):
        running.load_weights(str(pkl))
    assert running.model.style == "torchvision"
    running.close()


def test_a_fine_tune_from_a_pkl_stays_detectron2_style(pkl: Path, tmp_path: Path) -> None:
    from streamseg.models.checkpoint import save_checkpoint
    from streamseg.models.trained import load_trained_model
    from streamseg.train.checkpointing import check_style
    from streamseg.train.modeling import build_train_model, model_meta
    from tests.support.training import tiny_config

    cfg = tiny_config(
        tmp_path, model__arch="maskrcnn_r50_fpn", model__weights=str(pkl), model__options=SMALL
    )
    names = ("__background__", "cat", "dog")
    model, options = build_train_model(cfg.model, names)
    assert model.style == "detectron2" and options["style"] == "detectron2"
    assert model.input_spec.channel_order == "BGR"
    path = tmp_path / "model_final.pth"
    meta = model_meta(cfg, names, options, iteration=1, metrics={})
    save_checkpoint(path, model.state_dict(), **meta)

    reloaded, got_names = load_trained_model(str(path))
    assert got_names == names and reloaded.style == "detectron2"
    assert reloaded.input_spec == model.input_spec
    model.eval()
    image = frame()
    want, got = run(model, image), run(reloaded, image)
    assert torch.equal(got.labels, want.labels) and torch.equal(got.boxes, want.boxes)
    # A fine-tune of the fine-tune is detectron2-style too, without saying so.
    again = tiny_config(tmp_path, "again", model__arch="maskrcnn_r50_fpn", model__weights=str(path))
    assert build_train_model(again.model, names)[0].style == "detectron2"
    # Resuming or starting from it with the other style is refused, not silently copied.
    other = build_model("maskrcnn_r50_fpn", num_classes=3)
    with pytest.raises(CheckpointError, match="holds a detectron2-style model"):
        check_style(other, meta, str(path))
    with pytest.raises(CheckpointError, match="holds a detectron2-style model"):
        load_trained_model(str(path), style="torchvision")
