"""Fine-tuning from a checkpoint with other classes: the classes it keeps keep their
rows in every class-dependent layer (matched by name, in any order), new classes
start from their initialisation, dropped classes' rows go, and the log says which."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch

from streamseg.models import build_model, class_options
from streamseg.models.checkpoint import save_checkpoint
from streamseg.models.trained import load_trained_model
from streamseg.train.config import TrainModelConfig
from streamseg.train.engine import run_training, seed_everything
from streamseg.train.modeling import build_train_model
from tests.support.checkpoints import SMALL_INPUT
from tests.support.training import tiny_config

SOURCE_NAMES = ("__background__", "disc", "square", "triangle", "star")
# Reordered, triangle dropped, hexagon added (in the middle).
TARGET = ("star", "hexagon", "disc", "square")
OPTIONS = dict(SMALL_INPUT)
# arch -> (its class-dependent layers, the slot of each class in them)
LAYERS = {
    "maskrcnn_small": {
        "roi_heads.box_predictor.cls_score",
        "roi_heads.box_predictor.bbox_pred",
        "roi_heads.mask_predictor.mask_fcn_logits",
    },
    "mask2former_tiny": {"class_predictor", "criterion.empty_weight"},
}


def _slots(arch: str, names: tuple[str, ...]) -> list[str]:
    """Row groups of the class layers: Mask R-CNN background first; Mask2Former
    "no object" last (written out here, not taken from the code under test)."""
    return list(names) if arch.startswith("maskrcnn") else [*names[1:], "<no object>"]


def _source(tmp_path: Path, arch: str) -> tuple[Path, dict[str, torch.Tensor]]:
    """A 4-class checkpoint whose every float differs from any init (+0.01, and
    each class row by its index), so copied and initialised rows are told apart."""
    torch.manual_seed(1)
    model = build_model(arch, **class_options(arch, SOURCE_NAMES), **OPTIONS)
    state = {k: v + 0.01 if v.is_floating_point() else v for k, v in model.state_dict().items()}
    path = tmp_path / f"{arch}.pth"
    meta = {"arch": arch, "class_names": list(SOURCE_NAMES), "model_options": OPTIONS}
    save_checkpoint(path, state, **meta)
    return path, state


def _class_dependent(arch: str) -> set[str]:
    """Keys whose shape follows the class count (found by building two sizes)."""
    a = build_model(arch, **class_options(arch, SOURCE_NAMES), **OPTIONS).state_dict()
    b = build_model(arch, **class_options(arch, SOURCE_NAMES[:3]), **OPTIONS).state_dict()
    return {k for k in a if a[k].shape != b[k].shape}


@pytest.mark.parametrize("arch", ["maskrcnn_small", "mask2former_tiny"])
def test_extending_the_classes_keeps_the_known_rows(
    tmp_path: Path, arch: str, caplog: pytest.LogCaptureFixture
) -> None:
    path, old = _source(tmp_path, arch)
    names = ("__background__", *TARGET)
    heads = _class_dependent(arch)
    assert {k.removesuffix(".weight").removesuffix(".bias") for k in heads} == LAYERS[arch]
    cfg = TrainModelConfig(arch=arch, weights=str(path), class_names=TARGET, options=OPTIONS)

    # What the run starts from, and the same model built without weights
    # (same seed: the initialisation the new rows must keep).
    seed_everything(0)
    with caplog.at_level(logging.INFO, logger="streamseg.train"):
        model, _ = build_train_model(cfg, names)
    seed_everything(0)
    fresh, _ = build_train_model(cfg.model_copy(update={"weights": None}), names)
    start, init = model.state_dict(), fresh.state_dict()
    old_slots, new_slots = _slots(arch, SOURCE_NAMES), _slots(arch, names)
    for key, value in start.items():
        if key not in heads:
            assert torch.equal(value, old[key]), key
            continue
        per = value.shape[0] // len(new_slots)
        assert old[key].shape[0] // len(old_slots) == per  # 4 rows per class in bbox_pred
        for j, name in enumerate(new_slots):
            rows = value[j * per : (j + 1) * per]
            if name in old_slots:
                i = old_slots.index(name)
                assert torch.equal(rows, old[key][i * per : (i + 1) * per]), (key, name)
            else:  # hexagon: the new layer's own initialisation, nothing of the old values
                assert torch.equal(rows, init[key][j * per : (j + 1) * per]), (key, name)
                if key != "criterion.empty_weight":  # a constant 1.0 per class
                    assert not any(
                        torch.equal(rows, old[key][i * per : (i + 1) * per])
                        for i in range(len(old_slots))
                    ), key
    report = "\n".join(r.getMessage() for r in caplog.records)
    assert f"loaded {len(start)}/{len(start)} tensors from {path}" in report
    assert "re-initialised" not in report
    assert (
        "classes kept (3): star, disc, square; added (1): hexagon; dropped (1): triangle" in report
    )
    assert f"class rows remapped by name in {len(heads)} tensors" in report


def test_same_classes_in_another_order_only_move_rows(tmp_path: Path) -> None:
    arch = "maskrcnn_small"
    path, old = _source(tmp_path, arch)
    names = ("__background__", "star", "triangle", "square", "disc")
    cfg = TrainModelConfig(arch=arch, weights=str(path), class_names=names[1:], options=OPTIONS)
    model, _ = build_train_model(cfg, names)
    key = "roi_heads.box_predictor.cls_score.weight"
    order = [SOURCE_NAMES.index(n) for n in names]
    assert torch.equal(model.state_dict()[key], old[key][order])
    key = "roi_heads.box_predictor.bbox_pred.bias"
    expected = old[key].reshape(5, 4)[order].reshape(-1)
    assert torch.equal(model.state_dict()[key], expected)


def test_fine_tune_with_fewer_classes_trains_and_exports(tmp_path: Path) -> None:
    path, _ = _source(tmp_path, "maskrcnn_small")
    names = ("__background__", "disc", "square")
    cfg = tiny_config(tmp_path, model__weights=str(path), model__class_names="[disc, square]")
    # And the fine-tune itself: it trains and exports a 2-class model.
    result = run_training(cfg, install_signals=False)
    assert result.iteration == cfg.solver.iterations
    trained, trained_names = load_trained_model(str(Path(cfg.output.dir) / "model_final.pth"))
    assert trained_names == names
    assert trained.state_dict()["roi_heads.box_predictor.cls_score.weight"].shape[0] == 3
