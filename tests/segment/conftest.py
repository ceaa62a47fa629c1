"""Tiny inputs for the Segmenter tests: the small Mask R-CNN and the tiny Mask2Former at a
small size."""

from __future__ import annotations

import time

import pytest

from streamseg.synthetic.scene import SYNTHETIC_CLASS_NAMES, SyntheticScene
from streamseg.types import Frame, FrameBatch

# maskrcnn_small resized to at most 128x224: fast on 2 cores. score_threshold 0
# makes random weights give detections, so the box and mask heads always run.
SMALL = {"arch": "maskrcnn_small", "min_size": 96, "max_size": 160, "score_threshold": 0.0}

# The few-channel Mask2Former at the same size, with the synthetic scenes' classes.
TINY_M2F = {
    "arch": "mask2former_tiny",
    "class_names": SYNTHETIC_CLASS_NAMES,
    "min_size": 96,
    "max_size": 160,
    "score_threshold": 0.0,
    "detections_per_image": 10,
}


def scene_batch(sizes: list[tuple[int, int]], index: int = 0) -> FrameBatch:
    """One frame per camera, camera ``i`` a synthetic scene of ``sizes[i]``."""
    frames = []
    for cam, (h, w) in enumerate(sizes):
        scene = SyntheticScene(seed=cam, height=h, width=w)
        frames.append(
            Frame(
                camera_id=f"cam{cam}",
                seq=index,
                pts=scene.time(index),
                capture_time=time.time(),
                image=scene.frame(index).image,
            )
        )
    return FrameBatch(tuple(frames))


@pytest.fixture(scope="module")
def batch2() -> FrameBatch:
    return scene_batch([(96, 160), (96, 160)])
