"""The Segmenter on the tiny Mask2Former: pipeline.yaml to Instances, weight files, hot swap."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from streamseg.config import load_pipeline
from streamseg.hosting.segmenter import build_segmenter
from streamseg.models.checkpoint import CheckpointError
from streamseg.segment import Segmenter
from streamseg.synthetic.scene import SYNTHETIC_CLASS_NAMES as NAMES
from streamseg.types import FrameBatch, Instances
from tests.segment.backend_cases import assert_close_results, write_checkpoint
from tests.segment.conftest import TINY_M2F, scene_batch


@pytest.fixture(scope="module")
def segmenter() -> Segmenter:
    torch.manual_seed(0)
    return Segmenter(**TINY_M2F)


@pytest.fixture(scope="module")
def hub_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Random weights as transformers writes them (``save_pretrained``: hub key names)."""
    from transformers.models.mask2former.modeling_mask2former import (
        Mask2FormerForUniversalSegmentation,
    )

    from streamseg.models.mask2former.config import hf_config

    torch.manual_seed(5)
    hf = Mask2FormerForUniversalSegmentation(hf_config("tiny", num_classes=len(NAMES) - 1))
    folder = tmp_path_factory.mktemp("hub") / "mask2former-tiny"
    hf.save_pretrained(folder)
    return folder


def _assert_well_formed(results: list[Instances], sizes: list[tuple[int, int]]) -> None:
    assert [r.image_size for r in results] == sizes
    for r, (h, w) in zip(results, sizes, strict=True):
        assert 0 < len(r) <= TINY_M2F["detections_per_image"]
        assert r.masks is not None and r.masks.dtype == torch.bool
        assert tuple(r.masks.shape) == (len(r), h, w)
        assert r.boxes.dtype == torch.float32 and r.labels.dtype == torch.int64
        assert bool((r.boxes[:, 0::2] >= 0).all() and (r.boxes[:, 0::2] <= w).all())
        assert bool((r.boxes[:, 1::2] >= 0).all() and (r.boxes[:, 1::2] <= h).all())
        assert bool((r.labels >= 1).all() and (r.labels < len(NAMES)).all())
        assert torch.equal(r.scores, r.scores.sort(descending=True).values)


def test_pipeline_yaml_to_instances(tmp_path: Path) -> None:
    """The runtime's path: pipeline.yaml (classes counted with the background) -> Segmenter."""
    path = tmp_path / "pipeline.yaml"
    path.write_text(
        "cameras:\n  - id: a\n    url: synthetic://?seed=1\n"
        "model:\n  arch: mask2former_tiny\n  num_classes: 5\n"
        f"  class_names: {list(NAMES)}\n"
        "  min_size: 96\n  max_size: 160\n  score_threshold: 0.0\n  detections_per_image: 10\n"
    )
    segmenter = build_segmenter(load_pipeline(path, environ={}).model)
    assert segmenter.class_names == NAMES
    assert segmenter.model.num_classes == 4  # type: ignore[union-attr]
    sizes = [(96, 160), (120, 90), (96, 160)]
    _assert_well_formed(segmenter.segment(scene_batch(sizes)), sizes)


def test_a_batch_equals_its_frames_one_by_one(segmenter: Segmenter) -> None:
    # Frames of one size: the batch adds no spatial padding. (Frames of other
    # sizes would: Mask2Former's GroupNorm and attention see the padded area,
    # so its outputs move slightly with it; docs/mask2former.md.)
    batch = scene_batch([(96, 160), (96, 160), (96, 160)])
    together = segmenter.segment(batch)
    alone = [segmenter.segment(FrameBatch((f,)))[0] for f in batch.frames]
    assert_close_results(together, alone)


def test_bf16_autocast_gives_float32_results(segmenter: Segmenter) -> None:
    seg = Segmenter(precision="bf16", **TINY_M2F)
    results = seg.segment(scene_batch([(96, 160)]))
    assert results[0].boxes.dtype == torch.float32 and results[0].scores.dtype == torch.float32
    assert results[0].masks is not None and results[0].masks.shape[1:] == (96, 160)


def test_hub_folder_file_and_trainer_checkpoint_give_the_same_model(
    hub_folder: Path, tmp_path: Path
) -> None:
    batch = scene_batch([(96, 160)] * 2)
    from_folder = Segmenter(weights=str(hub_folder), **TINY_M2F)
    from_file = Segmenter(weights=str(hub_folder / "model.safetensors"), **TINY_M2F)
    expected = from_folder.segment(batch)
    assert_close_results(expected, from_file.segment(batch))
    # Folder weights pass the config's existence check and reach the Segmenter.
    path = tmp_path / "pipeline.yaml"
    path.write_text(
        "cameras:\n  - id: a\n    url: synthetic://?seed=1\n"
        f"model:\n  arch: mask2former_tiny\n  weights: {hub_folder}\n"
        f"  class_names: {list(NAMES)}\n"
        "  min_size: 96\n  max_size: 160\n  score_threshold: 0.0\n  detections_per_image: 10\n"
    )
    served = build_segmenter(load_pipeline(path, environ={}).model)
    assert_close_results(expected, served.segment(batch))


def test_hot_swap_between_file_kinds(hub_folder: Path, tmp_path: Path) -> None:
    batch = scene_batch([(96, 160)] * 2)
    seg = Segmenter(**TINY_M2F)
    ckpt = write_checkpoint(tmp_path / "best.pth", seed=7, config=TINY_M2F)
    seg.load_weights(ckpt)
    assert_close_results(Segmenter(weights=ckpt, **TINY_M2F).segment(batch), seg.segment(batch))
    seg.load_weights(str(hub_folder))
    want = Segmenter(weights=str(hub_folder), **TINY_M2F).segment(batch)
    assert_close_results(want, seg.segment(batch))
    assert seg.weights == str(hub_folder)


def test_failed_hot_swap_keeps_the_old_weights(tmp_path: Path) -> None:
    batch = scene_batch([(96, 160)] * 2)
    seg = Segmenter(**TINY_M2F)
    before = seg.segment(batch)
    other = {**TINY_M2F, "class_names": NAMES[:3]}  # two object classes instead of four
    with pytest.raises(CheckpointError, match="class_predictor"):
        seg.load_weights(write_checkpoint(tmp_path / "classes.pth", seed=3, config=other))
    rcnn = write_checkpoint(tmp_path / "rcnn.pth", seed=3)
    with pytest.raises(CheckpointError, match="holds a 'maskrcnn_small' model"):
        seg.load_weights(rcnn)
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match=r"folder without model\.safetensors"):
        seg.load_weights(str(tmp_path / "empty"))
    assert_close_results(before, seg.segment(batch))
    assert seg.weights is None
