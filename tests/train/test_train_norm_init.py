"""Frozen batch norm statistics from training images (training from scratch)."""

from __future__ import annotations

from pathlib import Path

import torch

from streamseg.models import build_model
from streamseg.models.checkpoint import read_checkpoint
from streamseg.segment.preprocess import preprocess
from streamseg.train.data import SyntheticDataset
from streamseg.train.engine import run_training
from streamseg.train.norm_init import frozen_norms, init_frozen_norms
from tests.support.training import SCENE, tiny_config


def _images(n: int) -> torch.Tensor:
    ds = SyntheticDataset(f"{SCENE}&frames={n}")
    spec = build_model("maskrcnn_small").input_spec
    images = [ds[i].image for i in range(n)]
    return preprocess(images, spec, sizes=[ds[i].size for i in range(n)]).images


def test_every_frozen_norm_starts_out_normalising_its_input() -> None:
    model = build_model("maskrcnn_small")
    norms = frozen_norms(model)
    assert len(norms) >= 5 and all(float(n.running_var.min()) == 1.0 for n in norms)
    x = _images(4)
    assert init_frozen_norms(model, x) == len(norms)
    outputs: list[torch.Tensor] = []
    handles = [
        n.register_forward_hook(lambda _m, _i, out: outputs.append(out.clone())) for n in norms
    ]
    with torch.no_grad():
        model.backbone(x)
    for h in handles:
        h.remove()
    assert len(outputs) == len(norms)
    for out in outputs:
        mean, var = out.mean(dim=(0, 2, 3)), out.var(dim=(0, 2, 3), unbiased=False)
        assert torch.allclose(mean, torch.zeros_like(mean), atol=1e-3)
        live = var > 1e-6  # channels a ReLU silenced upstream stay at 0
        assert torch.allclose(var[live], torch.ones_like(var[live]), atol=1e-2)
    model.train()  # the model's mode is left as it was
    init_frozen_norms(model, x)
    assert model.training


def test_training_from_scratch_sets_them_and_checkpoints_carry_them(tmp_path: Path) -> None:
    cfg = tiny_config(tmp_path, solver__iterations=1, model__init_frozen_norm_images=4)
    run_training(cfg, install_signals=False)
    state = read_checkpoint(str(Path(cfg.output.dir) / "model_final.pth")).state_dict
    var = state["backbone.body.bn1.running_var"]
    assert not torch.equal(var, torch.ones_like(var))
    plain = tiny_config(tmp_path, "plain", solver__iterations=1)
    run_training(plain, install_signals=False)
    state = read_checkpoint(str(Path(plain.output.dir) / "model_final.pth")).state_dict
    assert torch.equal(state["backbone.body.bn1.running_var"], torch.ones_like(var))
