"""``solver.channels_last``: the model and its images in NHWC memory format (issue 32 item 3)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from streamseg.train.engine import run_training
from streamseg.train.trainer import HookBase
from tests.support.training import losses, tiny_config


class _Layouts(HookBase):
    """Whether every 4-d weight and the images the model gets are channels-last."""

    def __init__(self) -> None:
        self.weights: list[bool] = []
        self.images: list[bool] = []

    def before_train(self) -> None:
        cl = torch.channels_last
        convs = [m.weight for m in self.trainer.model.modules() if isinstance(m, nn.Conv2d)]
        self.weights = [w.is_contiguous(memory_format=cl) and w.shape[-1] > 1 for w in convs]

        def seen(_module: nn.Module, args: tuple) -> None:
            self.images.append(args[0].is_contiguous(memory_format=cl))

        self.trainer.model.register_forward_pre_hook(seen)


@pytest.mark.parametrize("channels_last", [False, True])
def test_channels_last_reaches_weights_and_images(tmp_path: Path, channels_last: bool) -> None:
    cfg = tiny_config(tmp_path, solver__iterations=2, solver__channels_last=channels_last)
    hook = _Layouts()
    run_training(cfg, install_signals=False, extra_hooks=[hook])
    # 3x3 (and larger) kernels tell the formats apart; 1x1 ones are both at once.
    assert any(hook.weights) is channels_last
    assert len(hook.images) == 2 and all(v is channels_last for v in hook.images)


def test_channels_last_trains_to_the_same_losses(tmp_path: Path) -> None:
    runs = {}
    for name, value in (("nchw", False), ("nhwc", True)):
        cfg = tiny_config(tmp_path, name, solver__iterations=2, solver__channels_last=value)
        run_training(cfg, install_signals=False)
        runs[name] = losses(Path(cfg.output.dir))
    for a, b in zip(runs["nchw"], runs["nhwc"], strict=True):
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-4)
