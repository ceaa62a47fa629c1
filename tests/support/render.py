"""A synthetic clip and its detections messages, made from the scene's exact ground truth.

``scene_clip`` writes frames ``0..n-1`` of a scene as H.264 (``write_scene``);
``truth_items`` turns the ground truth of chosen frames into tracked
``FrameResult``s with box-local ``MaskCrops`` (the form serve publishes) and
``truth_messages`` encodes them with the real ``MessageEncoder``, so each
message's ``seq`` is the frame's index in the clip, as serve numbers a
file source's frames.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import av
import numpy as np

from streamseg.bench.oracle import FrameTruth
from streamseg.publish.encode import MessageEncoder
from streamseg.synthetic.export import write_scene
from streamseg.synthetic.scene import SyntheticScene
from streamseg.types import FrameResult

__all__ = ["decode_frames", "scene_clip", "truth_items", "truth_messages", "write_jsonl"]


def scene_clip(folder: Path, scene: SyntheticScene) -> Path:
    """The scene's frames as ``folder/scene.mp4`` (H.264, near lossless)."""
    write_scene(scene, folder, crf=10, preset="ultrafast")
    return folder / "scene.mp4"


def truth_items(scene: SyntheticScene, camera: str, seqs: Iterable[int]) -> list[FrameResult]:
    """Tracked results of frames ``seqs``: the exact instances, masks as box crops."""
    out = []
    for seq in seqs:
        sf = scene.frame(seq)
        inst = FrameTruth.of(sf.gt).instances().replace(track_ids=sf.gt.track_ids)
        out.append(FrameResult(sf.to_frame(camera, capture_time=1.7e9 + sf.time), inst))
    return out


def truth_messages(scene: SyntheticScene, camera: str, seqs: Iterable[int]) -> list[dict[str, Any]]:
    """Detections messages of frames ``seqs``, as serve would publish them."""
    encoder = MessageEncoder(arch="oracle", class_names=scene.class_names)
    encoded = encoder.encode([(r, []) for r in truth_items(scene, camera, seqs)])
    return [json.loads(m.data) for m in encoded]


def write_jsonl(path: Path, messages: Iterable[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(m) + "\n" for m in messages), encoding="utf-8")
    return path


def decode_frames(path: Path) -> list[np.ndarray]:
    """Every frame of a video, ``uint8 (H, W, 3)`` RGB."""
    with av.open(str(path)) as container:
        return [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
