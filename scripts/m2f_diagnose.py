#!/usr/bin/env python3
"""Why do a Mask2Former checkpoint's thing queries (not) learn? Measure it.

For a trained Mask2Former and some scenes (the training scenes, at the
training input size, without augmentation) this runs the model's training
view (every decoder prediction), matches queries to the ground truth with the
model's own Hungarian matcher, and reports per decoder layer:

* ``queries_matched``: how many distinct queries get matched to a thing, and
  the share of thing matches the 5 most used queries take (a few
  specialised queries, or all of them?);
* ``p_target``: the matched queries' probability of their target's class
  (median, and the share above 0.5 and above ``object_mask_threshold``),
  and ``p_no_object`` of the same queries;
* ``mask_iou``: the matched queries' mask IoU with their target (mask logits
  upsampled to the input, ``> 0``), median and share above 0.5, and for
  things the IoU with all the image's things of the target's class (high
  when a query segments its class rather than one instance);
* for the matched things whose mask is good (IoU > 0.5), what the panoptic
  merge's class rule makes of their query: kept (its best class is the
  target's, above ``object_mask_threshold``), below the threshold, another
  class, or "no object";
* ``class_loss``: the share of the weighted cross-entropy summed over all
  queries that the queries whose target is "no object" take, and the share
  matched things and matched stuff take;

things and stuff apart. Then object sizes: each thing's area in input pixels
and in cells of the mask features (stride 4) and of the coarsest level the
masked attention reads (stride 32).

    PYTHONPATH=$PWD .venv/bin/python scripts/m2f_diagnose.py models/panoptic_tiny.pth \\
        --data "synthetic://?seed=201&width=256&height=192&objects=4&stuff=1" --images 24

prints one JSON object (docs/mask2former.md quotes it).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import Counter
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 4) if values else None


def _share(values: list[float], threshold: float) -> float | None:
    return round(sum(v > threshold for v in values) / len(values), 4) if values else None


def _batches(model: Any, names: tuple[str, ...], urls: list[str], images: int, batch: int) -> Any:
    from streamseg.train.data import SyntheticDataset, UnionDataset
    from streamseg.train.transforms import TrainTransform, train_batch

    data = UnionDataset([SyntheticDataset(u, frames=images, stride=5) for u in urls])
    data.set_class_names(names)
    spec = model.input_spec
    transform = TrainTransform(min_sizes=(spec.min_size,), max_size=spec.max_size, hflip_prob=0)
    indices = [i for i in range(len(data)) if data.has_instances(i)]
    for start in range(0, len(indices), batch):
        samples = [transform(data[i], torch.Generator()) for i in indices[start : start + batch]]
        yield train_batch(samples, spec)


class _Layer:
    """Accumulated figures of one decoder prediction."""

    def __init__(self) -> None:
        self.p_target: dict[str, list[float]] = {"thing": [], "stuff": []}
        self.p_empty: dict[str, list[float]] = {"thing": [], "stuff": []}
        self.iou: dict[str, list[float]] = {"thing": [], "stuff": []}
        self.iou_class: list[float] = []  # thing masks against all things of their class
        # matched things with a good mask (IoU > 0.5): what the query's class says
        self.verdicts: Counter[str] = Counter()
        self.thing_queries: Counter[int] = Counter()
        self.loss = {"no_object": 0.0, "thing": 0.0, "stuff": 0.0}
        self.p_empty_unmatched: list[float] = []

    def report(self, threshold: float) -> dict[str, Any]:
        total = sum(self.loss.values()) or 1.0
        n = sum(self.thing_queries.values())
        top5 = sum(c for _, c in self.thing_queries.most_common(5))
        out: dict[str, Any] = {
            "thing_matches": n,
            "queries_matched_to_things": len(self.thing_queries),
            "top5_queries_share_of_thing_matches": round(top5 / n, 4) if n else None,
            "class_loss_share": {k: round(v / total, 4) for k, v in self.loss.items()},
            "unmatched_p_no_object_median": _median(self.p_empty_unmatched),
        }
        for kind in ("thing", "stuff"):
            out[kind] = {
                "p_target_median": _median(self.p_target[kind]),
                "p_target_gt_0.5": _share(self.p_target[kind], 0.5),
                f"p_target_gt_{threshold}": _share(self.p_target[kind], threshold),
                "p_no_object_median": _median(self.p_empty[kind]),
                "mask_iou_median": _median(self.iou[kind]),
                "mask_iou_gt_0.5": _share(self.iou[kind], 0.5),
            }
        out["thing"]["mask_iou_with_all_of_its_class_median"] = _median(self.iou_class)
        good = sum(self.verdicts.values())
        out["thing"]["good_masks"] = good
        out["thing"]["good_masks_by_class_verdict"] = {
            k: round(v / good, 4) for k, v in sorted(self.verdicts.items())
        }
        return out


def _mask_ious(
    mask_logits: Tensor, targets: Tensor, padded: tuple[int, int], image: tuple[int, int]
) -> Tensor:
    """IoU of ``mask_logits (N, h, w)`` upsampled to ``padded`` (``> 0``) with
    ``targets (N, *padded)``, inside the ``image`` part (no padding)."""
    up = F.interpolate(mask_logits[None], size=padded, mode="bilinear", align_corners=False)[0]
    pred = up[:, : image[0], : image[1]] > 0
    tgt = targets[:, : image[0], : image[1]] > 0.5
    inter = (pred & tgt).flatten(1).sum(1).float()
    union = (pred | tgt).flatten(1).sum(1).float().clamp(min=1)
    return inter / union


def _verdict(probs: Tensor, label: int, threshold: float) -> str:
    """What the panoptic merge's class rule makes of a query (``probs (K+1,)``)."""
    best = int(probs.argmax())
    if best == probs.shape[0] - 1:
        return "no_object"
    if best != label:
        return "other_class"
    return "kept" if float(probs[best]) > threshold else "below_threshold"


def _accumulate(
    model: Any, layers: list[_Layer], batch: Any, sizes: dict[str, list[float]]
) -> None:
    images, image_sizes, raw_targets = batch
    padded = (int(images.shape[-2]), int(images.shape[-1]))
    targets = [model._target(t, padded, i) for i, t in enumerate(raw_targets)]
    is_thing = model.is_thing
    criterion = model.criterion
    threshold = float(model.object_mask_threshold)
    predictions = model.predictions(images)
    for layer, (logits, masks) in zip(layers, predictions, strict=True):
        probs = logits.float().softmax(-1)
        matches = criterion.match(logits, masks, targets)
        wanted = torch.full(logits.shape[:2], criterion.num_classes, dtype=torch.int64)
        kind_of = torch.zeros(logits.shape[:2], dtype=torch.int64)  # 0 empty, 1 thing, 2 stuff
        for b, ((labels, tmasks), (rows, cols)) in enumerate(zip(targets, matches, strict=True)):
            wanted[b, rows] = labels[cols]
            things = is_thing[labels[cols]]
            kind_of[b, rows] = torch.where(things, 1, 2)
            image = (int(image_sizes[b][0]), int(image_sizes[b][1]))
            ious = _mask_ious(masks[b, rows].float(), tmasks[cols], padded, image)
            same = labels[cols][:, None] == labels[None, :]  # (matched, targets)
            of_class = (same[:, :, None, None] * tmasks[None]).amax(1)
            class_ious = _mask_ious(masks[b, rows].float(), of_class, padded, image)
            layer.iou_class += class_ious[things].tolist()
            for q, t, thing, iou in zip(rows, cols, things, ious, strict=True):
                kind = "thing" if bool(thing) else "stuff"
                layer.p_target[kind].append(float(probs[b, q, labels[t]]))
                layer.p_empty[kind].append(float(probs[b, q, -1]))
                layer.iou[kind].append(float(iou))
                if kind == "thing":
                    layer.thing_queries[int(q)] += 1
                    if float(iou) > 0.5:
                        layer.verdicts[_verdict(probs[b, q], int(labels[t]), threshold)] += 1
        ce = F.cross_entropy(logits.float().transpose(1, 2), wanted, reduction="none")
        ce = ce * criterion.empty_weight[wanted]
        for name, code in (("no_object", 0), ("thing", 1), ("stuff", 2)):
            layer.loss[name] += float(ce[kind_of == code].sum())
        layer.p_empty_unmatched += probs[..., -1][kind_of == 0].tolist()
    for labels, tmasks in targets:
        area = tmasks.flatten(1).sum(1)[is_thing[labels]]
        sizes["area_px"] += area.tolist()


def _size_report(areas: list[float]) -> dict[str, Any]:
    sides = sorted(a**0.5 for a in areas)
    if not sides:
        return {}
    q = statistics.quantiles(sides, n=10) if len(sides) > 1 else [sides[0]] * 9
    return {
        "things": len(sides),
        "side_px": {"p10": round(q[0], 1), "median": round(q[4], 1), "p90": round(q[8], 1)},
        "side_in_mask_feature_cells_stride4": round(q[4] / 4, 2),
        "side_in_coarsest_attention_cells_stride32": round(q[4] / 32, 2),
        "share_under_4x4_mask_cells": round(sum(s < 16 for s in sides) / len(sides), 4),
    }


def diagnose(weights: str, urls: list[str], images: int, batch: int) -> dict[str, Any]:
    from streamseg.models.trained import load_trained_model

    torch.manual_seed(0)
    model: Any
    model, names = load_trained_model(weights)
    model.eval()
    layers: list[_Layer] | None = None
    sizes: dict[str, list[float]] = {"area_px": []}
    with torch.no_grad():
        for b in _batches(model, names, urls, images, batch):
            if layers is None:
                layers = [_Layer() for _ in model.predictions(b[0][:1])]
            _accumulate(model, layers, b, sizes)
    assert layers is not None, "no image with instances"
    thr = float(model.object_mask_threshold)
    return {
        "weights": weights,
        "data": urls,
        "input": {"min_size": model.input_spec.min_size, "max_size": model.input_spec.max_size},
        "num_queries": int(model.model.config.num_queries),
        "no_object_weight": float(model.criterion.empty_weight[-1]),
        "layers": [layer.report(thr) for layer in layers],
        "object_size": _size_report(sizes["area_px"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("weights")
    parser.add_argument("--data", action="append", required=True, help="synthetic:// URL")
    parser.add_argument("--images", type=int, default=12, help="frames per scene (stride 5)")
    parser.add_argument("--batch", type=int, default=4)
    args = parser.parse_args()
    torch.set_num_threads(1)
    start, cpu = time.perf_counter(), time.process_time()
    out = diagnose(args.weights, args.data, args.images, args.batch)
    out["wall_s"] = round(time.perf_counter() - start, 1)
    out["cpu_s"] = round(time.process_time() - cpu, 1)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
