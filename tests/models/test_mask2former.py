"""Mask2Former: parity with transformers, checkpoints, options, post-processing.

All on the few-channel ``tiny`` config, so the file runs in seconds.
"""

from __future__ import annotations

import pytest
import torch
from transformers.models.mask2former.modeling_mask2former import (
    Mask2FormerForUniversalSegmentation,
)

from streamseg.models import build_model
from streamseg.models.checkpoint import CheckpointError
from streamseg.models.mask2former.build import (
    load_weights,
    mask2former_tiny,
)
from streamseg.models.mask2former.config import hf_config

NUM_CLASSES = 3


@pytest.fixture(scope="module")
def pair() -> tuple[torch.nn.Module, torch.nn.Module]:
    """transformers' model with random weights, and ours loaded from its state dict."""
    torch.manual_seed(0)
    hf = Mask2FormerForUniversalSegmentation(hf_config("tiny", num_classes=NUM_CLASSES)).eval()
    with torch.no_grad():  # make the class head decisive enough to give instances
        hf.class_predictor.weight.mul_(20)
    ours = mask2former_tiny(num_classes=NUM_CLASSES, score_threshold=0.0)
    ours.load_state_dict(hf.state_dict())
    return hf, ours.eval()


def _images() -> torch.Tensor:
    torch.manual_seed(1)
    return torch.randn(2, 3, 96, 128)


def test_logits_match_transformers(pair) -> None:
    hf, ours = pair
    images = _images()
    with torch.no_grad():
        expected = hf(pixel_values=images)
        got = ours(images, [(96, 128), (80, 100)])
    assert got["pred_logits"].shape == (2, 100, NUM_CLASSES + 1)
    assert got["pred_masks"].shape == (2, 100, 24, 32)
    torch.testing.assert_close(
        got["pred_logits"], expected.class_queries_logits, atol=1e-5, rtol=1e-5
    )
    torch.testing.assert_close(
        got["pred_masks"], expected.masks_queries_logits, atol=1e-5, rtol=1e-5
    )


def test_resnet_backbone_logits_match_transformers() -> None:
    """The ResNet path (R50's bottleneck layout at a few channels, batch norm
    statistics that are not the identity) against transformers' model."""
    from streamseg.models.mask2former.build import build_mask2former

    torch.manual_seed(4)
    hf = Mask2FormerForUniversalSegmentation(hf_config("tiny_r50", num_classes=NUM_CLASSES)).eval()
    with torch.no_grad():
        for m in hf.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
    ours = build_mask2former("tiny_r50", num_classes=NUM_CLASSES)
    ours.load_state_dict(hf.state_dict())
    assert type(ours.backbone).__name__ == "ResNetBackbone"
    images = _images()
    with torch.no_grad():
        expected = hf(pixel_values=images)
        got = ours(images, [(96, 128), (80, 100)])
    torch.testing.assert_close(
        got["pred_logits"], expected.class_queries_logits, atol=1e-5, rtol=1e-5
    )
    torch.testing.assert_close(
        got["pred_masks"], expected.masks_queries_logits, atol=1e-5, rtol=1e-5
    )


def _reference_instances(class_logits, mask_logits, image_size, frame_size):
    """Every (query, class) pair scored at frame resolution, the plain way."""
    probs = class_logits.softmax(-1)[:, :-1]
    full = torch.nn.functional.interpolate(
        mask_logits[None],
        size=(mask_logits.shape[-2] * 4, mask_logits.shape[-1] * 4),
        mode="bilinear",
        align_corners=False,
    )[0, :, : image_size[0], : image_size[1]]
    full = torch.nn.functional.interpolate(
        full[None], size=frame_size, mode="bilinear", align_corners=False
    )[0]
    rows = []
    for q in range(probs.shape[0]):
        binary = full[q] > 0
        mask_score = float((full[q].sigmoid() * binary).sum() / (binary.sum() + 1e-6))
        for c in range(probs.shape[1]):
            rows.append((float(probs[q, c]) * mask_score, float(probs[q, c]), q, c + 1))
    # Post-processing keeps the Q best class scores, then orders by final score.
    top = sorted(rows, key=lambda r: -r[1])[: probs.shape[0]]
    return sorted(top, key=lambda r: -r[0]), full > 0


def test_instances_match_reference_on_transformers_outputs(pair) -> None:
    hf, ours = pair
    images = _images()
    with torch.no_grad():
        expected = hf(pixel_values=images)
        got = ours(images, [(96, 128), (80, 100)])
    frames = [(120, 160), (60, 75)]
    instances = ours.postprocess(got, [(96, 128), (80, 100)], frames)
    for i, inst in enumerate(instances):
        ref, ref_masks = _reference_instances(
            expected.class_queries_logits[i],
            expected.masks_queries_logits[i],
            [(96, 128), (80, 100)][i],
            frames[i],
        )
        assert inst.masks is not None and inst.masks.dtype == torch.bool
        assert inst.masks.shape == (len(inst), *frames[i])
        torch.testing.assert_close(
            inst.scores, torch.tensor([r[0] for r in ref]), atol=1e-5, rtol=1e-4
        )
        assert inst.labels.tolist() == [r[3] for r in ref]
        for k, r in enumerate(ref[:10]):
            assert torch.equal(inst.masks[k], ref_masks[r[2]])


def test_instances_are_well_formed(pair) -> None:
    _, ours = pair
    ours.score_threshold, ours.detections_per_image = 0.2, 7
    try:
        with torch.no_grad():
            out = ours(_images(), [(96, 128), (96, 128)])
        inst = ours.postprocess(out, [(96, 128), (96, 128)], [(192, 256), (48, 64)])
    finally:
        ours.score_threshold, ours.detections_per_image = 0.0, 100
    for frame, one in zip([(192, 256), (48, 64)], inst, strict=True):
        assert one.image_size == frame
        assert 0 < len(one) <= 7
        assert bool((one.scores >= 0.2).all()) and bool((one.scores <= 1).all())
        assert torch.equal(one.scores, one.scores.sort(descending=True).values)
        assert bool(((one.labels >= 1) & (one.labels <= NUM_CLASSES)).all())
        assert one.labels.dtype == torch.int64
        nonempty = one.masks.flatten(1).any(1)
        assert bool((one.boxes[:, 2:] > one.boxes[:, :2]).all(1)[nonempty].all())
        assert bool((one.boxes[:, 2] <= frame[1]).all()) and bool(
            (one.boxes[:, 3] <= frame[0]).all()
        )


def test_weights_file_roundtrip_and_strict_errors(pair, tmp_path) -> None:
    hf, _ = pair
    state = hf.state_dict()
    good = tmp_path / "pytorch_model.bin"
    torch.save(state, good)
    model = mask2former_tiny(num_classes=NUM_CLASSES, weights=str(good))
    torch.testing.assert_close(model.class_predictor.weight, hf.class_predictor.weight)

    bad = dict(state)
    bad.pop("model.transformer_module.queries_features.weight")
    bad["model.extra.weight"] = torch.zeros(1)
    bad["class_predictor.weight"] = torch.zeros(81, 32)
    path = tmp_path / "bad.pth"
    torch.save(bad, path)
    with pytest.raises(CheckpointError) as info:
        mask2former_tiny(num_classes=NUM_CLASSES, weights=str(path))
    msg = str(info.value)
    assert "Hugging Face Mask2Former layout" in msg
    assert "1 missing keys: model.transformer_module.queries_features.weight" in msg
    assert "1 unexpected keys: model.extra.weight" in msg
    assert "class_predictor.weight: checkpoint (81, 32) vs model (4, 32)" in msg


def test_safetensors_and_unreadable_files(pair, tmp_path) -> None:
    import safetensors.torch as safetensors

    hf, _ = pair
    path = tmp_path / "model.safetensors"
    safetensors.save_file({k: v.contiguous() for k, v in hf.state_dict().items()}, str(path))
    model = mask2former_tiny(num_classes=NUM_CLASSES)
    load_weights(model, path)
    torch.testing.assert_close(model.state_dict()["class_predictor.bias"], hf.class_predictor.bias)

    broken = tmp_path / "broken.safetensors"
    broken.write_bytes(b"not a safetensors file")
    with pytest.raises(CheckpointError, match=r"broken\.safetensors"):
        load_weights(model, broken)
    with pytest.raises(CheckpointError, match="does not exist"):
        load_weights(model, tmp_path / "missing.bin")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match=r"folder without model\.safetensors"):
        load_weights(model, tmp_path / "empty")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"nms_threshold": 0.5}, "no NMS"),
        ({"box_batch_size_per_image": 64}, "num_points"),
        ({"colour": "red"}, "unknown Mask2Former option 'colour'"),
        ({"num_classes": 3, "class_names": ("__background__", "a", "b")}, r"num_classes \+ 1"),
        ({"class_names": ("a", "b")}, "__background__"),
    ],
)
def test_bad_options_are_named(options, message) -> None:
    with pytest.raises(ValueError, match=message):
        build_model("mask2former_r50", **options)


def test_published_layouts_have_transformers_keys() -> None:
    """R50 and Swin-T state dicts have exactly transformers' key names and shapes."""
    for arch, backbone in (("mask2former_swin_t", "swin_t"), ("mask2former_r50", "r50")):
        with torch.device("meta"):
            ours = build_model(arch, num_classes=80)
            hf = Mask2FormerForUniversalSegmentation(hf_config(backbone, num_classes=80))
        theirs = {k: tuple(v.shape) for k, v in hf.state_dict().items()}
        assert {k: tuple(v.shape) for k, v in ours.state_dict().items()} == theirs
        assert len(ours.model.transformer_module.decoder.layers) == 9
        assert ours.model.transformer_module.queries_features.num_embeddings == 100
        assert ours.input_spec.mean == (0.485, 0.456, 0.406) and ours.input_spec.scale == 255.0


def test_loss_matches_transformers_with_same_random_points(pair) -> None:
    """Same weights, targets and seed: our loss equals Mask2FormerLoss's weighted total."""
    hf, ours = pair
    torch.manual_seed(2)
    images = torch.randn(2, 3, 64, 96)
    masks = [(torch.rand(n, 64, 96) > 0.6).float() for n in (2, 3)]
    labels = [torch.tensor([0, 2]), torch.tensor([1, 1, 0])]
    targets = [
        {"boxes": torch.zeros(len(lab), 4), "labels": lab + 1, "masks": m.to(torch.uint8)}
        for lab, m in zip(labels, masks, strict=True)
    ]
    hf.train(), ours.train()
    try:
        torch.manual_seed(3)
        expected = hf(pixel_values=images, mask_labels=masks, class_labels=labels).loss
        torch.manual_seed(3)
        got = ours(images, [(64, 96), (64, 96)], targets)
    finally:
        hf.eval(), ours.eval()
    assert set(got) == {"loss_class", "loss_mask", "loss_dice"}
    torch.testing.assert_close(sum(got.values()), expected, atol=1e-4, rtol=1e-5)


def test_loads_hub_layout_written_by_save_pretrained(pair, tmp_path) -> None:
    """``save_pretrained`` writes hub (transformers-4) key names; outputs stay identical."""
    from safetensors.torch import load_file, save_file

    hf, ours = pair
    hf.save_pretrained(tmp_path / "hub")
    file = tmp_path / "hub" / "model.safetensors"
    saved = load_file(str(file))
    assert any(".encoder.encoder.layers.0.blocks.0.attention.self.query." in k for k in saved)
    model = mask2former_tiny(num_classes=NUM_CLASSES, weights=str(tmp_path / "hub"))  # folder
    images = _images()
    with torch.no_grad():
        want, got = ours(images, [(96, 128)] * 2), model(images, [(96, 128)] * 2)
    torch.testing.assert_close(got["pred_masks"], want["pred_masks"], atol=0, rtol=0)

    # A transformers-4 era file: relative_position_index buffers, no final Swin norm.
    old = {k: v for k, v in saved.items() if ".encoder.layernorm." not in k}
    old[
        "model.pixel_level_module.encoder.encoder.layers.0.blocks.0.attention.self."
        "relative_position_index"
    ] = torch.zeros(16, 16, dtype=torch.int64)
    save_file(old, str(tmp_path / "old.safetensors"))
    model = mask2former_tiny(num_classes=NUM_CLASSES, weights=str(tmp_path / "old.safetensors"))
    with torch.no_grad():
        got = model(images, [(96, 128)] * 2)
    torch.testing.assert_close(got["pred_logits"], want["pred_logits"], atol=0, rtol=0)


def test_dense_parts_are_batch_first_and_padding_safe(pair) -> None:
    """What compiled backends rely on: positional batch-first parts, zero-image padding."""
    _, ours = pair
    parts = dict(ours.dense_parts())
    assert parts == {"model.pixel_level_module": "image", "head": "image"}
    assert "head.class_predictor.weight" not in ours.state_dict()  # keys stay Hugging Face's
    images = _images()
    padded = torch.cat([images, torch.zeros(1, 3, 96, 128)])
    with torch.no_grad():
        want = ours(images, [(96, 128)] * 2)
        pixel = ours.model.pixel_level_module(padded)
        logits, masks = ours.head(
            tuple(pixel.decoder_hidden_states), pixel.decoder_last_hidden_state
        )
    torch.testing.assert_close(logits[:2], want["pred_logits"], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(masks[:2], want["pred_masks"], atol=1e-5, rtol=1e-5)
