"""Shared by the backend tests: checkpoints and an eager-vs-compiled comparison."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from streamseg.models import build_model, class_options
from streamseg.models.checkpoint import save_checkpoint
from streamseg.types import Instances
from tests.segment.conftest import SMALL


def write_checkpoint(path: Path, seed: int, config: dict[str, Any] = SMALL) -> str:
    """A trainer-style checkpoint of random weights of ``config["arch"]``."""
    torch.manual_seed(seed)
    arch = config["arch"]
    options = {k: v for k, v in config.items() if k not in ("arch", "class_names")}
    model = build_model(arch, **options, **class_options(arch, config.get("class_names")))
    names = list(model.class_names)
    save_checkpoint(
        path,
        model.state_dict(),
        arch=arch,
        class_names=names,
        num_classes=len(names),
        model_options=options,
    )
    return str(path)


def assert_close_results(expected: list[Instances], actual: list[Instances]) -> None:
    """Compiled within float tolerance of eager: same detections, boxes, masks."""
    assert len(expected) == len(actual)
    for x, y in zip(expected, actual, strict=True):
        assert x.image_size == y.image_size
        assert len(x) == len(y) and len(x) > 0
        torch.testing.assert_close(y.scores, x.scores, atol=1e-4, rtol=1e-3)
        torch.testing.assert_close(y.boxes, x.boxes, atol=1e-2, rtol=1e-3)
        assert torch.equal(x.labels, y.labels)
        assert x.masks is not None and y.masks is not None
        assert (x.masks != y.masks).float().mean() < 1e-3
