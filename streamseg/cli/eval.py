"""``streamseg eval --weights CKPT --data DATASET``: box and mask AP, PQ and mIoU as JSON.

``DATASET`` is a COCO instance JSON (images next to it, or ``--images``) or a
``synthetic://?seed=..&frames=N`` URL (a held-out scene made on the fly).
Ground-truth categories are matched to the model's classes by name. A
semantic or panoptic model (the checkpoint's task, or ``--task``) on data
with panoptic ground truth (``synthetic://?...&stuff=1``) also gets
``panoptic`` (PQ, SQ, RQ of all classes, things and stuff) and ``sem_seg``
(mIoU, pixel accuracy); see ``streamseg.train.evaluate``.
"""

from __future__ import annotations

import argparse
import json
import logging

from streamseg.cli import EXIT_OK, UsageError
from streamseg.models import ARCHITECTURES, PRECISIONS, TASKS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--weights", required=True, help="checkpoint to evaluate")
    parser.add_argument(
        "--data",
        required=True,
        action="append",
        help="COCO JSON or synthetic://?seed=..&frames=N URL (repeat to evaluate on several)",
    )
    parser.add_argument("--images", default=None, help="image folder of a COCO JSON")
    parser.add_argument(
        "--arch",
        default=None,
        choices=tuple(ARCHITECTURES),
        help="architecture of a non-streamseg checkpoint",
    )
    parser.add_argument("--device", default="cpu", help="cpu or cuda (default: cpu)")
    parser.add_argument("--precision", choices=tuple(PRECISIONS), default="fp32")
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
    from streamseg.models.checkpoint import CheckpointError
    from streamseg.models.trained import load_trained_model
    from streamseg.train.data import DatasetError, UnionDataset
    from streamseg.train.datasets import open_dataset
    from streamseg.train.evaluate import evaluate_model

    logging.basicConfig(level=logging.WARNING, format="%(name)s %(levelname)s: %(message)s")
    try:
        # Cheap, so dataset errors come before the model loads.
        dataset = UnionDataset([open_dataset(d, args.images) for d in args.data])
        task = {"task": args.task} if args.task else {}
        model, class_names = load_trained_model(
            args.weights, arch=args.arch, score_threshold=args.score_threshold, **task
        )
    except CheckpointError as exc:  # what serve says of the same file
        raise UsageError(f"--weights: {exc}") from None
    except (DatasetError, FileNotFoundError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    missing = [n for n in dataset.native_class_names if n not in class_names]
    if missing:
        logging.getLogger("streamseg.train").warning(
            "the model has no class for %s; those ground-truth instances are ignored", missing
        )
    dataset.set_class_names(class_names)
    model.to(args.device)
    result = evaluate_model(
        model,
        dataset,
        class_names,
        batch_size=args.batch_size,
        device=args.device,
        precision=args.precision,
        max_images=args.max_images,
    )
    data = args.data[0] if len(args.data) == 1 else args.data
    result = {"weights": args.weights, "data": data, **result}
    print(json.dumps(result))
    return EXIT_OK
