"""``mask2former_small``: maskrcnn_small's trunk under transformers' Mask2Former decoder.

Its backbone must compute exactly what the Mask R-CNN demo model's backbone
computes once copied from it (that is the start it trains from), train end to
end, and freeze by stages; and ``scripts/m2f_diagnose.py`` must report the
figures docs/mask2former.md quotes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from streamseg.models import build_model
from streamseg.models.checkpoint import save_checkpoint
from streamseg.models.mask2former.small import backbone_from_maskrcnn
from tests.support.scripts import load_script

NAMES = ("__background__", "disc", "square", "triangle", "star", "ground")


def _randomise_norms(model: torch.nn.Module) -> None:
    """Non-trivial frozen batch-norm statistics, as a trained checkpoint has."""
    g = torch.Generator().manual_seed(1)
    for name, buf in model.named_buffers():
        if name.endswith(("running_mean", "bias")):
            buf.copy_(torch.randn(buf.shape, generator=g) * 0.1)
        elif name.endswith(("running_var", "weight")):
            buf.copy_(torch.rand(buf.shape, generator=g) + 0.5)


def _small(**options):
    return build_model("mask2former_small", class_names=NAMES, num_queries=8, **options)


def test_backbone_from_maskrcnn_small_computes_the_same_features() -> None:
    torch.manual_seed(0)
    maskrcnn = build_model("maskrcnn_small", num_classes=5)
    _randomise_norms(maskrcnn)
    model = _small()
    state, copied = backbone_from_maskrcnn(model.state_dict(), maskrcnn.state_dict())
    assert copied == sum(1 for k in state if ".encoder.body." in k) > 50
    model.load_state_dict(state)
    x = torch.randn(1, 3, 96, 128)
    with torch.no_grad():
        want = maskrcnn.backbone.body(x)
        got = model.backbone(x).feature_maps
    assert [t.shape[1] for t in got] == [24, 48, 96, 192]
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_backbone_from_another_trunk_is_refused() -> None:
    model = _small()
    r50_like = {"backbone.body.conv1.weight": torch.zeros(64, 3, 7, 7)}
    with pytest.raises(ValueError, match=r"backbone\.body\.conv1\.weight: shape \(64, 3, 7, 7\)"):
        backbone_from_maskrcnn(model.state_dict(), r50_like)


def test_small_trains_end_to_end_and_freezes_by_stage() -> None:
    torch.manual_seed(0)
    model = _small(num_points=64, task="panoptic", stuff_classes=["ground"])
    model.freeze_backbone_stages(2)  # stem and layer1
    model.train()
    masks = torch.zeros(2, 64, 96, dtype=torch.uint8)
    masks[0, 10:30, 20:40] = 1
    masks[1, 40:, :] = 1
    target = {"boxes": torch.zeros(2, 4), "labels": torch.tensor([1, 5]), "masks": masks}
    losses = model(torch.randn(1, 3, 64, 96), [(64, 96)], [target])
    assert set(losses) == {"loss_class", "loss_mask", "loss_dice"}
    sum(losses.values()).backward()
    body = model.backbone.body
    assert body.conv1.weight.grad is None and body.layer1[0].conv1.weight.grad is None
    assert body.layer2[0].conv1.weight.grad is not None
    assert float(body.layer4[0].conv2.weight.grad.abs().sum()) > 0
    assert model.class_predictor.weight.grad is not None
    model.eval()
    with torch.no_grad():
        out = model(torch.randn(1, 3, 64, 96), [(64, 96)])
    assert out["pred_logits"].shape == (1, 8, 6) and out["pred_masks"].shape == (1, 8, 16, 24)


def test_diagnose_reports_matching_class_mask_and_size_figures(tmp_path: Path) -> None:
    torch.manual_seed(0)
    options = {"min_size": 96, "max_size": 128, "task": "panoptic", "stuff_classes": ["ground"]}
    model = build_model(
        "mask2former_tiny", class_names=NAMES, num_queries=6, num_points=64, **options
    )
    weights = tmp_path / "m.pth"
    save_checkpoint(
        weights,
        model.state_dict(),
        arch="mask2former_tiny",
        class_names=list(NAMES),
        num_classes=len(NAMES),
        model_options={**options, "num_queries": 6, "num_points": 64},
    )
    url = "synthetic://?seed=3&width=128&height=96&objects=3&stuff=1"
    out = load_script("m2f_diagnose").diagnose(str(weights), [url], images=2, batch=2)
    assert out["num_queries"] == 6 and len(out["layers"]) == 3  # query init + 2 layers
    for layer in out["layers"]:
        assert sum(layer["class_loss_share"].values()) == pytest.approx(1.0, abs=1e-3)
        assert 1 <= layer["queries_matched_to_things"] <= 6
        assert layer["thing_matches"] == out["object_size"]["things"]
        assert 0.0 <= layer["thing"]["mask_iou_median"] <= 1.0
        assert 0.0 <= layer["thing"]["p_target_median"] <= 1.0
    sides = out["object_size"]["side_px"]
    assert 0 < sides["p10"] <= sides["median"] <= sides["p90"] < 96
