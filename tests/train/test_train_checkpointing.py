"""Fine-tuning from a checkpoint with another class count: class heads start afresh."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch

from streamseg.models import build_model
from streamseg.models.checkpoint import save_checkpoint
from streamseg.models.trained import load_trained_model
from streamseg.train.engine import run_training, seed_everything
from streamseg.train.modeling import build_train_model
from tests.support.training import tiny_config, weights

SOURCE_NAMES = ("__background__", "disc", "square", "triangle", "star")
OPTIONS = {"min_size": 64, "max_size": 96}


@pytest.fixture
def source(tmp_path: Path) -> Path:
    """A 4-class maskrcnn_small checkpoint whose every float differs from any init
    (+0.01), so copied and re-initialised tensors are told apart by value."""
    torch.manual_seed(1)
    model = build_model("maskrcnn_small", class_names=SOURCE_NAMES, **OPTIONS)
    state = {k: v + 0.01 if v.is_floating_point() else v for k, v in model.state_dict().items()}
    path = tmp_path / "source.pth"
    meta = {"arch": "maskrcnn_small", "class_names": list(SOURCE_NAMES), "model_options": OPTIONS}
    save_checkpoint(path, state, **meta)
    return path


def _class_dependent(names: tuple[str, ...]) -> set[str]:
    """Keys whose shape follows the class count (found by building two sizes)."""
    a = build_model("maskrcnn_small", class_names=SOURCE_NAMES, **OPTIONS).state_dict()
    b = build_model("maskrcnn_small", class_names=names, **OPTIONS).state_dict()
    return {k for k in a if a[k].shape != b[k].shape}


def test_new_class_count_reinitialises_the_class_heads(
    tmp_path: Path, source: Path, caplog: pytest.LogCaptureFixture
) -> None:
    names = ("__background__", "disc", "square")
    heads = _class_dependent(names)
    assert {k.rsplit(".", 1)[0] for k in heads} == {
        "roi_heads.box_predictor.cls_score",
        "roi_heads.box_predictor.bbox_pred",
        "roi_heads.mask_predictor.mask_fcn_logits",
    }
    cfg = tiny_config(tmp_path, model__weights=str(source), model__class_names="[disc, square]")
    old = weights(source)

    # What the run starts from (same seeding as run_training before it builds).
    seed_everything(cfg.solver.seed)
    with caplog.at_level(logging.INFO, logger="streamseg.train"):
        model, _ = build_train_model(cfg.model, names)
    seed_everything(cfg.solver.seed)
    fresh, _ = build_train_model(cfg.model.model_copy(update={"weights": None}), names)
    start, init = model.state_dict(), fresh.state_dict()
    for key, value in start.items():
        if key in heads:
            # Right shape for 2 classes + background, the new layer's own
            # initialisation, nothing of the old values.
            assert value.shape == init[key].shape != old[key].shape
            assert torch.equal(value, init[key]), key
            rows = min(len(value), len(old[key]))
            assert not torch.isclose(value[:rows], old[key][:rows]).any(), key
        else:
            assert torch.equal(value, old[key]), key
    report = "\n".join(r.getMessage() for r in caplog.records)
    assert f"loaded {len(start) - len(heads)}/{len(start)} tensors from {source}" in report
    line = next(m for m in report.splitlines() if m.startswith("re-initialised"))
    assert line.startswith(f"re-initialised {len(heads)} tensors whose shape changed")
    for key in heads:
        shape = f"{tuple(old[key].shape)}->{tuple(start[key].shape)}"
        assert f"{key} {shape}" in line

    # And the fine-tune itself: it trains and exports a 2-class model.
    result = run_training(cfg, install_signals=False)
    assert result.iteration == cfg.solver.iterations
    trained, trained_names = load_trained_model(str(Path(cfg.output.dir) / "model_final.pth"))
    assert trained_names == names
    assert trained.state_dict()["roi_heads.box_predictor.cls_score.weight"].shape[0] == 3
