"""streamseg's R50-FPN against torchvision's on a GPU: parity, then time side by side.

Run by ``scripts/gpu-check.sh`` (one process per step)::

    python -m streamseg.bench.versus parity --out parity.json [--weights W.pth]
    python -m streamseg.bench.versus timing --out timing.json [--budget 150]

Both build the two models with the same weights (:func:`parity_weights`
unless ``--weights`` names a torchvision checkpoint) on the same 1080p
frames (the synthetic scene, already on the GPU). streamseg runs as
``serve`` runs it (the :class:`Segmenter`: its preprocessing, dense part,
post-processing on the Triton kernels), torchvision as its model's
``forward`` on float frames in ``[0, 1]``.

``parity``: see :mod:`streamseg.bench.parity`. ``timing``: median
milliseconds per batch, both libraries alternated batch by batch, for
batch 1 and 8, fp32 and bf16, eager; then inductor (streamseg's
``backend: inductor``; torchvision's backbone under ``torch.compile``,
its dynamic post-processing eager) as long as the budget lasts, bf16
batch 8 first. The JSON file is rewritten after every measurement (and
names the one under way), so a run killed at its limit keeps what it
measured. Exit codes: 0 done (even where a goal was missed), 1 a parity
check failed, 2 no GPU or no torchvision.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from streamseg.bench.parity import (
    Detections,
    compare_finds,
    compare_same,
    fp32_precision,
    parity_weights,
    torchvision_maskrcnn,
)

__all__ = ["main"]

ARCH = "maskrcnn_r50_fpn"
GOALS = {"fp32_b1_eager_vs_torchvision": 0.8, "bf16_b8_inductor_fps": 150.0}


class Report:
    """A JSON object written to ``path`` (atomically) on every change."""

    def __init__(self, path: Path, **fields: Any) -> None:
        self.path, self.data = path, dict(fields)
        self.started = time.monotonic()
        self.write()

    def update(self, **fields: Any) -> None:
        self.data.update(fields)
        self.data["elapsed_s"] = round(time.monotonic() - self.started, 1)
        self.write()

    def write(self) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(self.data, indent=1, default=str))
        os.replace(tmp, self.path)


def frames(count: int, device: torch.device) -> list[torch.Tensor]:
    """``count`` 1080p frames of the synthetic scene: ``uint8 (1080, 1920, 3)`` on ``device``."""
    from streamseg.synthetic.scene import SyntheticScene

    scene = SyntheticScene(seed=21, height=1080, width=1920)
    return [scene.frame(5 * i).image.to(device) for i in range(count)]


class Pair:
    """The two models with one set of weights, on ``device``."""

    def __init__(self, device: torch.device, weights: str | None, workdir: Path) -> None:
        from streamseg.models import build_model

        state = (
            torch.load(weights, map_location="cpu", weights_only=True)
            if weights
            else parity_weights(build_model(ARCH).state_dict())
        )
        self.path = workdir / "weights.pth"
        torch.save(state, self.path)
        self.device = device
        self.torchvision = torchvision_maskrcnn(state).to(device)

    def streamseg(self, precision: str = "fp32", backend: str = "eager") -> Any:
        from streamseg.segment import Segmenter

        return Segmenter(
            arch=ARCH, weights=str(self.path), device=str(self.device),
            precision=precision, backend=backend,
        )  # fmt: skip

    def run_torchvision(self, images: list[torch.Tensor], precision: str) -> list[dict[str, Any]]:
        x = [img.permute(2, 0, 1).float().div_(255) for img in images]
        dtype = torch.bfloat16 if precision == "bf16" else torch.float32
        with torch.inference_mode(), torch.autocast("cuda", dtype, enabled=precision != "fp32"):
            out: list[dict[str, Any]] = self.torchvision(x)
        return out


def _segment(segmenter: Any, images: list[torch.Tensor]) -> Any:
    return segmenter.segment(_batch(images))


def _batch(images: list[torch.Tensor]) -> Any:
    from streamseg.types import Frame, FrameBatch

    return FrameBatch(tuple(Frame("cam", i, 0.0, 0.0, img) for i, img in enumerate(images)))


def run_parity(pair: Pair, images: list[torch.Tensor], report: Report, real: bool) -> bool:
    """The comparisons of :mod:`streamseg.bench.parity`, per frame; whether they passed."""
    ours: dict[str, list[Detections]] = {}
    theirs: dict[str, list[Detections]] = {}
    for name, precision, mode in (("ieee", "fp32", "ieee"), ("bf16", "bf16", "ieee"),
                                  ("defaults", "fp32", None)):  # fmt: skip
        report.update(running=f"{name}: both models")
        with fp32_precision(mode) if mode else contextlib.nullcontext():
            seg = pair.streamseg(precision)
            ours[name] = [Detections.from_instances(r) for r in seg.segment(_batch(images))]
            theirs[name] = [
                Detections.from_torchvision(o) for o in pair.run_torchvision(images, precision)
            ]
        torch.cuda.synchronize()

    def each(
        compare: Callable[..., dict[str, Any]], a: list[Detections], b: list[Detections]
    ) -> list[dict[str, Any]]:
        return [compare(x, y) for x, y in zip(a, b, strict=True)]

    results = {
        "fp32_tf32_off": each(compare_same, theirs["ieee"], ours["ieee"]),
        "bf16_finds_fp32": each(compare_finds, ours["ieee"], ours["bf16"]),
        "torchvision_bf16_finds_fp32": each(compare_finds, theirs["ieee"], theirs["bf16"]),
        "fp32_defaults": each(compare_same, theirs["defaults"], ours["defaults"]),
    }
    same = all(r["passed"] for r in results["fp32_tf32_off"])
    finds = all(r["passed"] for r in results["bf16_finds_fp32"])
    verdict: dict[str, Any] = {"fp32_tf32_off": same, "bf16_finds_fp32": finds if real else None}
    if not real:
        verdict["bf16_note"] = (
            "not judged with random weights: their detections have no margin for bf16's "
            "rounding (streamseg's own bf16 misses them on the CPU too); pass --weights"
        )
    report.update(running=None, results=results, verdict=verdict)
    return same and (finds or not real)


def _timed_ms(fn: Callable[[], object], device: torch.device) -> float:
    torch.cuda.synchronize(device)
    start = time.perf_counter()
    fn()
    torch.cuda.synchronize(device)
    return (time.perf_counter() - start) * 1000


def time_pair(
    ours: Callable[[], object], theirs: Callable[[], object], device: torch.device, iters: int
) -> dict[str, Any]:
    """Both warmed up (compiled) once, then timed alternately: median ms per batch each."""
    warm = [_timed_ms(f, device) for f in (ours, theirs)]
    a, b = [], []
    for _ in range(iters):
        a.append(_timed_ms(ours, device))
        b.append(_timed_ms(theirs, device))
    ma, mb = statistics.median(a), statistics.median(b)
    return {
        "streamseg_ms": round(ma, 2), "torchvision_ms": round(mb, 2),
        "ratio": round(ma / mb, 3), "warmup_s": [round(w / 1000, 1) for w in warm],
    }  # fmt: skip


def run_timing(pair: Pair, images: list[torch.Tensor], report: Report, budget: float) -> None:
    """Eager for every size and precision, then inductor while the budget lasts."""
    deadline = time.monotonic() + budget
    rows: list[dict[str, Any]] = []
    configs = [(b, p, "eager") for p in ("fp32", "bf16") for b in (1, 8)]
    configs += [(8, "bf16", "inductor"), (1, "fp32", "inductor")]
    compile_s = 0.0
    for batch, precision, backend in configs:
        name = f"{precision}_b{batch}_{backend}"
        left = deadline - time.monotonic()
        if backend == "inductor" and left < max(60.0, 1.5 * compile_s):
            rows.append({"config": name, "skipped": f"{left:.0f} s left of the budget"})
            report.update(rows=rows)
            continue
        report.update(running=name, running_since_s=round(budget - left, 1), rows=rows)
        seg = pair.streamseg(precision, backend)
        theirs = pair.torchvision
        if backend == "inductor":
            theirs.backbone = torch.compile(theirs.backbone, dynamic=False)  # type: ignore[arg-type,assignment]
        batch_images = (images * 8)[:batch]
        row = time_pair(
            functools.partial(_segment, seg, batch_images),
            functools.partial(pair.run_torchvision, batch_images, precision),
            pair.device,
            iters=10 if batch == 8 else 20,
        )
        compile_s = max(compile_s, *row["warmup_s"]) if backend == "inductor" else compile_s
        row.update(config=name, streamseg_fps=round(batch * 1000 / row["streamseg_ms"], 1))
        rows.append(row)
        report.update(rows=rows, goals=_goals(rows))
    report.update(running=None, rows=rows, goals=_goals(rows))


def _goals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    by = {r["config"]: r for r in rows if "ratio" in r}
    out: dict[str, Any] = {}
    if "fp32_b1_eager" in by:
        ratio = by["fp32_b1_eager"]["ratio"]
        out["fp32_b1_eager_vs_torchvision"] = {
            "ratio": ratio, "goal": f"<= {GOALS['fp32_b1_eager_vs_torchvision']}",
            "met": ratio <= GOALS["fp32_b1_eager_vs_torchvision"],
        }  # fmt: skip
    if "bf16_b8_inductor" in by:
        fps = by["bf16_b8_inductor"]["streamseg_fps"]
        out["bf16_b8_inductor_fps"] = {
            "fps": fps, "goal": f">= {GOALS['bf16_b8_inductor_fps']}",
            "met": fps >= GOALS["bf16_b8_inductor_fps"],
        }  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("step", choices=("parity", "timing"))
    parser.add_argument("--out", type=Path, required=True, help="the JSON file to (re)write")
    parser.add_argument("--weights", help="a torchvision maskrcnn_resnet50_fpn checkpoint")
    parser.add_argument("--frames", type=int, default=2, help="1080p frames to compare")
    parser.add_argument("--budget", type=float, default=150.0, help="timing: seconds in all")
    args = parser.parse_args(argv)
    report = Report(args.out, step=args.step, weights=args.weights or "parity_weights (random)")
    if not torch.cuda.is_available():
        report.update(error="no CUDA GPU")
        return 2
    try:
        import torchvision
    except ImportError as exc:
        report.update(skipped=f"torchvision is not installed ({exc})")
        return 2
    device = torch.device("cuda")
    report.update(gpu=torch.cuda.get_device_name(0), torch=torch.__version__,
                  torchvision=torchvision.__version__)  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        pair = Pair(device, args.weights, Path(tmp))
        images = frames(max(args.frames, 1), device)
        if args.step == "parity":
            return 0 if run_parity(pair, images, report, real=bool(args.weights)) else 1
        run_timing(pair, images, report, args.budget)
        from streamseg import ops

        report.update(ops_on_reference=ops.reference_ops())
    return 0


if __name__ == "__main__":
    sys.exit(main())
