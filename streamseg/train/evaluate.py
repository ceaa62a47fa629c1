"""Box and mask AP on a COCO-style dataset with faster-coco-eval; PQ and mIoU.

``evaluate_model(model, dataset)`` runs a model (eval mode, at the sizes of
its ``input_spec``, as ``serve`` would) over every image and returns::

    {"bbox": {"AP": .., "AP50": .., "AP75": .., "APs": .., "APm": .., "APl": ..},
     "segm": {...}, "images": N, "instances": M, "detections": D}

AP values are in ``[0, 1]`` (COCO's 0.50:0.95 IoU average); a metric with no
ground truth to score reads ``-1``. A semantic or panoptic model (``task``)
on a dataset with panoptic ground truth (synthetic scenes with stuff) also
gets ``"panoptic"`` (PQ, SQ, RQ; of things and of stuff) and ``"sem_seg"``
(mIoU, pixel accuracy), see :mod:`streamseg.train.panoptic`; a semantic
model gets no AP (it finds no instances).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor, nn

from streamseg.models import InputSpec
from streamseg.ops import masks_to_rle
from streamseg.segment.precision import autocast
from streamseg.segment.preprocess import preprocess
from streamseg.train.data import DetectionDataset, GroundTruth
from streamseg.train.modeling import input_spec
from streamseg.types import Instances

if TYPE_CHECKING:
    from streamseg.train.panoptic import SegmentationScores

__all__ = ["coco_evaluate", "detections_to_coco", "evaluate_model", "predict"]

log = logging.getLogger("streamseg.train")
_STAT_NAMES = ("AP", "AP50", "AP75", "APs", "APm", "APl")


def coco_evaluate(
    ground_truth: Sequence[GroundTruth],
    detections: Sequence[dict[str, Any]],
    class_names: Sequence[str],
    *,
    per_class: bool = False,
) -> dict[str, Any]:
    """COCO AP of ``detections`` (COCO result dicts) against ``ground_truth``.

    Args:
        ground_truth: one entry per evaluated image.
        detections: ``{"image_id", "category_id", "bbox" (xywh), "score",
            "segmentation" (RLE)}`` dicts; ``category_id`` is a training label.
        class_names: training class names, ``__background__`` first.
        per_class: also give ``"per_class"``: ``{name: {"instances": n,
            "bbox": AP, "segm": AP}}`` (COCO's 0.50:0.95 AP of that class
            alone, all sizes, 100 detections; -1 without ground truth).
    """
    from faster_coco_eval import COCO, COCOeval_faster

    gt = _gt_dict(ground_truth, class_names)
    result: dict[str, Any] = {
        "images": len(ground_truth),
        "instances": sum(1 for a in gt["annotations"] if not a["iscrowd"]),
        "detections": len(detections),
    }
    if not gt["annotations"]:
        log.warning("evaluation data has no annotations: AP is undefined (-1)")
    coco_gt = COCO(gt)
    coco_dt = coco_gt.loadRes([dict(d) for d in detections])
    classes: dict[str, dict[str, Any]] = {}
    if per_class:
        for cat in gt["categories"]:
            count = sum(
                1 for a in gt["annotations"] if a["category_id"] == cat["id"] and not a["iscrowd"]
            )
            classes[cat["name"]] = {"instances": count}
    for iou_type in ("bbox", "segm"):
        ev = COCOeval_faster(coco_gt, coco_dt, iouType=iou_type, print_function=_quiet)
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
        stats = [float(s) for s in ev.stats[: len(_STAT_NAMES)]]
        result[iou_type] = {n: round(v, 6) for n, v in zip(_STAT_NAMES, stats, strict=True)}
        if per_class:
            for cat, ap in zip(gt["categories"], _class_ap(ev), strict=True):
                classes[cat["name"]][iou_type] = ap
    if per_class:
        result["per_class"] = classes
    return result


def _class_ap(ev: Any) -> list[float]:
    """Per category (in ``params.catIds`` order): the mean precision over IoU
    thresholds and recall points, all areas, the most detections; -1: no truth."""
    precision = ev.eval["precision"]  # (IoU thresholds, recalls, classes, areas, max dets)
    out = []
    for k in range(precision.shape[2]):
        values = precision[:, :, k, 0, -1]
        values = values[values > -1]
        out.append(round(float(values.mean()), 6) if values.size else -1.0)
    return out


def _quiet(*_: Any, **__: Any) -> None:
    return None


def _gt_dict(ground_truth: Sequence[GroundTruth], class_names: Sequence[str]) -> dict[str, Any]:
    images: list[dict[str, Any]] = []
    annotations: list[dict[str, Any]] = []
    for gt in ground_truth:
        images.append({"id": gt.image_id, "height": gt.height, "width": gt.width})
        for ann in gt.annotations:
            annotations.append({**ann, "id": len(annotations) + 1, "image_id": gt.image_id})
    categories = [{"id": i, "name": n} for i, n in enumerate(class_names) if i > 0]
    return {"images": images, "annotations": annotations, "categories": categories}


def detections_to_coco(image_id: int, instances: Instances) -> list[dict[str, Any]]:
    """One image's ``Instances`` -> COCO result dicts (boxes ``xywh``, RLE masks)."""
    inst = instances.to("cpu")
    out = []
    masks = inst.frame_masks()
    rles = masks_to_rle(masks) if masks is not None and len(inst) else []
    for i in range(len(inst)):
        x1, y1, x2, y2 = (float(v) for v in inst.boxes[i])
        det: dict[str, Any] = {
            "image_id": int(image_id),
            "category_id": int(inst.labels[i]),
            "bbox": [x1, y1, x2 - x1, y2 - y1],
            "score": float(inst.scores[i]),
        }
        if rles:
            det["segmentation"] = rles[i]
        out.append(det)
    return out


def predict(
    model: nn.Module,
    images: Iterable[tuple[int, Tensor]],
    *,
    batch_size: int = 2,
    device: torch.device | str = "cpu",
    precision: str = "fp32",
) -> Iterator[tuple[int, Instances]]:
    """Run ``model`` (eval mode) over ``(image_id, uint8 (H, W, 3))`` pairs.

    Images go through :func:`~streamseg.segment.preprocess.preprocess`
    (``model.input_spec``), the Segmenter's own preprocessing, so what is
    measured is what ``serve`` runs; the returned instances are at each
    image's own resolution.
    """
    spec = input_spec(model)
    was_training = model.training
    model.eval()
    try:
        batch: list[tuple[int, Tensor]] = []
        for item in images:
            batch.append(item)
            if len(batch) == batch_size:
                yield from _predict_batch(model, spec, batch, device, precision)
                batch = []
        if batch:
            yield from _predict_batch(model, spec, batch, device, precision)
    finally:
        model.train(was_training)


def _predict_batch(
    model: nn.Module,
    spec: InputSpec,
    batch: list[tuple[int, Tensor]],
    device: torch.device | str,
    precision: str,
) -> list[tuple[int, Instances]]:
    with torch.inference_mode():
        inputs = preprocess([im for _, im in batch], spec, device=device)
        with autocast(device, precision):
            outputs = model(inputs.images, inputs.image_sizes)
        postprocess: Any = model.postprocess
        results = postprocess(outputs, inputs.image_sizes, inputs.frame_sizes)
    return [(image_id, inst) for (image_id, _), inst in zip(batch, results, strict=True)]


def evaluate_model(
    model: nn.Module,
    dataset: DetectionDataset,
    class_names: Sequence[str],
    *,
    batch_size: int = 2,
    device: torch.device | str = "cpu",
    precision: str = "fp32",
    max_images: int | None = None,
    per_class: bool = False,
) -> dict[str, Any]:
    """Box and mask AP of ``model`` on ``dataset`` (see the module docstring);
    with ``per_class``, each class's too (:func:`coco_evaluate`)."""
    n = len(dataset) if max_images is None else min(max_images, len(dataset))
    ground_truth: list[GroundTruth] = []
    segments: dict[int, Tensor] = {}  # image id -> panoptic truth, until its prediction comes

    def pairs() -> Iterator[tuple[int, Tensor]]:
        for i in range(n):
            image = dataset[i].image
            ground_truth.append(dataset.ground_truth(i))  # synthetic: reuses the frame just made
            if scores is not None and ground_truth[-1].segments is not None:
                segments[ground_truth[-1].image_id] = ground_truth[-1].segments
            yield ground_truth[-1].image_id, image

    task = getattr(model, "task", "instance")
    scores = _segmentation_scores(dataset, class_names) if task != "instance" else None
    detections: list[dict[str, Any]] = []
    for image_id, inst in predict(
        model, pairs(), batch_size=batch_size, device=device, precision=precision
    ):
        detections += detections_to_coco(image_id, inst)
        truth = segments.pop(image_id, None)
        if scores is not None and truth is not None:
            scores.add(inst, truth)
    result = coco_evaluate(ground_truth, detections, class_names, per_class=per_class)
    if task == "semantic":
        result = {k: v for k, v in result.items() if k not in ("bbox", "segm", "per_class")}
    if scores is not None:
        if not scores.images:
            log.warning("the evaluation data has no panoptic ground truth: no PQ / mIoU")
        else:
            result.update(scores.result())
    return result


def _segmentation_scores(
    dataset: DetectionDataset, class_names: Sequence[str]
) -> SegmentationScores:
    """PQ / mIoU counters with the dataset's stuff classes (by name) as stuff."""
    from streamseg.train.panoptic import SegmentationScores

    stuff_of = getattr(dataset, "stuff_labels", None)
    stuff = stuff_of() if stuff_of is not None else set()
    return SegmentationScores(len(class_names), stuff)
