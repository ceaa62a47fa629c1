"""Tiny training configs: maskrcnn_small on 64x96 synthetic frames, seconds per run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from streamseg.train.config import TrainConfig, load_train_config
from streamseg.train.trainer import HookBase

SCENE = "synthetic://?seed=3&width=96&height=64&objects=3"


# The model section of tiny_yaml: maskrcnn_small with few proposals.
SMALL_MODEL = (
    "model:\n"
    "  arch: maskrcnn_small\n"
    "  roi_samples_per_image: 64\n"
    "  options: {min_size: 64, max_size: 96, rpn_post_nms_top_n_train: 200}\n"
)


def tiny_yaml(
    out_dir: Path,
    *,
    train: str | None = None,
    iterations: int = 6,
    frames: int = 8,
    model: str = SMALL_MODEL,
) -> str:
    """A config for 2-image micro-batches of small synthetic frames (CPU, seconds).

    ``train`` replaces the ``data.train`` list (YAML lines indented by 4);
    ``model`` the whole ``model:`` section.
    """
    data = train or f'    - synthetic: "{SCENE}"\n      frames: {frames}\n'
    return (
        f"{model}"
        "data:\n"
        "  train:\n"
        f"{data}"
        "  min_size: [56, 64]\n"
        "  max_size: 96\n"
        "  workers: 0\n"
        "solver:\n"
        f"  iterations: {iterations}\n"
        "  batch_size: 2\n"
        "  optimizer: adamw\n"
        "  lr: 0.001\n"
        "  warmup_iters: 2\n"
        "  clip_grad_norm: 10.0\n"
        "output:\n"
        f"  dir: {out_dir}\n"
        "  checkpoint_period: 2\n"
        "  log_period: 1\n"
        "  progress: false\n"
        "device: cpu\n"
    )


def tiny_config(
    tmp_path: Path,
    name: str = "run",
    *,
    frames: int = 8,
    train: str | None = None,
    **overrides: Any,
) -> TrainConfig:
    """``tiny_yaml`` written to ``tmp_path/<name>.yaml`` and loaded, with ``--set`` overrides
    (``solver__lr=0.1`` sets ``solver.lr``)."""
    path = tmp_path / f"{name}.yaml"
    path.write_text(tiny_yaml(tmp_path / name, frames=frames, train=train))
    return load_train_config(path, [f"{k.replace('__', '.')}={v}" for k, v in overrides.items()])


def losses(run_dir: Path) -> list[dict[str, float]]:
    """The loss terms of every iteration in ``metrics.jsonl`` (eval lines left out)."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [
        {k: v for k, v in r.items() if k.startswith("loss") or k == "iteration"}
        for r in rows
        if "loss" in r
    ]


def weights(path: Path) -> dict[str, torch.Tensor]:
    """The model state dict of a checkpoint the trainer wrote."""
    from streamseg.models.checkpoint import read_checkpoint

    return dict(read_checkpoint(str(path)).state_dict)


class StopAt(HookBase):
    """Asks the trainer to stop once it has finished iteration ``at`` (an interruption)."""

    def __init__(self, at: int) -> None:
        self.at = at

    def after_step(self) -> None:
        if self.trainer.iter == self.at:
            self.trainer.request_stop()
