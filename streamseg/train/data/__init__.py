"""Datasets for training and evaluation: COCO instance JSON and synthetic scenes.

Every dataset yields :class:`Sample` objects whose labels index the training
``class_names`` (``"__background__"`` first), matched to each dataset's own
categories by name, so several datasets with different category ids train
together.

One module per kind (``coco``, ``synthetic``, ``union``) over what they share
(``common``); every name is imported from here.
"""

from __future__ import annotations

from streamseg.train.data.coco import CocoDataset
from streamseg.train.data.common import (
    BACKGROUND,
    DatasetError,
    DetectionDataset,
    GroundTruth,
    Sample,
    decode_segmentation,
    encode_mask,
    segmentation_to_rle,
)
from streamseg.train.data.synthetic import SyntheticDataset
from streamseg.train.data.union import UnionDataset

__all__ = [
    "BACKGROUND",
    "CocoDataset",
    "DatasetError",
    "DetectionDataset",
    "GroundTruth",
    "Sample",
    "SyntheticDataset",
    "UnionDataset",
    "decode_segmentation",
    "encode_mask",
    "segmentation_to_rle",
]
