"""Mask2Former fine-tunes: a short run on synthetic scenes lowers the loss and raises mask AP.

The ``tiny`` config on 96x128 frames; about 20 s on one CPU core.
"""

from __future__ import annotations

import torch

from streamseg.models.mask2former.build import mask2former_tiny
from streamseg.segment.preprocess import preprocess
from streamseg.synthetic.scene import SYNTHETIC_CLASS_NAMES as NAMES
from streamseg.train.data import Sample, SyntheticDataset
from streamseg.train.evaluate import evaluate_model

STEPS = 60


def _batch(model, samples: list[Sample]):
    own = [s.size for s in samples]  # no resize
    inputs = preprocess([s.image for s in samples], model.input_spec, sizes=own)
    images, sizes = inputs.images, inputs.image_sizes
    targets = [
        {"boxes": s.boxes, "labels": s.labels, "masks": s.masks.to(torch.uint8)} for s in samples
    ]
    return images, sizes, targets


def _fixed_loss(model, samples: list[Sample]) -> float:
    torch.manual_seed(123)  # the same sampled points before and after training
    with torch.no_grad():
        return float(sum(model(*_batch(model, samples)).values()))


def test_short_finetune_lowers_loss_and_raises_mask_ap() -> None:
    # tests/models/conftest.py runs every model test on one thread.
    torch.manual_seed(0)
    data = SyntheticDataset(
        "synthetic://?seed=3&width=128&height=96&objects=3&noise=0", frames=8, stride=5
    )
    data.set_class_names(NAMES)
    samples = [data[i] for i in range(len(data))]
    assert sum(len(s) for s in samples) > 8
    model = mask2former_tiny(
        class_names=NAMES, num_points=256, min_size=96, max_size=128, score_threshold=0.0
    )
    ap_before = evaluate_model(model, data, NAMES)["segm"]
    model.train()
    loss_before = _fixed_loss(model, samples[:4])

    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.0)
    for step in range(STEPS):
        losses = model(*_batch(model, [samples[(2 * step) % 8], samples[(2 * step + 1) % 8]]))
        assert set(losses) == {"loss_class", "loss_mask", "loss_dice"}
        optimizer.zero_grad()
        sum(losses.values()).backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()

    loss_after = _fixed_loss(model, samples[:4])
    ap_after = evaluate_model(model, data, NAMES)["segm"]
    assert loss_after < 0.6 * loss_before, (loss_before, loss_after)
    assert ap_after["AP50"] > ap_before["AP50"] + 0.2, (ap_before, ap_after)
    assert ap_after["AP"] > ap_before["AP"]


def test_freeze_backbone_stages_and_frozen_batch_norm() -> None:
    from streamseg.train.freeze import freeze_backbone_stages

    model = mask2former_tiny(num_classes=2)
    frozen = freeze_backbone_stages(model, 2)
    assert frozen and all(n.startswith("model.pixel_level_module.encoder.") for n in frozen)
    assert any(".swin.embeddings." in n for n in frozen)
    assert any(".swin.encoder.layers.0." in n for n in frozen)
    assert not any(".swin.encoder.layers.1." in n for n in frozen)
    assert model.class_predictor.weight.requires_grad

    from streamseg.models.mask2former.build import build_mask2former

    with torch.device("meta"):
        resnet = build_mask2former("r50", num_classes=2)
    frozen = freeze_backbone_stages(resnet, 3)
    assert any(".embedder." in n for n in frozen)
    assert any(".encoder.stages.1." in n for n in frozen)
    assert not any(".encoder.stages.2." in n for n in frozen)
    resnet.train()
    bns = [m for m in resnet.backbone.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    assert bns and not any(m.training for m in bns)
    assert resnet.class_predictor.training
