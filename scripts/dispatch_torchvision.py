"""torchvision's ``maskrcnn_resnet50_fpn`` counted as ``streamseg bench dispatch`` counts ours.

torchvision does not import beside this project's torch (its C++ ops need
the torch they were built for), so this runs in a throw-away virtual
environment outside the checkout, with the checkout on ``PYTHONPATH`` for
``streamseg.bench.emulated``:

    python3 -m venv /tmp/tv && /tmp/tv/bin/pip install torch==2.14.1 torchvision==0.29.1
    TRITON_INTERPRET=1 PYTHONPATH=. /tmp/tv/bin/python scripts/dispatch_torchvision.py \\
        --batch 1 --detections 10

It prints JSON like ``bench dispatch``: one inference of the model (its own
transform, backbone, RPN, RoI heads and ``paste_masks_in_image``) on the
emulated GPU, random weights, the same frames (160x160 synthetic, resized
to themselves), 64 RPN proposals per image, the box score threshold set so
that a few times D candidates pass and ``box_detections_per_img`` = D. Its
outputs stay on the device, as torchvision returns them (ours come back to
the host in two copies). torchvision's ``nms`` is counted as a host sync
too: the size of its result is read from the device inside the op.
"""

from __future__ import annotations

import argparse
import json
import os

import torch

from streamseg.bench.emulated import emulated_gpu

# torchvision ops that sync with the host inside (their result's size is read from the device).
SYNCING_OPS = ("torchvision::nms",)


def frames(size: int, batch: int) -> list[torch.Tensor]:
    """Float ``(3, H, W)`` images in [0, 1], one textured pattern per camera."""
    g = torch.Generator().manual_seed(0)
    return [torch.rand((3, size, size), generator=g) for _ in range(batch)]


def build(size: int, detections: int, proposals: int) -> torch.nn.Module:
    """The model as its builder makes it with COCO weights (FrozenBatchNorm2d), random weights."""
    from torchvision.models.detection import maskrcnn_resnet50_fpn
    from torchvision.ops.misc import FrozenBatchNorm2d

    torch.manual_seed(0)
    model = maskrcnn_resnet50_fpn(
        weights=None,
        weights_backbone=None,
        min_size=size,
        max_size=size,
        rpn_post_nms_top_n_test=proposals,
        box_detections_per_img=detections,
        box_score_thresh=0.0,
    )
    for parent in model.backbone.body.modules():
        for name, child in parent.named_children():
            if isinstance(child, torch.nn.BatchNorm2d):
                frozen = FrozenBatchNorm2d(child.num_features)
                frozen.weight.copy_(child.weight.detach())
                frozen.bias.copy_(child.bias.detach())
                setattr(parent, name, frozen)
    return model.eval()


def calibrate(model: torch.nn.Module, images: list[torch.Tensor], detections: int) -> float:
    """The lowest, over images, of each image's (4 D)-th foreground class score."""
    seen: list[torch.Tensor] = []
    hook = model.roi_heads.box_predictor.register_forward_hook(
        lambda m, i, o: seen.append(o[0].detach())
    )
    try:
        with torch.inference_mode():
            model(images)
    finally:
        hook.remove()
    fg = seen[0].cpu().softmax(-1)[:, 1:].reshape(len(images), -1)
    return float(fg.topk(min(4 * detections, fg.shape[1]), dim=1).values[:, -1].min())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--detections", type=int, default=10)
    parser.add_argument("--size", type=int, default=160)
    parser.add_argument("--proposals", type=int, default=64)
    args = parser.parse_args()
    os.environ.setdefault("TRITON_INTERPRET", "1")
    model = build(args.size, args.detections, args.proposals)
    images = frames(args.size, args.batch)
    with emulated_gpu() as (device, counts):
        with counts.paused():
            model = model.to(device)
            on_device = [im.to(device) for im in images]
            model.roi_heads.score_thresh = calibrate(model, on_device, args.detections)
            with torch.inference_mode():
                model(on_device)  # warm-up
        counts.clear()
        with torch.inference_mode():
            out = model(on_device)
    totals = counts.totals()
    inside = sum(counts.ops[name] for name in SYNCING_OPS)
    syncs = totals["syncs"] + inside
    print(
        json.dumps(
            {
                "model": "torchvision maskrcnn_resnet50_fpn",
                "torch": torch.__version__,
                "batch": args.batch,
                "detections_per_frame": [int(o["boxes"].shape[0]) for o in out],
                "ops_per_frame": round(totals["ops"] / args.batch, 1),
                "kernel_launches_per_frame": round(totals["launches"] / args.batch, 1),
                "host_syncs_per_frame": round(syncs / args.batch, 2),
                "per_batch": {**totals, "syncs": syncs, "syncs_inside_nms": inside},
                "syncs": dict(counts.syncs.most_common()),
                "top_ops": dict(counts.ops.most_common(15)),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
