#!/usr/bin/env python3
"""Follow each true thing of some scenes through a Mask2Former's panoptic merge.

``scripts/m2f_diagnose.py`` matches queries to the truth as training does;
this follows what inference does with them. For every true thing of the
scenes (eval forward at the checkpoint's input size, masks at frame size, the
checkpoint's ``object_mask_threshold`` / ``overlap_threshold``), the first
verdict that applies:

* ``no_good_mask``: no query's mask (``sigmoid >= 0.5``) has IoU > 0.5 with it;
* ``good_mask_but_no_object`` / ``..._other_class`` / ``..._below_threshold``:
  queries with a good mask exist but none has the thing's class above the
  threshold (what the best-IoU one of them says instead);
* ``dropped_by_merge_to_other_class`` / ``..._to_same_class`` /
  ``..._to_stuff`` / ``..._to_self``: a right query exists, but it loses
  its segment (it wins fewer than ``overlap_threshold`` of its own mask's
  pixels); who won most of the thing's pixels instead (``self``: the query
  won them but lost elsewhere);
* ``segment_iou_low``: it keeps a segment, of IoU <= 0.5 with the thing;
* ``found``: a segment of its class with IoU > 0.5 (a PQ true positive).

    PYTHONPATH=$PWD .venv/bin/python scripts/m2f_merge_probe.py models/panoptic_small.pth \\
        --data "synthetic://?seed=3001&width=256&height=192&objects=3&stuff=1&frames=8&stride=5"

prints one JSON object: the share of things per verdict (docs/mask2former.md).
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from typing import Any

import torch
from torch import Tensor


def _owner_kind(owners: list[int], query: int, labels: Tensor, is_thing: Tensor, cls: int) -> str:
    kinds = Counter(
        "self"
        if o == query
        else "stuff"
        if not bool(is_thing[int(labels[o])])
        else "same_class"
        if int(labels[o]) == cls
        else "other_class"
        for o in owners
    )
    return kinds.most_common(1)[0][0] if kinds else "nobody"


def _verdicts(model: Any, logits: Tensor, masks: Tensor, segments: Tensor) -> list[str]:
    """One verdict per true thing of one image (``masks``: frame-size probabilities)."""
    k = logits.shape[1] - 1
    probs, labels = logits.softmax(-1).max(-1)
    thr, overlap, is_thing = model.object_mask_threshold, model.overlap_threshold, model.is_thing
    kept = ((labels < k) & (probs > thr)).nonzero().flatten()
    owner = torch.full(masks.shape[1:], -1, dtype=torch.long)
    owned = torch.zeros(masks.shape[1:], dtype=torch.bool)
    has_segment: dict[int, bool] = {}
    if len(kept):
        m = masks[kept]
        local = (m * probs[kept][:, None, None]).argmax(0)
        owner, owned = kept[local], m.gather(0, local[None])[0] >= 0.5
        won = torch.bincount(local.flatten(), minlength=len(kept))
        area = torch.bincount(local[owned], minlength=len(kept))
        alone = (m >= 0.5).flatten(1).sum(1)
        for j, q in enumerate(kept.tolist()):
            has_segment[q] = bool(area[j] > 0 and alone[j] > 0 and won[j] >= overlap * alone[j])
    binary = masks >= 0.5
    out = []
    for t in segments[..., 1].unique().tolist():
        truth = segments[..., 1] == t
        cls = int(segments[..., 0][truth][0]) - 1
        if t == 0 or not bool(is_thing[cls]):
            continue
        inter = (binary & truth).flatten(1).sum(1).float()
        iou = inter / (binary | truth).flatten(1).sum(1).float().clamp(min=1)
        if float(iou.max()) <= 0.5:
            out.append("no_good_mask")
            continue
        right = (iou > 0.5) & (labels == cls) & (probs > thr)
        if not bool(right.any()):
            best = int(iou.argmax())
            said = int(labels[best])
            out.append(
                "good_mask_but_"
                + (
                    "no_object"
                    if said == k
                    else "other_class"
                    if said != cls
                    else "below_threshold"
                )
            )
            continue
        query = int(torch.where(right, iou, torch.zeros_like(iou)).argmax())
        if not has_segment.get(query, False):
            owners = owner[truth & owned].tolist()
            out.append("dropped_by_merge_to_" + _owner_kind(owners, query, labels, is_thing, cls))
            continue
        segment = (owner == query) & owned
        seg_iou = float((segment & truth).sum() / (segment | truth).sum())
        out.append("found" if seg_iou > 0.5 else "segment_iou_low")
    return out


def probe(weights: str, urls: list[str], **options: Any) -> dict[str, Any]:
    """The verdicts' shares over ``urls``; ``options``: build options over the checkpoint's."""
    from streamseg.models.mask2former.universal import resize_to_frame
    from streamseg.models.trained import load_trained_model
    from streamseg.segment.preprocess import preprocess
    from streamseg.train.data import UnionDataset
    from streamseg.train.datasets import open_dataset
    from streamseg.train.modeling import input_spec

    dataset = UnionDataset([open_dataset(u, None) for u in urls])
    model, names = load_trained_model(weights, **{"task": "panoptic", **options})
    dataset.set_class_names(names)
    spec = input_spec(model)
    verdicts: Counter[str] = Counter()
    for i in range(len(dataset)):
        segments = dataset.ground_truth(i).segments
        if segments is None:
            continue
        with torch.inference_mode():
            inputs = preprocess([dataset[i].image], spec, device="cpu")
            out = model(inputs.images, inputs.image_sizes)
            mask_logits = out["pred_masks"][0]
            padded = (mask_logits.shape[-2] * 4, mask_logits.shape[-1] * 4)
            sizes = (tuple(inputs.image_sizes[0]), tuple(inputs.frame_sizes[0]))
            masks = resize_to_frame(mask_logits, padded, *sizes).sigmoid()
            verdicts.update(_verdicts(model, out["pred_logits"][0], masks, segments))
    things = sum(verdicts.values())
    return {
        "weights": weights,
        "data": urls,
        "images": len(dataset),
        "things": things,
        "object_mask_threshold": model.object_mask_threshold,
        "overlap_threshold": model.overlap_threshold,
        "share": {k: round(v / max(things, 1), 4) for k, v in verdicts.most_common()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("weights")
    parser.add_argument("--data", action="append", required=True, help="synthetic:// URL (repeat)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    cpu0 = time.process_time()
    result = probe(args.weights, args.data)
    print(json.dumps({**result, "cpu_s": round(time.process_time() - cpu0, 1)}))


if __name__ == "__main__":
    main()
