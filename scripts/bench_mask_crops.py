"""Frame-size masks vs box-local crops: paste and COCO RLE at 1080p, one thread.

    PYTHONPATH=. python scripts/bench_mask_crops.py [--repeat 30]

Prints JSON: median milliseconds per frame for ``masks`` objects of about
150x100 pixels (mask-head probabilities of smooth blobs), on both paths:

* ``frame``: ``ops.paste_masks_binary`` (the native kernel) into ``(N, H, W)``
  masks, then ``ops.masks_to_rle`` (native, one scan of the frame per mask);
* ``crops``: ``ops.paste_masks_crops`` then ``ops.crops_to_rle``.

``*_message_ms`` times the whole detections message of the frame (masks
encoded as above, plus boxes, scores and labels); ``*_grid_ms`` the coarse
grid that the tracker's mask IoU and the zones' mask share read (64 cells
on the long side). The two paths' RLE strings are checked equal before timing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from streamseg import ops
from streamseg.publish.encode import detections_message
from streamseg.types import Frame, FrameResult, Instances, MaskCrops, mask_grid

FRAME = (1080, 1920)


def detections(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` boxes of about 150x100 pixels anywhere in the frame, and 28x28 probabilities."""
    gen = torch.Generator().manual_seed(seed)
    size = torch.tensor([150.0, 100.0]) * (0.8 + 0.4 * torch.rand((n, 2), generator=gen))
    corner = torch.rand((n, 2), generator=gen) * (torch.tensor([FRAME[1], FRAME[0]]) - size)
    boxes = torch.cat((corner, corner + size), dim=1)
    logits = torch.randn((n, 1, 28, 28), generator=gen) * 4 + 2
    probs = torch.sigmoid(torch.nn.functional.avg_pool2d(logits, 7, 1, 3))[:, 0]
    return probs, boxes


def median_ms(fn: Callable[[], Any], repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return round(statistics.median(times) * 1e3, 3)


def measure(n: int, repeat: int) -> dict[str, Any]:
    probs, boxes = detections(n, seed=n)

    def frame_paste() -> torch.Tensor:
        return ops.paste_masks_binary(probs, boxes, FRAME, 0.5)

    def crop_paste() -> tuple[list[torch.Tensor], torch.Tensor]:
        return ops.paste_masks_crops(probs, boxes, FRAME, 0.5)

    masks = frame_paste()
    crops, regions = crop_paste()
    if ops.masks_to_rle(masks) != ops.crops_to_rle(crops, regions, FRAME):
        raise SystemExit(f"{n} masks: the two paths disagree")
    out = {
        "masks": n,
        "frame": list(FRAME),
        "frame_paste_ms": median_ms(frame_paste, repeat),
        "frame_rle_ms": median_ms(lambda: ops.masks_to_rle(masks), repeat),
        "crop_paste_ms": median_ms(crop_paste, repeat),
        "crop_rle_ms": median_ms(lambda: ops.crops_to_rle(crops, regions, FRAME), repeat),
    }
    out["frame_total_ms"] = round(out["frame_paste_ms"] + out["frame_rle_ms"], 3)
    out["crop_total_ms"] = round(out["crop_paste_ms"] + out["crop_rle_ms"], 3)
    frame = Frame("cam", 0, 0.0, 0.0, torch.zeros((1, 1, 3), dtype=torch.uint8))
    common = {"boxes": boxes, "scores": torch.ones(n), "labels": torch.ones(n, dtype=torch.int64)}
    as_crops = MaskCrops(image_size=FRAME, boxes=regions, crops=crops)
    stride = -(-max(FRAME) // 64)
    for name, form in (("frame", masks), ("crop", as_crops)):
        result = FrameResult(frame, Instances(image_size=FRAME, masks=form, **common))
        out[f"{name}_message_ms"] = median_ms(
            lambda r=result: detections_message(
                r, arch="bench", class_names=("bg", "object"), published_time=0.0
            ),
            repeat,
        )
        out[f"{name}_grid_ms"] = median_ms(lambda f=form: mask_grid(f, stride), repeat)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30, help="timed calls per figure")
    args = parser.parse_args()
    torch.set_num_threads(1)
    results = [measure(n, args.repeat) for n in (10, 50)]
    print(json.dumps({"threads": 1, "torch": torch.__version__, "results": results}, indent=1))


if __name__ == "__main__":
    main()
