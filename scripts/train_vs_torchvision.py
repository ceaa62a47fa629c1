#!/usr/bin/env python3
"""streamseg's R50-FPN Mask R-CNN training step against torchvision's, side by side.

torchvision's C++ ops need the torch they were built for, so this runs in a
virtual environment of its own with the checkout on ``PYTHONPATH``:

    python3 -m venv /work/tv-venv && /work/tv-venv/bin/pip install \\
        torch==2.14.1 torchvision==0.29.1 numpy pyyaml
    OMP_NUM_THREADS=1 PYTHONPATH=. nice -n 5 /work/tv-venv/bin/python \\
        scripts/train_vs_torchvision.py --size 800 --rounds 5 > tv.json

Both models are built in one process: torchvision's ``maskrcnn_resnet50_fpn``
as its builder makes it for COCO weights (``FrozenBatchNorm2d``, the three
last ResNet stages trainable) and streamseg's ``maskrcnn_r50_fpn`` with
``freeze_backbone_stages(2)`` (the same trainable parameters), both with the
weights of :func:`streamseg.bench.parity.parity_weights` (torchvision's state
dict copied into ours as it is: the key names are the same). Both get the same
2 synthetic images (already normalised and padded: torchvision's transform is
bypassed, as our trainer's preprocessing is outside the step) and targets,
and an SGD step each (momentum 0.9, weight decay 1e-4, lr 1e-4: torchvision's
reference recipe on its side, our trainer's ``build_optimizer`` on ours).
``--channels-last`` times ours channels-last (its ``solver.channels_last``).
Our C++ RoIAlign/NMS/box kernels are built for this torch on first use
(``streamseg_native_cpu_ops`` in the JSON says whether they serve; if not,
the pure-PyTorch reference ops run).

1. **Losses on the same sampling** (``agreement``): one forward pass of ours
   records the anchors and RoIs its samplers pick and its RPN's proposals;
   torchvision's forward pass then gets the same proposals (its
   ``filter_proposals``) and the same picks (its two
   ``BalancedPositiveNegativeSampler``\\ s replaced by one that returns them).
   The matched labels each side sampled from are compared too (the anchors
   and the matching agree if they are equal). Every loss must be within
   ``--tolerance`` relative. The same with each side's own sampling is
   reported beside it (``own_sampling``): what a plain side-by-side sees.
2. **Time** (``time``): ``--rounds`` steps of each after ``--warmup``,
   alternated (which goes first swaps each round); per phase (forward,
   backward, optimiser step) the median wall and CPU (process time)
   milliseconds; ``phases`` splits the forward pass by module (forward hooks)
   and the heads' backward pass (gradient hooks on their inputs and
   outputs), CPU milliseconds, medians too.
3. **Peak memory** (``memory``): each model alone in a fresh subprocess of
   this script (``--memory-of``): a warm-up step, then the process's peak
   resident set size (``VmHWM``, reset through ``/proc/self/clear_refs``)
   over one more step; ``step_mb`` is that peak less the resident size
   before the step (the step's own memory: activations, gradients), the
   figure compared.

``--profile N`` adds the N costliest ops of one more step of each
(``torch.profiler``, self CPU time). ``--fixture FILE.npz`` (with a small
``--size``) writes step 1's inputs, our sampling and proposals and
torchvision's losses for the CI test ``tests/models/test_maskrcnn_tv_losses.py``,
which replays them without torchvision. Each section's JSON is also written
to stderr as soon as it is done.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import Tensor, nn

from streamseg import ops
from streamseg.bench.parity import parity_weights
from streamseg.bench.train import peak_memory_mb, reset_peak_memory
from streamseg.models import build_model
from streamseg.models.maskrcnn import roi_heads as our_roi_heads
from streamseg.models.maskrcnn import rpn as our_rpn
from streamseg.models.maskrcnn.sampling import NEGATIVE, POSITIVE

LOSSES = ("loss_objectness", "loss_rpn_box_reg", "loss_classifier", "loss_box_reg", "loss_mask")
MEAN = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
STD = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)


# ---------------------------------------------------------------- inputs and models


def scenes(size: int, count: int, objects: int) -> tuple[Tensor, list[dict[str, Tensor]]]:
    """``count`` normalised ``(3, size, size)`` images of ``objects`` filled
    rectangles and ellipses on noise, and their targets (boxes, labels, masks)."""
    g = torch.Generator().manual_seed(0)
    images, targets = [], []
    yy, xx = torch.meshgrid(torch.arange(size), torch.arange(size), indexing="ij")
    for _ in range(count):
        img = torch.rand((3, size, size), generator=g) * 0.3
        boxes, labels, masks = [], [], []
        for k in range(objects):
            w, h = (torch.randint(size // 10, size // 3, (2,), generator=g)).tolist()
            x0 = int(torch.randint(0, size - w, (1,), generator=g))
            y0 = int(torch.randint(0, size - h, (1,), generator=g))
            if k % 2:
                cx, cy = x0 + w / 2, y0 + h / 2
                m = ((xx - cx) / (w / 2)) ** 2 + ((yy - cy) / (h / 2)) ** 2 <= 1
            else:
                m = (xx >= x0) & (xx < x0 + w) & (yy >= y0) & (yy < y0 + h)
            img[:, m] = torch.rand((3, 1), generator=g)
            boxes.append([x0, y0, x0 + w, y0 + h])
            labels.append(1 + int(torch.randint(0, 90, (1,), generator=g)))
            masks.append(m.to(torch.uint8))
        images.append(((img * 255).round() / 255 - MEAN) / STD)  # uint8 pixels
        targets.append(
            {
                "boxes": torch.tensor(boxes, dtype=torch.float32),
                "labels": torch.tensor(labels, dtype=torch.int64),
                "masks": torch.stack(masks),
            }
        )
    return torch.stack(images), targets


class _Given(nn.Module):
    """torchvision's transform replaced: the images come normalised, at their size."""

    def forward(self, images: Tensor, targets: Any = None) -> tuple[Any, Any]:
        from torchvision.models.detection.image_list import ImageList

        sizes = [(int(images.shape[-2]), int(images.shape[-1]))] * int(images.shape[0])
        return ImageList(images, sizes), targets

    def postprocess(self, result: Any, *_: Any) -> Any:
        return result


def build_torchvision(size: int) -> nn.Module:
    """``maskrcnn_resnet50_fpn`` as its builder makes it for COCO weights, parity weights."""
    from torchvision.models import resnet50
    from torchvision.models.detection.backbone_utils import _resnet_fpn_extractor
    from torchvision.models.detection.mask_rcnn import MaskRCNN
    from torchvision.ops.misc import FrozenBatchNorm2d

    torch.manual_seed(0)
    body = resnet50(weights=None, norm_layer=FrozenBatchNorm2d)
    model = MaskRCNN(_resnet_fpn_extractor(body, 3), num_classes=91, min_size=size, max_size=size)
    model.load_state_dict(parity_weights(model.state_dict(), sharpen=False))
    model.transform = _Given()
    return model.train()


def build_ours(tv_state: dict[str, Tensor], size: int) -> nn.Module:
    """streamseg's ``maskrcnn_r50_fpn`` with torchvision's weights, stem and stage 1 frozen."""
    model = build_model("maskrcnn_r50_fpn", min_size=size, max_size=size)
    model.load_state_dict(tv_state)
    model.freeze_backbone_stages(2)
    return model.train()


def trainable(model: nn.Module) -> list[str]:
    return sorted(n for n, p in model.named_parameters() if p.requires_grad)


def optimizer(side: str, model: nn.Module) -> torch.optim.Optimizer:
    """SGD, momentum 0.9, weight decay 1e-4: torchvision's reference recipe
    (``references/detection/train.py``) for it, our trainer's ``build_optimizer``
    (the same settings) for ours."""
    if side == "torchvision":
        params = [p for p in model.parameters() if p.requires_grad]
        return torch.optim.SGD(params, lr=1e-4, momentum=0.9, weight_decay=1e-4)
    from streamseg.train.config import SolverConfig
    from streamseg.train.solver import build_optimizer

    return build_optimizer(
        model, SolverConfig(iterations=1, lr=1e-4, momentum=0.9, weight_decay=1e-4)
    )


def forward_fn(side: str, model: nn.Module, images: Tensor, targets: Any) -> Callable[[], Any]:
    if side == "torchvision":
        return lambda: model(images, targets)
    sizes = [(int(images.shape[-2]), int(images.shape[-1]))] * int(images.shape[0])
    return lambda: model(images, sizes, targets)


# ---------------------------------------------------------------- the same sampling


class Recorder:
    """Ours, with what its samplers pick and its RPN proposes recorded."""

    def __init__(self) -> None:
        self.picks: dict[str, list[tuple[Tensor, Tensor, Tensor]]] = defaultdict(list)
        self.proposals: list[Tensor] = []

    @contextlib.contextmanager
    def on(self, model: nn.Module) -> Iterator[None]:
        saved = our_rpn.sample_labels, our_roi_heads.sample_labels

        def wrap(stage: str, fn: Callable[..., tuple[Tensor, Tensor]]) -> Callable[..., Any]:
            def sample(labels: Tensor, *args: Any) -> tuple[Tensor, Tensor]:
                index, kind = fn(labels, *args)
                self.picks[stage].append((labels.detach().clone(), index, kind))
                return index, kind

            return sample

        our_rpn.sample_labels = wrap("rpn", saved[0])  # type: ignore[assignment]
        our_roi_heads.sample_labels = wrap("roi", saved[1])  # type: ignore[assignment]
        hook = model.rpn.register_forward_hook(
            lambda m, i, o: self.proposals.extend(p.detach() for p in o[0].per_image())
        )
        try:
            yield
        finally:
            our_rpn.sample_labels, our_roi_heads.sample_labels = saved  # type: ignore[assignment]
            hook.remove()


class GivenSampler:
    """A ``BalancedPositiveNegativeSampler`` that returns ``picks``, comparing the labels."""

    def __init__(self, picks: list[tuple[Tensor, Tensor, Tensor]], roi: bool) -> None:
        self.picks = picks
        self.roi = roi
        self.label_diffs: list[int] = []

    def __call__(self, matched: list[Tensor]) -> tuple[list[Tensor], list[Tensor]]:
        pos, neg = [], []
        for labels, (ours, index, kind) in zip(matched, self.picks, strict=True):
            ref = ours if self.roi else ours.to(labels.dtype)
            self.label_diffs.append(int((labels.to(ref.dtype) != ref).sum()))
            p = torch.zeros_like(labels, dtype=torch.uint8)
            n = torch.zeros_like(labels, dtype=torch.uint8)
            p[index[kind == POSITIVE]] = 1
            n[index[kind == NEGATIVE]] = 1
            pos.append(p)
            neg.append(n)
        return pos, neg


def agreement(
    tv: nn.Module, ours: nn.Module, images: Tensor, targets: Any, tol: float, rec: Recorder
) -> Any:
    """Losses of both on one sampling (ours, injected into torchvision's); no step taken."""
    torch.manual_seed(1)
    with rec.on(ours):
        mine = {
            k: float(v.detach()) for k, v in forward_fn("ours", ours, images, targets)().items()
        }
    torch.manual_seed(1)
    natural = {k: float(v.detach()) for k, v in tv(images, targets).items()}
    saved = tv.rpn.fg_bg_sampler, tv.roi_heads.fg_bg_sampler, tv.rpn.filter_proposals
    rpn_sampler, roi_sampler = (
        GivenSampler(rec.picks["rpn"], False),
        GivenSampler(rec.picks["roi"], True),
    )
    own_props: list[Tensor] = []

    def given_proposals(*args: Any) -> tuple[list[Tensor], list[Tensor]]:
        boxes, _ = saved[2](*args)
        own_props.extend(b.detach() for b in boxes)
        return list(rec.proposals), [torch.ones(len(p)) for p in rec.proposals]

    tv.rpn.fg_bg_sampler, tv.roi_heads.fg_bg_sampler = rpn_sampler, roi_sampler
    tv.rpn.filter_proposals = given_proposals
    try:
        theirs = {k: float(v.detach()) for k, v in tv(images, targets).items()}
    finally:
        tv.rpn.fg_bg_sampler, tv.roi_heads.fg_bg_sampler = saved[:2]
        del tv.rpn.filter_proposals
    rel = {k: abs(mine[k] - theirs[k]) / max(abs(theirs[k]), 1e-12) for k in LOSSES}
    props = [_same_boxes(a, b) for a, b in zip(rec.proposals, own_props, strict=True)]
    return {
        "same_sampling": {
            "streamseg": mine,
            "torchvision": theirs,
            "relative_difference": {k: float(f"{v:.3g}") for k, v in rel.items()},
            "max_relative_difference": float(f"{max(rel.values()):.3g}"),
            "within_tolerance": max(rel.values()) <= tol,
            "tolerance": tol,
            "labels_differing": {"rpn": rpn_sampler.label_diffs, "roi": roi_sampler.label_diffs},
            "proposals_vs_torchvision_own": props,
        },
        "own_sampling": {"streamseg": mine, "torchvision": natural, **_spread(tv, images, targets)},
    }


def _spread(tv: nn.Module, images: Tensor, targets: Any) -> dict[str, Any]:
    """torchvision's two losses over negatives under 3 more seeds: how far its own
    draws of negatives move them."""
    rows = []
    for seed in (2, 3, 4):
        torch.manual_seed(seed)
        with torch.no_grad():
            got = tv(images, targets)
        rows.append({k: float(got[k]) for k in ("loss_objectness", "loss_classifier")})
    return {"torchvision_other_seeds": rows}


def write_fixture(path: str, images: Tensor, targets: Any, rec: Recorder, result: Any) -> None:
    """What ``tests/models/test_maskrcnn_tv_losses.py`` replays: the uint8 images,
    targets, our sampling and proposals, and torchvision's losses on them."""
    import numpy as np

    u8 = ((images * STD + MEAN) * 255).round().clamp(0, 255).to(torch.uint8)
    out: dict[str, Any] = {"images": u8.numpy()}
    for i, t in enumerate(targets):
        out[f"boxes_{i}"] = t["boxes"].numpy()
        out[f"labels_{i}"] = t["labels"].numpy()
        out[f"masks_{i}"] = np.packbits(t["masks"].numpy().astype(bool), axis=-1)
        out[f"proposals_{i}"] = rec.proposals[i].numpy()
        for stage in ("rpn", "roi"):
            labels, index, kind = rec.picks[stage][i]
            out[f"{stage}_labels_{i}"] = labels.numpy()
            out[f"{stage}_index_{i}"] = index.numpy()
            out[f"{stage}_kind_{i}"] = kind.numpy().astype(np.int8)
    for k, v in result["same_sampling"]["torchvision"].items():
        out[k] = np.float64(v)
    np.savez_compressed(path, **out)


def _same_boxes(a: Tensor, b: Tensor) -> dict[str, Any]:
    """How far each of ``a``'s boxes is from the nearest of ``b``'s, and back (pixels,
    largest coordinate difference): the same set of proposals in another order gives 0."""
    d = (a[:, None, :] - b[None, :, :]).abs().amax(dim=2)
    return {
        "count": [len(a), len(b)],
        "max_distance_px": [float(d.min(dim=1).values.max()), float(d.min(dim=0).values.max())],
    }


# ---------------------------------------------------------------- timing


class Phases:
    """CPU (process time) milliseconds per module in the forward pass and the heads'
    backward pass."""

    def __init__(self, model: nn.Module, side: str) -> None:
        self.ms: dict[str, float] = defaultdict(float)
        self.handles: list[Any] = []
        heads = model.roi_heads
        parts = {
            "backbone": model.backbone,
            "rpn_head": model.rpn.head,
            "box_head": heads.box_head,
            "box_predictor": heads.box_predictor,
            "mask_head": heads.mask_head,
            "mask_predictor": heads.mask_predictor,
        }
        if side == "torchvision":
            parts["box_roi_pool"] = heads.box_roi_pool
            parts["mask_roi_pool"] = heads.mask_roi_pool
        else:  # our RoI heads pool through a method: time it by its output size
            pool = heads._pool

            def timed(feats: Any, boxes: Any, sizes: Any, out: int) -> Tensor:
                t = time.process_time()
                x = pool(feats, boxes, sizes, out)
                name = "box_roi_pool" if out == heads.settings.box_pool else "mask_roi_pool"
                self.ms[f"{name}.forward"] += (time.process_time() - t) * 1e3
                return x

            heads._pool = timed
        parts["rpn"] = model.rpn
        parts["roi_heads"] = heads
        for name, module in parts.items():
            self._time(name, module, backward=name in ("box_head", "mask_head", "mask_predictor"))

    def _time(self, name: str, module: nn.Module, backward: bool) -> None:
        start: dict[str, float] = {}

        def pre(m: nn.Module, args: Any) -> None:
            start[name] = time.process_time()

        def post(m: nn.Module, args: Any, out: Any) -> None:
            self.ms[f"{name}.forward"] += (time.process_time() - start[name]) * 1e3
            if backward and torch.is_grad_enabled():
                x = args[0]
                if isinstance(out, Tensor) and out.requires_grad and x.requires_grad:
                    out.register_hook(lambda g: start.__setitem__(name + "b", time.process_time()))
                    x.register_hook(lambda g: self._stamp(name, start))

        self.handles.append(module.register_forward_pre_hook(pre))
        self.handles.append(module.register_forward_hook(post))

    def _stamp(self, name: str, start: dict[str, float]) -> None:
        self.ms[f"{name}.backward"] += (time.process_time() - start[name + "b"]) * 1e3

    def take(self) -> dict[str, float]:
        out = dict(self.ms)
        self.ms.clear()
        return out


def step(forward: Callable[[], Any], opt: torch.optim.Optimizer) -> tuple[dict[str, float], Any]:
    """One SGD step; wall and CPU ms of each phase."""
    out: dict[str, float] = {}
    marks = [(time.perf_counter(), time.process_time())]
    losses = forward()
    loss = sum(losses.values())
    marks.append((time.perf_counter(), time.process_time()))
    loss.backward()
    marks.append((time.perf_counter(), time.process_time()))
    opt.step()
    opt.zero_grad(set_to_none=True)
    marks.append((time.perf_counter(), time.process_time()))
    for i, phase in enumerate(("forward", "backward", "optimizer")):
        out[f"{phase}_ms"] = (marks[i + 1][0] - marks[i][0]) * 1e3
        out[f"{phase}_cpu_ms"] = (marks[i + 1][1] - marks[i][1]) * 1e3
    out["step_ms"] = (marks[-1][0] - marks[0][0]) * 1e3
    out["step_cpu_ms"] = (marks[-1][1] - marks[0][1]) * 1e3
    return out, {k: float(v.detach()) for k, v in losses.items()}


def median_of(rows: list[dict[str, float]]) -> dict[str, float]:
    keys = sorted({k for r in rows for k in r})
    return {k: round(statistics.median(r.get(k, 0.0) for r in rows), 1) for k in keys}


def alternate(sides: dict[str, Any], rounds: int, warmup: int) -> dict[str, Any]:
    """``rounds`` timed steps of each side after ``warmup``, the order swapped each round."""
    rows: dict[str, list[dict[str, float]]] = {s: [] for s in sides}
    phases: dict[str, list[dict[str, float]]] = {s: [] for s in sides}
    names = list(sides)
    for r in range(warmup + rounds):
        for side in names if r % 2 == 0 else names[::-1]:
            fwd, opt, probe = sides[side]
            torch.manual_seed(100 + r)
            timing, _ = step(fwd, opt)
            split = probe.take()
            if r >= warmup:
                rows[side].append(timing)
                phases[side].append(split)
    out: dict[str, Any] = {s: {**median_of(rows[s]), "phases": median_of(phases[s])} for s in sides}
    a, b = out["streamseg"], out["torchvision"]
    out["ratio"] = {
        k: round(a[k] / b[k], 3)
        for k in ("step_ms", "step_cpu_ms", "forward_ms", "backward_ms", "optimizer_ms")
        if b.get(k)
    }
    return out


def profile(sides: dict[str, Any], top: int) -> dict[str, Any]:
    """One step of each under ``torch.profiler``: the ``top`` ops by self CPU time (ms),
    forward and backward together (autograd's nodes are named ``...Backward0``)."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as run

    out = {}
    for side, (fwd, opt, _) in sides.items():
        with run(activities=[ProfilerActivity.CPU]) as prof:
            step(fwd, opt)
        rows = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)[:top]
        out[side] = {e.key: round(e.self_cpu_time_total / 1e3, 1) for e in rows}
    return out


# ---------------------------------------------------------------- memory, alone


def memory_of(side: str, size: int, objects: int, channels_last: bool) -> dict[str, float]:
    """Peak RSS of one step of ``side`` alone in this process (after a warm-up step)."""
    images, targets = scenes(size, 2, objects)
    tv = build_torchvision(size)
    model = tv
    if side == "streamseg":
        model = build_ours(tv.state_dict(), size)
        del tv
        if channels_last:
            from streamseg.models.layout import to_channels_last

            to_channels_last(model)
            images = images.contiguous(memory_format=torch.channels_last)
    opt = optimizer(side, model)
    fwd = forward_fn(side, model, images, targets)
    step(fwd, opt)
    reset_peak_memory(torch.device("cpu"))
    before = _rss_mb()
    step(fwd, opt)
    peak = peak_memory_mb(torch.device("cpu"))
    return {"rss_before_step_mb": before, "peak_rss_mb": peak, "step_mb": round(peak - before, 1)}


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def memory(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for side in ("streamseg", "torchvision"):
        runs = []
        for _ in range(args.memory_runs):
            cmd = [sys.executable, __file__, "--memory-of", side, "--size", str(args.size)]
            cmd += ["--objects", str(args.objects), "--threads", str(args.threads)]
            cmd += ["--channels-last"] if args.channels_last else []
            runs.append(json.loads(subprocess.check_output(cmd)))
        out[side] = median_of(runs)
    out["ratio_step_mb"] = round(out["streamseg"]["step_mb"] / out["torchvision"]["step_mb"], 3)
    out["ratio_peak_rss_mb"] = round(
        out["streamseg"]["peak_rss_mb"] / out["torchvision"]["peak_rss_mb"], 3
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=800)
    parser.add_argument("--objects", type=int, default=5, help="objects per image")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--tolerance", type=float, default=1e-4)
    parser.add_argument("--memory-runs", type=int, default=1)
    parser.add_argument("--skip", nargs="*", default=(), choices=("agreement", "time", "memory"))
    parser.add_argument(
        "--channels-last", action="store_true", help="time ours channels-last (its option)"
    )
    parser.add_argument("--profile", type=int, default=0, help="also list the N costliest ops")
    parser.add_argument("--memory-of", choices=("streamseg", "torchvision"))
    parser.add_argument("--fixture", help="write the losses-on-one-sampling fixture (.npz) here")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.memory_of:
        print(json.dumps(memory_of(args.memory_of, args.size, args.objects, args.channels_last)))
        return
    import torchvision

    images, targets = scenes(args.size, 2, args.objects)
    tv = build_torchvision(args.size)
    ours = build_ours(tv.state_dict(), args.size)
    if trainable(tv) != trainable(ours):
        raise SystemExit("the two models train different parameters")
    our_images = images
    if args.channels_last:  # ours only (solver.channels_last): after the agreement check
        from streamseg.models.layout import to_channels_last

        our_images = images.contiguous(memory_format=torch.channels_last)
    report: dict[str, Any] = {
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "threads": args.threads,
        "size": args.size,
        "images": 2,
        "objects_per_image": args.objects,
        "streamseg_native_cpu_ops": ops.native_cpu(),
        "streamseg_channels_last": args.channels_last,
        "trainable_parameters": len(trainable(ours)),
    }
    if args.fixture:
        rec = Recorder()
        result = agreement(tv, ours, images, targets, args.tolerance, rec)
        if not result["same_sampling"]["within_tolerance"]:
            raise SystemExit(json.dumps(result, indent=2))
        write_fixture(args.fixture, images, targets, rec, result)
        print(json.dumps(result["same_sampling"], indent=2))
        return
    if "agreement" not in args.skip:
        report["agreement"] = agreement(tv, ours, images, targets, args.tolerance, Recorder())
        print(json.dumps({"agreement": report["agreement"]}), file=sys.stderr, flush=True)
    if args.channels_last:
        to_channels_last(ours)
    if "time" not in args.skip:
        sides = {
            "streamseg": (forward_fn("ours", ours, our_images, targets), optimizer("ours", ours)),
            "torchvision": (
                forward_fn("torchvision", tv, images, targets),
                optimizer("torchvision", tv),
            ),
        }
        probes = {"streamseg": Phases(ours, "ours"), "torchvision": Phases(tv, "torchvision")}
        runs = {k: (*v, probes[k]) for k, v in sides.items()}
        report["time"] = alternate(runs, args.rounds, args.warmup)
        print(json.dumps({"time": report["time"]}), file=sys.stderr, flush=True)
        if args.profile:
            report["profile_top_ops_ms"] = profile(runs, args.profile)
    del tv, ours
    if "memory" not in args.skip:
        report["memory"] = memory(args)
        print(json.dumps({"memory": report["memory"]}), file=sys.stderr, flush=True)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
