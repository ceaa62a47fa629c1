#!/usr/bin/env python3
"""A/B of training-step changes in one process, alternated (issue 32 item 3).

    PYTHONPATH=. nice -n 5 python scripts/train_ab.py --arch maskrcnn_r50_fpn \\
        --size 512x512 --rounds 3 [--freeze 2] > ab.json

One model (``streamseg bench train``'s set-up: the trainer's own forward,
backward and SGD step) runs one iteration per variant per round, the
variants alternated so that a busy machine slows them alike:

* ``unfolded``: the frozen batch norms of the backbone as a step of their
  own after each convolution (their eval-mode path, as before the fold);
* ``folded``: folded into the convolutions (the training path);
* ``folded_channels_last``: the same with the model and input channels-last.

Printed: JSON with, per variant, the median wall and CPU (process time)
milliseconds of each phase, the median peak RSS of its iterations (the
high-water mark reset before each one; memory the allocator kept from an
earlier iteration counts too, so compare CPU time first) and its losses
(the last round's; the same images and seeds for every variant of a round,
but the weights move on after each step, so they differ a little).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from typing import Any

import torch

from streamseg.bench.train import (
    TrainBenchSpec,
    build_bench,
    peak_memory_mb,
    reset_peak_memory,
    time_iteration,
)
from streamseg.models.maskrcnn.backbone import FrozenBatchNorm2d

VARIANTS = ("unfolded", "folded", "folded_channels_last")


def apply(parts: Any, variant: str, inputs: Any) -> None:
    """Switch the model to ``variant``; its next micro-batch is ``inputs``."""
    model = parts.trainer.model
    for m in model.modules():
        if isinstance(m, FrozenBatchNorm2d):
            m.train(variant != "unfolded")
    fmt = torch.channels_last if variant.endswith("channels_last") else torch.contiguous_format
    model.to(memory_format=fmt)

    def next_inputs() -> Any:
        images, sizes, targets = inputs
        return images.contiguous(memory_format=fmt), sizes, targets

    parts.next_inputs = next_inputs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", default="maskrcnn_r50_fpn")
    parser.add_argument("--size", default="512x512")
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--freeze", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    args = parser.parse_args()
    h, w = (int(v) for v in args.size.split("x"))
    variants = args.variants.split(",")
    spec = TrainBenchSpec(arch=args.arch, size=(h, w), batch=args.batch, freeze=args.freeze)
    parts = build_bench(spec)
    base_inputs = parts.next_inputs
    rows: dict[str, list[dict[str, float]]] = {v: [] for v in variants}
    losses: dict[str, dict[str, float]] = {}
    for r in range(args.rounds + 1):  # round 0 warms every variant up, untimed
        inputs = base_inputs()  # the same images and seed for every variant of a round
        for variant in variants:
            apply(parts, variant, inputs)
            reset_peak_memory(parts.device)
            row, losses[variant] = time_iteration(parts, number=r)
            row["peak_mb"] = peak_memory_mb(parts.device)
            if r:
                rows[variant].append(row)
            print(variant, r, round(row["total_cpu_ms"]), file=sys.stderr, flush=True)
    report: dict[str, Any] = {"benchmark": "train_ab", **vars(args), "torch": torch.__version__}
    for variant in variants:
        med = {k: statistics.median(x[k] for x in rows[variant]) for k in rows[variant][0]}
        wall = {k: v for k, v in med.items() if k.endswith("_ms") and not k.endswith("_cpu_ms")}
        report[variant] = {
            "ms": {k[:-3]: round(v) for k, v in wall.items()},
            "cpu_ms": {k[:-7]: round(v) for k, v in med.items() if k.endswith("_cpu_ms")},
            "peak_rss_mb": med["peak_mb"],
            "total_cpu_ms_each": [round(x["total_cpu_ms"]) for x in rows[variant]],
            "losses": {k: round(v, 6) for k, v in losses[variant].items()},
        }
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
