"""Eager latency of one Mask2Former forward (+ post-processing), printed as JSON.

    PYTHONPATH=. python scripts/bench_mask2former.py --arch mask2former_r50 --size 512x512

Random weights, batch 1, ``torch.inference_mode``; the model forward and the
post-processing (at the input size, score threshold 0.5) are timed separately,
plus the process CPU time of the forward. Until
``streamseg bench model`` covers Mask2Former this is the way to measure it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from streamseg.models import build_model


def _parse_size(text: str) -> tuple[int, int]:
    h, _, w = text.partition("x")
    return int(h), int(w)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="mask2former_r50")
    parser.add_argument("--size", default="512x512", help="HxW of the (padded) input")
    parser.add_argument("--iters", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    h, w = _parse_size(args.size)
    torch.manual_seed(0)
    model = build_model(args.arch, num_classes=80, score_threshold=0.5).eval()
    images = torch.randn(1, 3, h, w)
    forward, post, cpu = [], [], []
    with torch.inference_mode():
        for i in range(args.warmup + args.iters):
            t0, c0 = time.perf_counter(), time.process_time()
            out = model(images, [(h, w)])
            t1, c1 = time.perf_counter(), time.process_time()
            model.postprocess(out, [(h, w)], [(h, w)])
            t2 = time.perf_counter()
            if i >= args.warmup:
                forward.append(t1 - t0)
                post.append(t2 - t1)
                cpu.append(c1 - c0)
    print(
        json.dumps(
            {
                "arch": args.arch,
                "size": [h, w],
                "batch": 1,
                "device": "cpu",
                "threads": torch.get_num_threads(),
                "forward_ms_median": round(1000 * statistics.median(forward), 1),
                "forward_ms_min": round(1000 * min(forward), 1),
                # CPU seconds of this process per forward (all threads): less
                # sensitive than wall time to other load on a shared machine.
                "forward_cpu_s_median": round(statistics.median(cpu), 2),
                "postprocess_ms_median": round(1000 * statistics.median(post), 1),
                "iters": args.iters,
                "params_m": round(sum(p.numel() for p in model.parameters()) / 1e6, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
