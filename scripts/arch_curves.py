#!/usr/bin/env python3
"""Held-out mask AP (and PQ) against training CPU minutes, for both architectures.

Three runs on the CPU, each from the same kind of start (the trunk of the
Mask R-CNN demo model, models/demo_small.pth, every other layer freshly
initialised), each with its own shipped recipe:

* ``maskrcnn_instance``: maskrcnn_small, configs/demo_small.yaml's data and
  solver (the demo model's recipe, which trained from scratch);
* ``m2f_instance``: mask2former_small for the instance task, the same data
  (the Mask R-CNN demo's scenes), configs/panoptic_small.yaml's model and
  solver;
* ``m2f_panoptic``: mask2former_small for the panoptic task,
  configs/panoptic_small.yaml as it is.

Every run trains until its process CPU time of training steps (data loading
included: ``data.workers`` is 0, so it runs in the process; evaluation and
checkpoint writing excluded) reaches ``--budget-s`` (or its schedule ends),
saving the model every ``--every-s`` CPU seconds and where it stops. Every
saved model, and the start, is then evaluated on held-out scenes the
training never saw, the same for every run:
mask and box AP of the instance task on seeds 1001-1002 (the scenes of
models/demo_small.eval.json; a panoptic model is evaluated as ``--task
instance`` on them, as models/panoptic_small.instance.eval.json is), and for
the panoptic run PQ on seeds 3001-3002 (stuff=1). Writes the points as JSON
and a plot as PNG (default docs/images/arch_curves.{json,png}).

    nice -n 5 .venv/bin/python scripts/arch_curves.py              # 8 CPU min per run
    .venv/bin/python scripts/arch_curves.py --budget-s 1800         # longer: continues the runs

Running it again continues: a run that reached its budget (or its
schedule's end) is not trained again, a longer ``--budget-s`` resumes it from its ``last.pth`` (same
schedule, same data stream), and checkpoints already evaluated are not
evaluated again. ``--runs`` picks runs (several invocations with different
runs may work at once; each writes the combined JSON and PNG of whatever
points exist).
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RUNS = ("maskrcnn_instance", "m2f_instance", "m2f_panoptic")
INSTANCE_SCENES = (
    "synthetic://?seed=1001&width=320&height=240&objects=4",
    "synthetic://?seed=1002&width=320&height=240&objects=5",
)
PANOPTIC_SCENES = (
    "synthetic://?seed=3001&width=256&height=192&objects=3&stuff=1",
    "synthetic://?seed=3002&width=256&height=192&objects=4&stuff=1",
)
THINGS = ["disc", "square", "triangle", "star"]

log = logging.getLogger("arch_curves")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--budget-s", type=float, default=480.0, help="training CPU s per run")
    p.add_argument("--every-s", type=float, default=60.0, help="save a model every N CPU s")
    p.add_argument("--runs", default=",".join(RUNS), help=f"comma-separated, of {RUNS}")
    p.add_argument("--work", default="runs/arch_curves", help="run folders")
    p.add_argument("--out", default="docs/images/arch_curves", help="writes OUT.json, OUT.png")
    p.add_argument("--maskrcnn", default="models/demo_small.pth", help="the trunk's source")
    p.add_argument("--threads", type=int, default=1, help="torch threads")
    p.add_argument("--iterations", type=int, default=None,
                   help="schedule length (default: each recipe's, 2000)")  # fmt: skip
    p.add_argument("--eval-frames", type=int, default=20, help="frames per held-out scene")
    p.add_argument("--eval-stride", type=int, default=5, help="frame step in a held-out scene")
    p.add_argument("--eval-scenes", type=int, default=2, help="held-out scenes per kind")
    p.add_argument("--train-scenes", type=int, default=None, help="test: first N train entries")
    p.add_argument("--train-frames", type=int, default=None, help="test: frames per train entry")
    p.add_argument("--no-train", action="store_true", help="only evaluate and plot")
    return p.parse_args(argv)


def _yaml(path: Path) -> dict[str, Any]:
    import yaml

    data: dict[str, Any] = yaml.safe_load(path.read_text())
    return data


def run_config(name: str, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """The training config (as a plain dict) of one run."""
    demo = _yaml(REPO / "configs/demo_small.yaml")
    pan = _yaml(REPO / "configs/panoptic_small.yaml")
    if name == "maskrcnn_instance":
        cfg = copy.deepcopy(demo)
        cfg["model"].pop("init_frozen_norm_images", None)  # from scratch only
        cfg["model"]["freeze_backbone_stages"] = pan["model"]["freeze_backbone_stages"]
    elif name == "m2f_instance":
        cfg = copy.deepcopy(pan)
        cfg["data"] = copy.deepcopy(demo["data"])
        options = cfg["model"]["options"]
        options["task"] = "instance"
        options.pop("stuff_classes")
        cfg["model"]["class_names"] = list(THINGS)
    elif name == "m2f_panoptic":
        cfg = copy.deepcopy(pan)
    else:
        raise SystemExit(f"unknown run {name!r}; runs: {', '.join(RUNS)}")
    run_dir = work / name
    cfg["model"]["weights"] = str(run_dir / "init.pth")
    cfg["model"].setdefault("class_names", list(THINGS))
    data = cfg["data"]
    data["val"] = []  # no evaluation inside training: the curve evaluates held-out scenes
    data["workers"] = 0  # data loading in the process, so its CPU time counts
    if args.train_scenes is not None:
        data["train"] = data["train"][: args.train_scenes]
    if args.train_frames is not None:
        for entry in data["train"]:
            entry["frames"] = args.train_frames
    if args.iterations is not None:
        cfg["solver"]["iterations"] = args.iterations
        cfg["solver"]["warmup_iters"] = min(cfg["solver"]["warmup_iters"], args.iterations - 1)
    cfg["output"] = {
        "dir": str(run_dir / "train"),
        "checkpoint_period": 10**9,  # last.pth when the budget stops the run
        "log_period": 10,
        "progress": False,
    }
    return cfg


def write_init(cfg: Any, maskrcnn: str, out: Path) -> dict[str, Any]:
    """The starting checkpoint: the demo model's trunk, the rest freshly initialised."""
    import torch

    from streamseg.models.checkpoint import read_checkpoint, save_checkpoint
    from streamseg.models.mask2former.small import backbone_from_maskrcnn
    from streamseg.train.modeling import build_train_model

    source = read_checkpoint(maskrcnn).state_dict
    names = ("__background__", *cfg.model.class_names)
    torch.manual_seed(cfg.solver.seed)
    model, options = build_train_model(
        cfg.model.model_copy(update={"weights": None}), names, load_weights=False
    )
    state = model.state_dict()
    if cfg.model.arch == "mask2former_small":
        state, copied = backbone_from_maskrcnn(state, source)
    else:  # maskrcnn_small: the same trunk, under its own name
        trunk = [k for k in state if k.startswith("backbone.body.")]
        state.update({k: source[k].clone() for k in trunk})
        copied = len(trunk)
    out.parent.mkdir(parents=True, exist_ok=True)
    save_checkpoint(
        out, state, arch=cfg.model.arch, class_names=list(names), num_classes=len(names),
        iteration=0, metrics={}, backbone_from=maskrcnn,
        model_options={k: v for k, v in options.items() if k != "weights"},
    )  # fmt: skip
    return {"trunk_tensors": copied, "of": len(state)}


def cpu_hook(run_dir: Path, budget_s: float, every_s: float, meta: dict[str, Any]) -> Any:
    """A trainer hook: counts the CPU time of training steps, saves the model every
    ``every_s`` of it and stops the run at ``budget_s``. Its count travels in
    ``last.pth`` (hook state), so a resumed run goes on counting."""
    from streamseg.models.checkpoint import save_checkpoint
    from streamseg.train.trainer import HookBase

    class CpuBudget(HookBase):
        def __init__(self) -> None:
            self.cpu_s, self.wall_s, self.saved = 0.0, 0.0, 0
            self._t0 = (0.0, 0.0)

        def before_train(self) -> None:
            if self.cpu_s >= budget_s:
                self.trainer.request_stop()

        def before_step(self) -> None:
            self._t0 = (time.process_time(), time.monotonic())

        def after_step(self) -> None:
            self.cpu_s += time.process_time() - self._t0[0]
            self.wall_s += time.monotonic() - self._t0[1]
            if self.cpu_s >= (self.saved + 1) * every_s or self.cpu_s >= budget_s:
                self.saved = int(self.cpu_s // every_s)
                self.save_point()
            if self.cpu_s >= budget_s:
                self.trainer.request_stop()

        def after_train(self) -> None:
            # The schedule's end (or a stop) between two points: its model is a point too.
            if not (run_dir / "points" / f"it{self.trainer.iter:06d}.train.json").exists():
                self.save_point()

        def save_point(self) -> None:
            it = self.trainer.iter
            path = run_dir / "points" / f"it{it:06d}.pth"
            path.parent.mkdir(parents=True, exist_ok=True)
            save_checkpoint(path, self.trainer.unwrapped.state_dict(), **{**meta, "iteration": it})
            point = {"iteration": it, "cpu_s": round(self.cpu_s, 2),
                     "wall_s": round(self.wall_s, 2), "checkpoint": str(path)}  # fmt: skip
            path.with_suffix(".train.json").write_text(json.dumps(point))

        def state_dict(self) -> dict[str, Any]:
            return {"cpu_s": self.cpu_s, "wall_s": self.wall_s, "saved": self.saved}

        def load_state_dict(self, state: dict[str, Any]) -> None:
            self.cpu_s, self.wall_s = state["cpu_s"], state["wall_s"]
            self.saved = int(self.cpu_s // every_s)  # --every-s may have changed

    return CpuBudget()


def train(name: str, args: argparse.Namespace, work: Path) -> None:
    import yaml

    from streamseg.models.checkpoint import read_checkpoint
    from streamseg.train.config import load_train_config
    from streamseg.train.engine import run_training

    run_dir = work / name
    state_file = run_dir / "trained.json"
    if state_file.exists():
        trained = json.loads(state_file.read_text())
        if trained.get("complete") or trained["cpu_s"] >= args.budget_s:
            return  # reached this budget, or the end of the schedule, already
    run_dir.mkdir(parents=True, exist_ok=True)
    config_path = run_dir / "config.yaml"
    config_path.write_text(yaml.safe_dump(run_config(name, args, work), sort_keys=False))
    cfg = load_train_config(str(config_path))
    init = Path(cfg.model.weights or "")
    if not init.exists():
        copied = write_init(cfg, args.maskrcnn, init)
        log.info("%s: start %s (%s)", name, init, copied)
        start = {"iteration": 0, "cpu_s": 0.0, "wall_s": 0.0, "checkpoint": str(init)}
        (run_dir / "points").mkdir(exist_ok=True)
        (run_dir / "points" / "it000000.train.json").write_text(json.dumps(start))
    meta = dict(read_checkpoint(init).meta)
    meta.pop("backbone_from", None)
    resume = (Path(cfg.output.dir) / "last.pth").exists()
    hook = cpu_hook(run_dir, args.budget_s, args.every_s, meta)
    result = run_training(cfg, resume=resume, extra_hooks=[hook])
    log.info("%s: iteration %d, %.1f CPU s of training", name, result.iteration, hook.cpu_s)
    done = {"iteration": result.iteration, "cpu_s": hook.cpu_s, "wall_s": hook.wall_s,
            "complete": result.iteration >= cfg.solver.iterations}  # fmt: skip
    state_file.write_text(json.dumps(done))


def scene_urls(scenes: tuple[str, ...], args: argparse.Namespace) -> list[str]:
    tail = f"&frames={args.eval_frames}&stride={args.eval_stride}"
    return [s + tail for s in scenes[: args.eval_scenes]]


def evaluate(weights: str, urls: list[str], task: str) -> dict[str, Any]:
    """What ``streamseg eval --weights W --task TASK --data URL...`` prints."""
    from streamseg.models.checkpoint import read_checkpoint
    from streamseg.models.trained import load_trained_model
    from streamseg.train.data import UnionDataset
    from streamseg.train.datasets import open_dataset
    from streamseg.train.evaluate import evaluate_model

    dataset = UnionDataset([open_dataset(u) for u in urls])
    options = {"task": task} if read_checkpoint(weights).meta["arch"].startswith("mask2") else {}
    model, names = load_trained_model(weights, score_threshold=0.05, **options)
    dataset.set_class_names(names)
    result: dict[str, Any] = evaluate_model(model, dataset, names, batch_size=4, device="cpu")
    return result


def evaluate_points(name: str, args: argparse.Namespace, work: Path) -> list[dict[str, Any]]:
    points = []
    for record in sorted((work / name / "points").glob("it*.train.json")):
        point = json.loads(record.read_text())
        done = record.with_name(record.name.replace(".train.json", ".eval.json"))
        if done.exists():
            points.append(json.loads(done.read_text()))
            continue
        t0 = time.process_time()
        inst = evaluate(point["checkpoint"], scene_urls(INSTANCE_SCENES, args), "instance")
        point.update(segm_AP=inst["segm"]["AP"], bbox_AP=inst["bbox"]["AP"])
        point["segm_AP50"] = inst["segm"]["AP50"]
        if name == "m2f_panoptic":
            pan = evaluate(point["checkpoint"], scene_urls(PANOPTIC_SCENES, args), "panoptic")
            point.update({k: pan["panoptic"][k] for k in ("PQ", "PQ_th", "PQ_st")})
        point["eval_cpu_s"] = round(time.process_time() - t0, 1)
        done.write_text(json.dumps(point))
        log.info("%s: %s", name, point)
        points.append(point)
    return points


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    import torch

    torch.set_num_threads(max(1, args.threads))
    work = Path(args.work)
    names = [n.strip() for n in args.runs.split(",") if n.strip()]
    for name in names:
        if name not in RUNS:
            sys.exit(f"unknown run {name!r}; runs: {', '.join(RUNS)}")
        if not args.no_train:
            train(name, args, work)
        evaluate_points(name, args, work)
    result = collect(args, work)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    plot(result, out.with_suffix(".png"))
    print(json.dumps(result))


def collect(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """Every run's evaluated points (also of runs another invocation trains)."""
    runs: dict[str, Any] = {}
    for name in RUNS:
        files = sorted((work / name / "points").glob("it*.eval.json"))
        if not files:
            continue
        points = [json.loads(f.read_text()) for f in files]
        for p in points:
            p.pop("checkpoint", None)
        arch = "maskrcnn_small" if name.startswith("maskrcnn") else "mask2former_small"
        runs[name] = {"arch": arch, "task": name.split("_")[1], "points": points}
        trained = work / name / "trained.json"
        if trained.exists():  # where training stopped: the budget, or the schedule's end
            runs[name]["trained"] = json.loads(trained.read_text())
    return {
        "budget_cpu_s": args.budget_s,
        "every_cpu_s": args.every_s,
        "threads": args.threads,
        "start": f"trunk of {args.maskrcnn}, every other layer freshly initialised",
        "eval_instance": scene_urls(INSTANCE_SCENES, args),
        "eval_panoptic": scene_urls(PANOPTIC_SCENES, args),
        "runs": runs,
    }


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_ap, ax_pq) = plt.subplots(1, 2, figsize=(11, 4.2))
    labels = {"maskrcnn_instance": "Mask R-CNN small (instance)",
              "m2f_instance": "Mask2Former small (instance)",
              "m2f_panoptic": "Mask2Former small (panoptic, as --task instance)"}  # fmt: skip
    for name, run in result["runs"].items():
        minutes = [p["cpu_s"] / 60 for p in run["points"]]
        ax_ap.plot(minutes, [p["segm_AP"] for p in run["points"]], "o-", label=labels[name])
        if name == "m2f_panoptic":
            for key, style, label in (("PQ", "o-", "PQ (all)"), ("PQ_th", "s--", "PQ things"),
                                      ("PQ_st", "^:", "PQ stuff")):  # fmt: skip
                ax_pq.plot(minutes, [p[key] for p in run["points"]], style, label=label)
    ax_ap.set(xlabel="training CPU minutes (one thread)", ylabel="held-out mask AP",
              title="Mask AP, seeds 1001-1002")  # fmt: skip
    ax_pq.set(xlabel="training CPU minutes (one thread)", ylabel="held-out PQ",
              title="Mask2Former small panoptic: PQ, seeds 3001-3002")  # fmt: skip
    for ax in (ax_ap, ax_pq):
        ax.grid(alpha=0.3)
        ax.set_ylim(bottom=0)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


if __name__ == "__main__":
    main()
