"""``streamseg export``: write an AOTInductor package of a model's dense parts.

Example::

    streamseg export --arch maskrcnn_small --weights model.pth --size 360x640 --batch 4 \\
        --out maskrcnn_small_360x640_b4.pt2

then in pipeline.yaml::

    model: {arch: maskrcnn_small, weights: model.pth, backend: aot,
            aot_package: maskrcnn_small_360x640_b4.pt2, batch_size: 4}

``--size`` is the camera frame size (the largest one served); the package's
input is that size after the model's resize and padding. The batch is
static: smaller batches are padded, larger ones run in chunks. Weights come
from the pipeline at run time, so the package serves any checkpoint of the
same arch and ``num_classes``. Exit codes: 0 written, 1 failed, 2 bad arguments.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from streamseg.cli import EXIT_OK, UsageError
from streamseg.cli.bench_model import parse_size
from streamseg.cli.options import add_arch, add_device, add_precision

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_arch(parser, required=True)
    parser.add_argument("--weights", help="checkpoint (default: random weights)")
    parser.add_argument("--size", required=True, help="frame size HEIGHTxWIDTH, e.g. 360x640")
    parser.add_argument("--batch", type=int, default=1, help="static frames per forward pass")
    parser.add_argument("--out", required=True, help="the package to write (.pt2)")
    add_precision(parser)
    add_device(parser)
    parser.add_argument("--channels-last", action="store_true", help="channels-last convs")
    parser.add_argument("--num-classes", type=int, help="classes with background (random weights)")
    parser.add_argument(
        "--parts",
        help="comma-separated dense parts to compile (default: all), e.g. backbone,rpn.head",
    )
    parser.add_argument("--min-size", type=int, help="the model's resize: shorter side")
    parser.add_argument("--max-size", type=int, help="the model's resize: longest side cap")
    parser.epilog = "exit codes: 0 written, 1 failed, 2 bad arguments"


def run(args: argparse.Namespace) -> int:
    from streamseg.models.checkpoint import CheckpointError
    from streamseg.segment import load_model
    from streamseg.segment.segmenter import resolve_device

    size = parse_size(args.size)
    if args.batch < 1:
        raise UsageError("--batch must be >= 1")
    if not args.out.endswith(".pt2"):
        raise UsageError(f"--out {args.out}: the package name must end in .pt2")
    if args.weights and not Path(args.weights).is_file():
        raise UsageError(f"--weights {args.weights} does not exist")
    from streamseg.models import class_options

    options: dict[str, Any] = {"score_threshold": 0.0}  # so the example batch reaches every head
    for name in ("min_size", "max_size"):
        if getattr(args, name) is not None:
            options[name] = getattr(args, name)
    options.update(class_options(args.arch, num_classes=args.num_classes))
    try:
        device = resolve_device(args.device, "aot")
        model, _ = load_model(args.arch, args.weights, options)
    except (ValueError, CheckpointError) as exc:
        raise UsageError(str(exc)) from None

    model = model.to(device)
    if args.channels_last:
        from streamseg.models.layout import to_channels_last

        model = to_channels_last(model)
    started = time.perf_counter()
    parts = [p.strip() for p in args.parts.split(",")] if args.parts else None
    try:
        info = _export(model, args, size, parts)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    report = {**info, "out": args.out, "compile_s": round(time.perf_counter() - started, 1)}
    print(json.dumps(report, indent=2))
    return EXIT_OK


def _export(model: Any, args: argparse.Namespace, size: tuple[int, int], parts: Any) -> Any:
    from streamseg.segment.backends.aot_export import export_package

    return export_package(
        model,
        arch=args.arch,
        frame_size=size,
        batch=args.batch,
        out=args.out,
        precision=args.precision,
        channels_last=args.channels_last,
        parts=parts,
    )
