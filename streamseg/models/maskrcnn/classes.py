"""Class-name tables of the checkpoints Mask R-CNN loads."""

from __future__ import annotations

__all__ = ["COCO_CLASS_NAMES", "COCO_CONTIGUOUS_CLASS_NAMES"]

# torchvision's 91 COCO category slots (index = label; "N/A" are unused ids).
COCO_CLASS_NAMES: tuple[str, ...] = (
    "__background__", "person", "bicycle", "car", "motorcycle", "airplane", "bus", "train",
    "truck", "boat", "traffic light", "fire hydrant", "N/A", "stop sign", "parking meter",
    "bench", "bird", "cat", "dog", "horse", "sheep", "cow", "elephant", "bear", "zebra",
    "giraffe", "N/A", "backpack", "umbrella", "N/A", "N/A", "handbag", "tie", "suitcase",
    "frisbee", "skis", "snowboard", "sports ball", "kite", "baseball bat", "baseball glove",
    "skateboard", "surfboard", "tennis racket", "bottle", "N/A", "wine glass", "cup", "fork",
    "knife", "spoon", "bowl", "banana", "apple", "sandwich", "orange", "broccoli", "carrot",
    "hot dog", "pizza", "donut", "cake", "chair", "couch", "potted plant", "bed", "N/A",
    "dining table", "N/A", "N/A", "toilet", "N/A", "tv", "laptop", "mouse", "remote",
    "keyboard", "cell phone", "microwave", "oven", "toaster", "sink", "refrigerator", "N/A",
    "book", "clock", "vase", "scissors", "teddy bear", "hair drier", "toothbrush",
)  # fmt: skip

# The 80 COCO categories numbered without gaps (detectron2's COCO models),
# background first as everywhere in streamseg: label i is the category with
# contiguous id i - 1, i.e. torchvision's list with the "N/A" slots removed.
COCO_CONTIGUOUS_CLASS_NAMES: tuple[str, ...] = tuple(n for n in COCO_CLASS_NAMES if n != "N/A")
