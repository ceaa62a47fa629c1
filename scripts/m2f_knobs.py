#!/usr/bin/env python3
"""Sweep a Mask2Former checkpoint's inference knobs on some scenes.

The network runs once per image (as ``streamseg eval`` runs it: the
Segmenter's preprocessing, the checkpoint's own input size); only the
post-processing runs again for every setting, so a sweep costs one
evaluation's forward passes. For each setting it reports what ``streamseg
eval`` would (PQ, PQ things / stuff, box and mask AP) for:

* ``--task panoptic`` (default): every ``object_mask_threshold`` x
  ``overlap_threshold`` in ``--object`` and ``--overlap``;
* ``--task instance``: every ``score_threshold`` in ``--score`` x
  ``detections_per_image`` in ``--top``.

Pick a setting on validation scenes, then report it on held-out ones (a
setting chosen on the held-out scenes fits the test data):

    PYTHONPATH=$PWD .venv/bin/python scripts/m2f_knobs.py models/panoptic_small.pth \\
        --data "synthetic://?seed=2001&width=256&height=192&objects=3&stuff=1&frames=40&stride=5" \\
        --object 0.3 0.5 0.8 --overlap 0.5 0.8

prints one JSON object per setting, then one line with the CPU time.
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from typing import Any

import torch


def _forward(model: Any, dataset: Any, batch_size: int) -> list[tuple[Any, ...]]:
    """(outputs, image sizes, frame sizes, ground truths) per batch."""
    from streamseg.segment.preprocess import preprocess
    from streamseg.train.modeling import input_spec

    spec = input_spec(model)
    cached = []
    ids = list(range(len(dataset)))
    for start in range(0, len(ids), batch_size):
        chunk = ids[start : start + batch_size]
        images, truth = [], []
        for i in chunk:
            images.append(dataset[i].image)
            truth.append(dataset.ground_truth(i))
        with torch.inference_mode():
            inputs = preprocess(images, spec, device="cpu")
            outputs = model(inputs.images, inputs.image_sizes)
        cached.append((outputs, inputs.image_sizes, inputs.frame_sizes, truth))
    return cached


def _score(
    model: Any, cached: list[tuple[Any, ...]], names: tuple[str, ...], stuff: set[int]
) -> dict[str, Any]:
    from streamseg.train.evaluate import coco_evaluate, detections_to_coco
    from streamseg.train.panoptic import SegmentationScores

    scores = SegmentationScores(len(names), stuff) if model.task == "panoptic" else None
    truths, detections = [], []
    for outputs, image_sizes, frame_sizes, truth in cached:
        with torch.inference_mode():
            results = model.postprocess(outputs, image_sizes, frame_sizes)
        for gt, inst in zip(truth, results, strict=True):
            truths.append(gt)
            detections += detections_to_coco(gt.image_id, inst)
            if scores is not None and gt.segments is not None:
                scores.add(inst, gt.segments)
    result = coco_evaluate(truths, detections, names)
    out: dict[str, Any] = {
        "detections": len(detections),
        "box_AP": result["bbox"]["AP"],
        "mask_AP": result["segm"]["AP"],
        "mask_AP50": result["segm"]["AP50"],
    }
    if scores is not None:
        pq = scores.result()["panoptic"]
        out.update({k: pq[k] for k in ("PQ", "PQ_th", "PQ_st", "SQ_th", "RQ_th")})
    return out


def sweep(
    weights: str, urls: list[str], task: str, grid: list[dict[str, Any]], *, batch_size: int = 4
) -> list[dict[str, Any]]:
    """Each setting of ``grid`` (model attributes) with its figures on ``urls``."""
    from streamseg.models.trained import load_trained_model
    from streamseg.train.data import UnionDataset
    from streamseg.train.datasets import open_dataset

    dataset = UnionDataset([open_dataset(d, None) for d in urls])
    model, names = load_trained_model(weights, task=task)
    dataset.set_class_names(names)
    stuff_of = getattr(dataset, "stuff_labels", None)
    stuff = stuff_of() if stuff_of is not None else set()
    cached = _forward(model, dataset, batch_size)
    results = []
    for setting in grid:
        for key, value in setting.items():
            setattr(model, key, value)
        results.append({**setting, **_score(model, cached, names, stuff)})
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("weights")
    parser.add_argument("--data", action="append", required=True, help="synthetic:// URL (repeat)")
    parser.add_argument("--task", choices=("panoptic", "instance"), default="panoptic")
    parser.add_argument("--object", type=float, nargs="+", default=[0.8], help="object thresholds")
    parser.add_argument(
        "--overlap", type=float, nargs="+", default=[0.8], help="overlap thresholds"
    )
    parser.add_argument("--score", type=float, nargs="+", default=[0.05], help="score thresholds")
    parser.add_argument("--top", type=int, nargs="+", default=[100], help="detections_per_image")
    parser.add_argument("--batch-size", type=int, default=4)
    args = parser.parse_args()

    torch.set_num_threads(1)
    cpu0 = time.process_time()
    if args.task == "panoptic":
        grid = [
            {"object_mask_threshold": o, "overlap_threshold": v}
            for o, v in itertools.product(args.object, args.overlap)
        ]
    else:
        grid = [
            {"score_threshold": s, "detections_per_image": t}
            for s, t in itertools.product(args.score, args.top)
        ]
    for row in sweep(args.weights, args.data, args.task, grid, batch_size=args.batch_size):
        print(json.dumps(row), flush=True)
    cpu = round(time.process_time() - cpu0, 1)
    print(json.dumps({"weights": args.weights, "data": args.data, "cpu_s": cpu}))


if __name__ == "__main__":
    main()
