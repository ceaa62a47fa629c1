"""Does Mask2Former's semantic and panoptic post-processing give on a CUDA device what it
gives on the CPU? Run by ``scripts/gpu-check.sh`` (``-m gpu``); skipped without a GPU."""

from __future__ import annotations

import pytest
import torch

from streamseg.models.mask2former.universal import panoptic_inference, semantic_inference

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

SIZES = dict(padded_size=(192, 256), image_size=(180, 240), frame_size=(720, 960))


def _outputs(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(seed)
    logits = torch.randn(100, 134) * 3
    logits[:30, torch.randint(0, 133, (30,))] += 8
    blobs = torch.randn(100, 1, 6, 8) * 6
    masks = torch.nn.functional.interpolate(blobs, size=(48, 64), mode="bilinear")[:, 0]
    return logits, masks


@pytest.mark.parametrize("seed", [0, 1])
def test_panoptic_on_cuda_matches_cpu(seed: int) -> None:
    logits, masks = _outputs(seed)
    is_thing = torch.arange(133) < 80
    kw = dict(is_thing=is_thing, object_mask_threshold=0.5, overlap_threshold=0.5, **SIZES)
    cpu = panoptic_inference(logits, masks, **kw)
    gpu = panoptic_inference(logits.cuda(), masks.cuda(), **kw)
    assert gpu.masks.device.type == "cuda" and gpu.regions.label_map.device.type == "cuda"
    assert torch.equal(gpu.labels.cpu(), cpu.labels)
    # Float rounding may move a boundary pixel; nothing more.
    assert (gpu.regions.label_map.cpu() != cpu.regions.label_map).float().mean() < 1e-3
    assert (gpu.masks.cpu() != cpu.masks).float().mean() < 1e-3


def test_semantic_on_cuda_matches_cpu() -> None:
    logits, masks = _outputs(2)
    cpu = semantic_inference(logits, masks, **SIZES)
    gpu = semantic_inference(logits.cuda(), masks.cuda(), **SIZES)
    assert (gpu.regions.label_map.cpu() != cpu.regions.label_map).float().mean() < 1e-3
