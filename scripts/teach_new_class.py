#!/usr/bin/env python3
"""Teach a trained model a new class without forgetting the old ones, end to end.

The workflow of docs/training.md ("Teach it a new class"), every step a
``streamseg`` command, on synthetic footage whose fifth class (hexagon) the
shipped demo model has never seen:

1. ``streamseg synth --shapes 5``: new footage (an MP4 per camera, one scene
   seed each) showing hexagons among the old shapes; its exact ground truth
   stands in for a person's labels;
2. ``streamseg label``: the current model labels the classes it knows;
3. hand labels: only the hexagons, on the frames ``label`` wrote (taken from
   the ground truth, as a person would draw them in an annotation tool);
4. ``streamseg train``: from the current model, its classes plus hexagon,
   on the two label files merged (hand labels win where both labelled one
   object), with some of the model's original training data mixed back in
   (``--replay``: synthetic scenes of the demo model's training seeds);
5. ``streamseg eval --baseline``: old and new model on held-out scenes of the
   old classes (the demo model's own eval data), and the new model's hexagon
   AP on held-out scenes with hexagons.

Prints one JSON object (also written to WORK/result.json): the new class's
mask and box AP, the old classes' AP before and after, the classes kept and
added, what the label files held, and training's CPU and wall time.

    scripts/teach_new_class.py                       # the real run (about 12 CPU minutes)
    scripts/teach_new_class.py --iterations 2 --footage-seeds 201 --footage-frames 12 \
        --eval-frames 1                              # the plumbing only
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
NEW_CLASS = "hexagon"
SIZE = "width=320&height=240"  # the demo model's cameras


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--weights", default="models/demo_small.pth", help="the model serving now")
    p.add_argument("--work", default="runs/teach_hexagon", help="folder for every output")
    p.add_argument(
        "--footage-seeds", default="201,202,203,204,205,206", help="one camera (scene) per seed"
    )
    p.add_argument("--footage-frames", type=int, default=300, help="frames per camera")
    p.add_argument("--every", type=int, default=4, help="label every N-th frame")
    p.add_argument("--teacher-threshold", type=float, default=0.5)
    p.add_argument("--iterations", type=int, default=2000)
    p.add_argument("--lr", type=float, default=0.0005)
    p.add_argument("--freeze", type=int, default=0, help="model.freeze_backbone_stages")
    p.add_argument("--threads", type=int, default=1, help="torch threads of each command")
    p.add_argument("--eval-frames", type=int, default=60, help="frames per held-out scene")
    p.add_argument(
        "--replay",
        type=int,
        default=6,
        help="also train on this many of the demo model's own training scenes (seeds 101..)",
    )
    p.add_argument(
        "--reuse-labels",
        action="store_true",
        help="keep WORK's footage and teacher labels from an earlier run (train and eval again)",
    )
    p.add_argument(
        "--task",
        default=None,
        help="Mask2Former: train and evaluate as this task (instance: the AP the goals are in; "
        "default: the checkpoint's own)",
    )
    p.add_argument("--python", default=sys.executable)
    return p.parse_args(argv)


class Runner:
    """Runs ``streamseg`` commands, adding up their CPU time (user + system)."""

    def __init__(self, python: str, work: Path) -> None:
        self.python, self.work = python, work
        self.cpu: dict[str, float] = {}
        self.wall: dict[str, float] = {}

    def __call__(self, step: str, *args: str) -> str:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run(
            [self.python, "-m", "streamseg", *args],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.wall[step] = round(time.perf_counter() - start, 1)
        self.cpu[step] = round(
            after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, 1
        )
        (self.work / f"{step}.log").write_text(done.stderr)
        if done.returncode != 0:
            sys.exit(f"streamseg {args[0]} failed ({done.returncode}):\n{done.stderr[-3000:]}")
        return done.stdout


def hand_labels(footage: Path, teacher_path: Path, out: Path) -> int:
    """The new class's true instances on the frames the teacher labelled, under the
    teacher file's image names: what a person labelling only the new class gives."""
    teacher = json.loads(teacher_path.read_text())
    truths: dict[str, dict[int, list[dict[str, Any]]]] = {}  # camera -> frame -> instances
    images: list[dict[str, Any]] = []
    annotations: list[dict[str, Any]] = []
    for image in teacher["images"]:
        camera = Path(image["video"]).stem
        if camera not in truths:
            truths[camera] = _truth(footage / camera / "annotations.json")
        images.append({k: image[k] for k in ("id", "file_name", "height", "width")})
        for ann in truths[camera].get(int(image["frame_index"]), []):
            keep = ("segmentation", "bbox", "area", "iscrowd")
            annotations.append(
                {"id": len(annotations) + 1, "image_id": image["id"], "category_id": 1}
                | {k: ann[k] for k in keep}
            )
    categories = [{"id": 1, "name": NEW_CLASS}]
    out.write_text(
        json.dumps({"images": images, "annotations": annotations, "categories": categories})
    )
    return len(annotations)


def _truth(path: Path) -> dict[int, list[dict[str, Any]]]:
    """Frame index -> the new class's instances, from ``streamseg synth``'s COCO file."""
    truth = json.loads(path.read_text())
    new_id = next(c["id"] for c in truth["categories"] if c["name"] == NEW_CLASS)
    by_frame: dict[int, list[dict[str, Any]]] = {}
    for ann in truth["annotations"]:
        if ann["category_id"] == new_id:
            by_frame.setdefault(int(ann["image_id"]) - 1, []).append(ann)  # ids are frame + 1
    return by_frame


def train_config(args: argparse.Namespace, meta: dict[str, Any], files: list[Path]) -> str:
    """A fine-tune of ``args.weights`` on the merged labels, its classes plus the new one."""
    old = [n for n in meta["class_names"] if n != "__background__"]
    saved = meta.get("model_options", {})
    options = {k: v for k, v in saved.items() if k in ("min_size", "max_size", "num_queries")}
    if args.task:
        options["task"] = args.task
    config = {
        "model": {
            "arch": meta["arch"],
            "weights": str(Path(args.weights).resolve()),
            "class_names": [*old, NEW_CLASS],
            "roi_samples_per_image": saved.get("num_points", 128),  # Mask2Former: mask points
            "freeze_backbone_stages": args.freeze,
            "options": options,
        },
        "data": {
            "train": [{"annotations": [str(f) for f in files], "images": str(files[-1].parent)}]
            + [
                {
                    "synthetic": f"synthetic://?seed={101 + i}&{SIZE}&objects=5",
                    "frames": 150,
                    "stride": 4,
                }
                for i in range(args.replay)
            ],
            "min_size": [200, 220, 240, 260, 280],
            "max_size": 380,
            "workers": 1,
        },
        "solver": {
            "iterations": args.iterations,
            "batch_size": 2,
            "optimizer": "adamw",
            "lr": args.lr,
            "schedule": "cosine",
            "min_lr_factor": 0.02,
            "warmup_iters": min(50, args.iterations),
            "clip_grad_norm": 10.0,
        },
        "output": {
            "dir": str(Path(args.work).resolve() / "run"),
            "checkpoint_period": max(1, min(250, args.iterations)),
            "log_period": max(1, min(20, args.iterations)),
            "progress": False,
        },
        "device": "cpu",
    }
    return json.dumps(config, indent=2)  # JSON is YAML


def held_out(shapes: int, frames: int) -> list[str]:
    """The demo model's held-out scenes (seeds 1001, 1002), with ``shapes`` classes."""
    extra = "&shapes=5" if shapes == 5 else ""
    return [
        f"synthetic://?seed={seed}&{SIZE}&objects={n}&frames={frames}&stride=5{extra}"
        for seed, n in ((1001, 4), (1002, 5))
    ]


def make_labels(args: argparse.Namespace, run: Runner, footage: Path, out: Path) -> Any:
    """New footage (``synth``, one camera per seed) and its teacher labels (``label``)."""
    videos = footage / "videos"
    videos.mkdir(parents=True, exist_ok=True)
    for seed in args.footage_seeds.split(","):
        camera = footage / f"cam{seed}"
        run(f"synth_{seed}", "synth", "--out", str(camera), "--seed", seed,
            "--frames", str(args.footage_frames), "--size", "240x320", "--objects", "6",
            "--shapes", "5")  # fmt: skip
        (camera / "scene.mp4").replace(videos / f"cam{seed}.mp4")
    labelling = ["--every", str(args.every), "--score-threshold", str(args.teacher_threshold)]
    return json.loads(
        run("label", "label", str(videos), "--weights", args.weights, "--out", str(out),
            *labelling)
    )  # fmt: skip


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = _args(argv)
    work = Path(args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    run = Runner(args.python, work)
    threads = ["--threads", str(args.threads)]
    sys.path.insert(0, str(REPO))
    from streamseg.models.checkpoint import checkpoint_meta

    meta = checkpoint_meta(REPO / args.weights)
    footage = work / "footage"
    if args.reuse_labels and (work / "labels" / "annotations.json").is_file():
        written = json.loads((work / "labels" / "annotations.json").read_text())
        label = {"images": len(written["images"]), "instances": len(written["annotations"])}
    else:
        label = make_labels(args, run, footage, work / "labels")
    teacher = work / "labels" / "annotations.json"
    hand = work / "labels" / "hand.json"
    hand_count = hand_labels(footage, teacher, hand)
    config = work / "train.yaml"
    config.write_text(train_config(args, meta, [hand, teacher]))
    shutil.rmtree(work / "run", ignore_errors=True)  # a fresh run, not a resumed one
    trained = json.loads(run("train", "train", str(config), *threads))
    new = str(work / "run" / "model_final.pth")
    old_data = [x for d in held_out(4, args.eval_frames) for x in ("--data", d)]
    task = ["--task", args.task] if args.task else []
    compared = json.loads(
        run("eval_old", "eval", "--baseline", args.weights, new, *task, *old_data)
    )
    new_data = [x for d in held_out(5, args.eval_frames) for x in ("--data", d)]
    fresh = json.loads(run("eval_new", "eval", new, "--per-class", *task, *new_data))
    result = {
        "start": args.weights,
        "new_class": NEW_CLASS,
        "classes": compared["classes"],
        "labels": {
            "frames": label["images"],
            "teacher_instances": label["instances"],
            "hand_instances": hand_count,
        },
        "new_class_ap": {
            "segm": fresh["per_class"][NEW_CLASS]["segm"],
            "bbox": fresh["per_class"][NEW_CLASS]["bbox"],
            "instances": fresh["per_class"][NEW_CLASS]["instances"],
            "data": new_data[1::2],
        },
        "old_classes_ap": {
            "before": compared["kept_classes"]["baseline"],
            "after": compared["kept_classes"]["candidate"],
            "change": compared["kept_classes"]["difference"],
            "per_class_change": compared["difference"]["per_class"],
            "data": old_data[1::2],
        },
        "all_classes_after": {"segm": fresh["segm"]["AP"], "bbox": fresh["bbox"]["AP"]},
        "train": {
            "iterations": trained["iteration"],
            "cpu_s": run.cpu["train"],
            "wall_s": run.wall["train"],
            "threads": args.threads,
        },
        "cpu_s": run.cpu,
        "wall_s": run.wall,
    }
    change = result["old_classes_ap"]["change"]["segm"]
    result["goals"] = {
        "new_class_mask_ap_at_least_0.5": result["new_class_ap"]["segm"] >= 0.5,
        "old_classes_lose_at_most_0.05": change is not None and change >= -0.05,
        "train_within_15_cpu_minutes": run.cpu["train"] <= 15 * 60,
    }
    (work / "result.json").write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    print(json.dumps(main()))
