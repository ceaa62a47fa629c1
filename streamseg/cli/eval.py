"""``streamseg eval --weights CKPT --data DATASET``: box and mask AP, PQ and mIoU as JSON.

``DATASET`` is a COCO instance JSON (images next to it, or ``--images``) or a
``synthetic://?seed=..&frames=N`` URL (a held-out scene made on the fly).
Ground-truth categories are matched to the model's classes by name. A
semantic or panoptic model (the checkpoint's task, or ``--task``) on data
with panoptic ground truth (``synthetic://?...&stuff=1``) also gets
``panoptic`` (PQ, SQ, RQ of all classes, things and stuff) and ``sem_seg``
(mIoU, pixel accuracy); see ``streamseg.train.evaluate``.

``streamseg eval --baseline OLD.pth NEW.pth --data DATASET`` (or ``--weights
NEW.pth``) evaluates both models on the same data and prints the comparison
(each model's metrics, per class, and the differences) as one JSON object on
stdout and as a table on stderr; see ``streamseg.train.compare``.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import Any

from streamseg.cli import EXIT_OK, UsageError
from streamseg.cli.options import add_arch, add_device, add_precision
from streamseg.models import TASKS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "checkpoint", nargs="?", default=None, help="checkpoint to evaluate (or --weights)"
    )
    parser.add_argument("--weights", default=None, help="checkpoint to evaluate")
    parser.add_argument(
        "--baseline",
        default=None,
        metavar="OLD",
        help="also evaluate this checkpoint (e.g. the one serving) on the same data and "
        "print both, per class, with the differences",
    )
    parser.add_argument("--per-class", action="store_true", help="add each class's box and mask AP")
    parser.add_argument(
        "--data",
        required=True,
        action="append",
        help="COCO JSON or synthetic://?seed=..&frames=N URL (repeat to evaluate on several)",
    )
    parser.add_argument("--images", default=None, help="image folder of a COCO JSON")
    add_arch(parser, help="architecture of a non-streamseg checkpoint")
    add_device(parser, "cpu or cuda (default: cpu)")
    add_precision(parser)
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--max-images", type=int, default=None, help="evaluate the first N images")
    parser.add_argument(
        "--score-threshold",
        type=float,
        default=0.05,
        help="keep detections above this score (COCO AP wants a low one; default 0.05)",
    )
    parser.add_argument(
        "--task",
        choices=tuple(TASKS),
        help="Mask2Former: evaluate as this task (default: the checkpoint's own)",
    )


def run(args: argparse.Namespace) -> int:
    from streamseg.train.data import DatasetError, UnionDataset
    from streamseg.train.datasets import open_dataset

    logging.basicConfig(level=logging.WARNING, format="%(name)s %(levelname)s: %(message)s")
    if (args.checkpoint is None) == (args.weights is None):
        raise UsageError("give the checkpoint to evaluate once: as an argument or --weights")
    weights = args.checkpoint or args.weights
    try:
        # Cheap, so dataset errors come before the model loads.
        dataset = UnionDataset([open_dataset(d, args.images) for d in args.data])
    except (DatasetError, FileNotFoundError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    data = args.data[0] if len(args.data) == 1 else args.data
    if args.baseline is None:
        result = _evaluate(weights, dataset, args, per_class=args.per_class, option="--weights")
        print(json.dumps({"weights": weights, "data": data, **result}))
        return EXIT_OK
    from streamseg.train.compare import compare, format_table

    old = _evaluate(args.baseline, dataset, args, per_class=True, option="--baseline")
    new = _evaluate(weights, dataset, args, per_class=True, option="--weights")
    both = compare(
        {"weights": args.baseline, "data": data, **old}, {"weights": weights, "data": data, **new}
    )
    print(format_table(both), file=sys.stderr)
    print(json.dumps(both))
    return EXIT_OK


def _evaluate(
    weights: str, dataset: Any, args: argparse.Namespace, *, per_class: bool, option: str
) -> dict[str, Any]:
    """One model's eval result on ``dataset`` (its categories matched to the model's by name)."""
    from streamseg.models.checkpoint import CheckpointError
    from streamseg.segment.loading import load_model
    from streamseg.train.evaluate import evaluate_model

    try:
        task = {"task": args.task} if args.task else {}
        options = {"score_threshold": args.score_threshold, **task}
        model, class_names = load_model(args.arch, weights, options)
    except CheckpointError as exc:  # what serve says of the same file
        raise UsageError(f"{option}: {exc}") from None
    except (FileNotFoundError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    missing = [n for n in dataset.native_class_names if n not in class_names]
    if missing:
        logging.getLogger("streamseg.train").warning(
            "%s has no class for %s; those ground-truth instances are ignored", weights, missing
        )
    dataset.set_class_names(class_names)
    model.to(args.device)
    result: dict[str, Any] = evaluate_model(
        model,
        dataset,
        class_names,
        batch_size=args.batch_size,
        device=args.device,
        precision=args.precision,
        max_images=args.max_images,
        per_class=per_class,
    )
    return result
