#!/usr/bin/env python3
"""The starting checkpoint of a ``mask2former_small`` training: the backbone
of a trained ``maskrcnn_small`` checkpoint, the rest freshly initialised.

The published Mask2Former starts from ImageNet weights; offline, the best
start we have is the trunk of our own trained Mask R-CNN demo model (the
same narrow ResNet-18). This writes a streamseg checkpoint that the training
config's ``model.weights`` names:

    PYTHONPATH=$PWD .venv/bin/python scripts/m2f_init_from_maskrcnn.py \\
        configs/panoptic_small.yaml models/demo_small.pth runs/panoptic_small/init.pth

The model is built from CONFIG's ``model`` section (arch, class names,
options), exactly as ``streamseg train`` builds it, so the trainer loads every
tensor of the file.
"""

from __future__ import annotations

import argparse
import json
import sys


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", help="the training config (model.arch: mask2former_small)")
    parser.add_argument("maskrcnn", help="a maskrcnn_small checkpoint, e.g. models/demo_small.pth")
    parser.add_argument("out", help="where to write the starting checkpoint")
    parser.add_argument("--seed", type=int, default=0, help="seed of the new layers' init")
    args = parser.parse_args()

    import torch

    from streamseg.models.checkpoint import read_checkpoint, save_checkpoint
    from streamseg.models.mask2former.small import backbone_from_maskrcnn
    from streamseg.train.config import load_train_config
    from streamseg.train.datasets import build_dataset, resolve_class_names
    from streamseg.train.modeling import build_train_model

    cfg = load_train_config(args.config)
    if cfg.model.arch != "mask2former_small":
        sys.exit(f"{args.config}: model.arch is {cfg.model.arch!r}, not 'mask2former_small'")
    source = read_checkpoint(args.maskrcnn)
    if source.meta.get("arch") not in (None, "maskrcnn_small"):
        sys.exit(f"{args.maskrcnn} is a {source.meta['arch']!r} checkpoint, not maskrcnn_small")
    names = (
        ("__background__", *cfg.model.class_names)
        if cfg.model.class_names
        else resolve_class_names(None, build_dataset(cfg.data.train))
    )
    torch.manual_seed(args.seed)
    model, options = build_train_model(
        cfg.model.model_copy(update={"weights": None}), names, load_weights=False
    )
    state, copied = backbone_from_maskrcnn(model.state_dict(), source.state_dict)
    save_checkpoint(
        args.out,
        state,
        arch=cfg.model.arch,
        class_names=list(names),
        num_classes=len(names),
        iteration=0,
        metrics={},
        model_options={k: v for k, v in options.items() if k != "weights"},
        backbone_from=str(args.maskrcnn),
    )
    print(json.dumps({"out": args.out, "backbone_tensors": copied, "of": len(state)}))


if __name__ == "__main__":
    main()
