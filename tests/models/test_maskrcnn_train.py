"""Mask R-CNN training mode: losses on synthetic frames, and freezing."""

from __future__ import annotations

import math

import pytest
import torch

from streamseg.models import build_model
from streamseg.segment.preprocess import preprocess
from streamseg.synthetic.scene import SyntheticScene
from streamseg.train.freeze import freeze_backbone_stages

LOSSES = {"loss_objectness", "loss_rpn_box_reg", "loss_classifier", "loss_box_reg", "loss_mask"}


def _batch(model: torch.nn.Module, frames):  # type: ignore[no-untyped-def]
    own = [(int(f.image.shape[0]), int(f.image.shape[1])) for f in frames]  # no resize
    inputs = preprocess([f.image for f in frames], model.input_spec, sizes=own)
    images, sizes = inputs.images, inputs.image_sizes
    targets = [
        {"boxes": f.gt.boxes, "labels": f.gt.labels, "masks": f.gt.masks.to(torch.uint8)}
        for f in frames
    ]
    return images, sizes, targets


def test_losses_are_finite_and_decrease() -> None:
    torch.manual_seed(0)
    model = build_model("maskrcnn_small", min_size=96, max_size=128)
    model.train()
    scene = SyntheticScene(seed=7, height=96, width=128, num_objects=4)
    frames = [scene.frame(0), scene.frame(5)]
    assert all(len(f.gt) for f in frames)
    images, sizes, targets = _batch(model, frames)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.SGD(params, lr=0.02, momentum=0.9, weight_decay=1e-4)
    totals = []
    for _ in range(8):
        losses = model(images, sizes, targets)
        assert set(losses) == LOSSES
        values = {k: float(v.detach()) for k, v in losses.items()}
        assert all(v.dim() == 0 for v in losses.values())
        assert all(math.isfinite(v) for v in values.values()), values
        total = sum(losses.values())
        opt.zero_grad()
        total.backward()
        opt.step()
        totals.append(float(total.detach()))
    assert min(totals[-3:]) < 0.7 * totals[0], totals


def test_image_without_objects_trains() -> None:
    torch.manual_seed(0)
    model = build_model("maskrcnn_small", min_size=96, max_size=128)
    model.train()
    frame = SyntheticScene(seed=2, height=96, width=128).frame(0)
    images, sizes, targets = _batch(model, [frame])
    empty = {
        "boxes": torch.zeros((0, 4)),
        "labels": torch.zeros((0,), dtype=torch.int64),
        "masks": torch.zeros((0, 96, 128), dtype=torch.uint8),
    }
    losses = model(torch.cat([images, images]), sizes * 2, [targets[0], empty])
    assert all(math.isfinite(float(v.detach())) for v in losses.values())
    only_empty = model(images, sizes, [empty])
    assert float(only_empty["loss_mask"]) == 0.0 and float(only_empty["loss_box_reg"]) == 0.0
    sum(only_empty.values()).backward()  # still a graph: the trainer can step on it


def test_train_mode_needs_well_formed_targets() -> None:
    model = build_model("maskrcnn_small", min_size=64, max_size=64)
    model.train()
    images = torch.zeros((1, 3, 64, 64))
    with pytest.raises(ValueError, match="needs targets"):
        model(images, [(64, 64)])
    with pytest.raises(ValueError, match=r"targets\[0\] has no 'masks'"):
        model(images, [(64, 64)], [{"boxes": torch.zeros((0, 4)), "labels": torch.zeros(0)}])


@pytest.mark.parametrize("arch", ["maskrcnn_small", "maskrcnn_r50_fpn"])
def test_freeze_backbone_stages(arch: str) -> None:
    model = build_model(arch)
    frozen = set(freeze_backbone_stages(model, 2))  # the trainer's entry point
    assert "backbone.body.conv1.weight" in frozen
    assert "backbone.body.layer1.0.conv1.weight" in frozen
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert "backbone.body.layer2.0.conv1.weight" in trainable
    assert not any(n.startswith(("backbone.fpn", "rpn", "roi_heads")) for n in frozen)
    model.freeze_backbone_stages(5)
    assert not any(p.requires_grad for p in model.backbone.body.parameters())
    assert all(p.requires_grad for p in model.backbone.fpn.parameters())
