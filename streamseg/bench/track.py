"""Tracking benchmarks: MOT quality on synthetic scenes and tracker + rules cost per frame.

* :func:`quality` runs the tracking stage over synthetic scenes whose exact
  ground truth is degraded like a detector would (box noise, missed
  detections, scores that fall with occlusion, a few low-score false
  positives) and scores the tracks with py-motmetrics (MOTA, IDF1, ...).
* :func:`cost` times ``TrackingStage.process`` with ``N`` objects per frame
  moving in a 1920x1080 frame, with and without a set of alert rules.

Both are deterministic for a given seed (apart from the timings).
"""

from __future__ import annotations

import contextlib
import math
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import torch

from streamseg.bench.busy import Busy
from streamseg.track.alerts import AlertsConfig
from streamseg.track.config import TrackingConfig
from streamseg.track.matching import box_iou
from streamseg.track.stage import TrackingStage
from streamseg.types import Frame, FrameResult, Instances

__all__ = ["Degrade", "Detector", "cost", "mot_summary", "quality", "synthetic_detections"]

_NO_IMAGE = torch.zeros((0, 0, 3), dtype=torch.uint8)

# A model run on one rendered frame: ``Frame`` (uint8 image) -> its detections.
Detector = Callable[[Frame], Instances]


class Degrade:
    """How ground truth is turned into detections.

    Args:
        box_noise: standard deviation of each box edge, as a fraction of the
            box's width (x) or height (y).
        drop: probability that an object is not detected in a frame.
        false_positives: mean number of spurious boxes per frame (Poisson),
            with scores uniform in ``[0.1, 0.5)``.
        seed: random seed.
    """

    def __init__(
        self,
        *,
        box_noise: float = 0.05,
        drop: float = 0.1,
        false_positives: float = 0.5,
        seed: int = 0,
    ) -> None:
        self.box_noise = box_noise
        self.drop = drop
        self.false_positives = false_positives
        self.rng = np.random.default_rng(seed)

    def __call__(self, gt: Instances, visibility: torch.Tensor) -> Instances:
        """Detections ``Instances`` (masks kept for detected objects) from ground truth."""
        rng = self.rng
        n = len(gt)
        keep = rng.random(n) >= self.drop
        boxes = gt.boxes.double().numpy()[keep]
        vis = visibility.double().numpy()[keep]
        wh = np.concatenate([boxes[:, 2:] - boxes[:, :2]] * 2, axis=1)
        boxes = boxes + rng.normal(0.0, self.box_noise, boxes.shape) * wh
        # A detector is less sure of a partly hidden object.
        scores = np.clip(0.3 + 0.65 * vis + rng.normal(0.0, 0.05, len(vis)), 0.05, 1.0)
        labels = gt.labels.numpy()[keep]
        full = gt.frame_masks()
        masks = None if full is None else full[torch.from_numpy(keep)]
        h, w = gt.image_size
        k = int(rng.poisson(self.false_positives))
        if k:
            size = rng.uniform(0.05, 0.2, (k, 2)) * min(h, w)
            x1 = rng.uniform(0, w - size[:, 0])
            y1 = rng.uniform(0, h - size[:, 1])
            fp = np.stack((x1, y1, x1 + size[:, 0], y1 + size[:, 1]), axis=1)
            boxes = np.concatenate((boxes, fp))
            scores = np.concatenate((scores, rng.uniform(0.1, 0.5, k)))
            labels = np.concatenate((labels, rng.integers(1, 5, k)))
            if masks is not None:
                fm = torch.zeros((k, h, w), dtype=torch.bool)
                for i, (a, b, c, d) in enumerate(fp.astype(int).tolist()):
                    fm[i, b:d, a:c] = True
                masks = torch.cat((masks, fm))
        return Instances(
            image_size=gt.image_size,
            boxes=torch.from_numpy(boxes).float(),
            scores=torch.from_numpy(scores).float(),
            labels=torch.from_numpy(labels.astype(np.int64)),
            masks=masks,
        )


def synthetic_detections(
    *,
    seed: int,
    frames: int,
    width: int,
    height: int,
    fps: float,
    objects: int,
    degrade: Degrade | None,
    masks: bool = False,
    detector: Detector | None = None,
) -> Iterator[tuple[Frame, Instances, Instances]]:
    """``(frame, ground truth, detections)`` of a synthetic scene.

    Detections come from ``detector`` (a model run on the rendered frame)
    when one is given, else from the ground truth degraded by ``degrade``
    (``None``: exact ground truth).
    """
    from streamseg.synthetic.scene import SyntheticScene

    scene = SyntheticScene(
        seed=seed, height=height, width=width, fps=fps, num_objects=objects, num_frames=frames
    )
    for f in scene:
        gt = f.gt if masks else f.gt.replace(masks=None)
        image = _NO_IMAGE if detector is None else f.image
        frame = Frame("bench", f.index, f.time, 1.0e9 + f.time, image)
        if detector is not None:
            det = detector(frame)
            det = det if masks else det.replace(masks=None)
        elif degrade is None:
            det = gt.replace(track_ids=None)
        else:
            det = degrade(gt, f.visibility)
        yield frame, gt, det


def mot_summary(
    pairs: Iterator[tuple[Instances, Instances]], *, iou: float = 0.5
) -> dict[str, Any]:
    """py-motmetrics figures of ``(ground truth, tracked detections)`` per frame.

    A hypothesis is a detection with a track id ``>= 0``; it matches a
    ground-truth object when their box IoU is at least ``iou``.
    """
    import motmetrics as mm

    acc = mm.MOTAccumulator(auto_id=True)
    for gt, hyp in pairs:
        tid = hyp.track_ids
        assert tid is not None and gt.track_ids is not None
        shown = tid >= 0
        g, h = gt.boxes.double().numpy(), hyp.boxes[shown].double().numpy()
        # py-motmetrics' own iou_matrix needs numpy < 2 (np.asfarray): the same
        # distance here, 1 - IoU, NaN (no match possible) below ``iou``.
        overlap = box_iou(g, h)
        dist = np.where(overlap >= iou, 1.0 - overlap, np.nan)
        acc.update(gt.track_ids.tolist(), tid[shown].tolist(), dist)
    names = [
        "mota", "motp", "idf1", "idp", "idr", "num_switches", "num_fragmentations",
        "num_false_positives", "num_misses", "mostly_tracked", "num_unique_objects",
        "num_frames",
    ]  # fmt: skip
    summary = mm.metrics.create().compute(acc, metrics=names, name="all")
    out: dict[str, Any] = {}
    for name in names:
        value = summary[name].iloc[0]
        out[name] = round(float(value), 4) if isinstance(value, float) else int(value)
    return out


def quality(
    *,
    settings: TrackingConfig,
    seeds: Sequence[int],
    frames: int,
    width: int,
    height: int,
    fps: float,
    objects: int,
    degrade: Callable[[int], Degrade | None],
    masks: bool = False,
    detector: Detector | None = None,
) -> dict[str, Any]:
    """MOT figures over ``seeds`` scenes pooled into one accumulator.

    ``detector``: score tracks of a model's detections instead of degraded
    ground truth (see :func:`synthetic_detections`).
    """

    def pairs() -> Iterator[tuple[Instances, Instances]]:
        for seed in seeds:
            stage = TrackingStage(tracking=settings, alerts=AlertsConfig(), class_names=_NAMES)
            for frame, gt, det in synthetic_detections(
                seed=seed,
                frames=frames,
                width=width,
                height=height,
                fps=fps,
                objects=objects,
                degrade=degrade(seed),
                masks=masks,
                detector=detector,
            ):
                tracked, _ = stage.process(FrameResult(frame, det))
                # Ids are per stage: offset them so scenes never share an id.
                assert gt.track_ids is not None  # the scene's ground truth is tracked
                gt_ids = gt.track_ids + seed * 1_000_000
                ids = tracked.instances.track_ids
                assert ids is not None
                hyp_ids = torch.where(ids >= 0, ids + seed * 1_000_000, ids)
                yield gt.replace(track_ids=gt_ids), tracked.instances.replace(track_ids=hyp_ids)
            stage.close()

    return mot_summary(pairs())


_NAMES = ("__background__", "disc", "square", "triangle", "star")


# -- cost ------------------------------------------------------------------------------

WIDTH, HEIGHT = 1920, 1080


def moving_boxes(n: int, frames: int, seed: int = 0) -> Iterator[np.ndarray]:
    """``(n, 4)`` xyxy boxes per frame: constant velocities, bouncing off the frame's edges."""
    rng = np.random.default_rng(seed)
    size = rng.uniform(30, 80, (n, 2))
    pos = rng.uniform(0, 1, (n, 2)) * (np.array([WIDTH, HEIGHT]) - size)
    vel = rng.normal(0, 4, (n, 2))
    hi = np.array([WIDTH, HEIGHT]) - size
    for _ in range(frames):
        pos = pos + vel
        bounce = (pos < 0) | (pos > hi)
        vel = np.where(bounce, -vel, vel)
        pos = np.clip(pos, 0, hi)
        jitter = rng.normal(0, 1.0, (n, 4))
        yield np.concatenate((pos, pos + size), axis=1) + jitter


def bench_rules() -> AlertsConfig:
    """Two zones, two lines and one rule of every kind on camera ``bench``."""
    return AlertsConfig.model_validate(
        {
            "cameras": {
                "bench": {
                    "coordinates": "normalized",
                    "zones": {
                        "left": {"polygon": [[0.05, 0.1], [0.45, 0.1], [0.45, 0.9], [0.05, 0.9]]},
                        "mid": {
                            "polygon": [[0.5, 0.2], [0.8, 0.3], [0.7, 0.8], [0.45, 0.7], [0.4, 0.4]]
                        },
                    },
                    "lines": {
                        "v": {"points": [[0.5, 0.0], [0.5, 1.0]]},
                        "h": {"points": [[0.0, 0.5], [1.0, 0.5]], "in_side": "left"},
                    },
                    "rules": [
                        {"name": "in-left", "type": "zone", "zone": "left", "include_mask": False},
                        {"name": "in-mid", "type": "zone", "zone": "mid", "include_mask": False},
                        {"name": "cross-v", "type": "line", "line": "v", "include_mask": False},
                        {"name": "cross-h", "type": "line", "line": "h", "include_mask": False},
                        {
                            "name": "loiter",
                            "type": "dwell",
                            "zone": "mid",
                            "seconds": 2.0,
                            "include_mask": False,
                        },
                        {
                            "name": "crowd",
                            "type": "crowding",
                            "zone": "left",
                            "max_occupancy": 20,
                            "include_mask": False,
                        },
                    ],
                }
            }
        }
    )


def cost(
    *,
    objects: int,
    frames: int = 200,
    warmup: int = 20,
    rules: bool = True,
    settings: TrackingConfig | None = None,
    load: tuple[int, int] | None = None,
    fps: float = 0.0,
    nice: int = 0,
) -> dict[str, Any]:
    """Milliseconds per ``TrackingStage.process`` call with ``objects`` detections per frame.

    ``ms_*``: wall time (mean, median, 99th percentile); ``cpu_ms_mean``:
    the thread's CPU time, which a busy shared machine inflates less.
    ``load``: ``(processes, threads)`` kept busy beside it while it runs
    (:class:`streamseg.bench.busy.Busy`), as the model and the other host
    threads are in ``serve``; ``nice``: the priority steps its processes run
    below this one (``runtime.model_nice``). ``fps``: frames handed over at this rate (the
    loop sleeps until each frame is due), as a camera's frames reach the
    stage; 0: back to back. A thread that runs without a pause is cut by
    the OS scheduler at the end of its time slice wherever it is, and on a
    busy machine waits there for the other processes' turns; one that
    sleeps between frames, as the stage does in ``serve``, starts each
    frame with a fresh turn.
    """
    stage = TrackingStage(
        tracking=settings or TrackingConfig(),
        alerts=bench_rules() if rules else AlertsConfig(),
        class_names=_NAMES,
    )
    results = []
    rng = np.random.default_rng(1)
    labels = torch.from_numpy(rng.integers(1, 5, objects))
    for i, boxes in enumerate(moving_boxes(objects, frames + warmup)):
        inst = Instances(
            image_size=(HEIGHT, WIDTH),
            boxes=torch.from_numpy(boxes).float(),
            scores=torch.from_numpy(rng.uniform(0.3, 1.0, objects)).float(),
            labels=labels,
        )
        results.append(FrameResult(Frame("bench", i, i / 15, 1.0e9 + i / 15, _NO_IMAGE), inst))
    times, cpu = [], []
    events = 0
    with (
        contextlib.nullcontext()
        if load is None
        else Busy(processes=load[0], threads=load[1], nice=nice)
    ):
        due = time.perf_counter()
        for i, result in enumerate(results):
            if fps > 0:
                due += 1.0 / fps
                time.sleep(max(due - time.perf_counter(), 0.0))
            start, start_cpu = time.perf_counter(), time.thread_time()
            _, ev = stage.process(result)
            took, took_cpu = time.perf_counter() - start, time.thread_time() - start_cpu
            if i >= warmup:
                times.append(took * 1e3)
                cpu.append(took_cpu * 1e3)
                events += len(ev)
    stage.close()
    times.sort()
    return {
        "objects": objects,
        "rules": 6 if rules else 0,
        "ms_mean": round(statistics.fmean(times), 4),
        "ms_p50": round(times[len(times) // 2], 4),
        "ms_p99": round(times[min(len(times) - 1, math.ceil(0.99 * len(times)) - 1)], 4),
        "cpu_ms_mean": round(statistics.fmean(cpu), 4),
        "events": events,
        "frames": frames,
        "load": None if load is None else {"processes": load[0], "threads": load[1], "nice": nice},
        "fps": fps,
    }
