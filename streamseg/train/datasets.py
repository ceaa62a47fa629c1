"""Datasets from the ``data:`` section of a training config."""

from __future__ import annotations

from collections.abc import Sequence

from streamseg.train.config import DatasetConfig
from streamseg.train.data import (
    BACKGROUND,
    CocoDataset,
    DatasetError,
    DetectionDataset,
    SyntheticDataset,
    UnionDataset,
)

__all__ = ["build_dataset", "open_dataset", "resolve_class_names"]


def build_dataset(configs: Sequence[DatasetConfig]) -> UnionDataset:
    """All datasets of a ``data.train`` / ``data.val`` list, one after another."""
    parts: list[DetectionDataset] = []
    for cfg in configs:
        if cfg.synthetic is not None:
            parts.append(SyntheticDataset(cfg.synthetic, frames=cfg.frames, stride=cfg.stride))
        else:
            assert cfg.annotations is not None
            parts.append(
                CocoDataset(cfg.annotations, cfg.images, crowd_as_instances=cfg.crowd_as_instances)
            )
    return UnionDataset(parts)


def open_dataset(spec: str, images: str | None = None) -> UnionDataset:
    """A dataset named on the command line: a COCO JSON path or a synthetic URL."""
    if spec.startswith("synthetic://"):
        return UnionDataset([SyntheticDataset(spec)])
    return UnionDataset([CocoDataset(spec, images)])


def resolve_class_names(
    configured: Sequence[str] | None, dataset: DetectionDataset
) -> tuple[str, ...]:
    """Training class names, ``__background__`` first.

    ``configured`` (``model.class_names``) wins; else the datasets'
    categories in order of first appearance.
    """
    names = tuple(configured) if configured else tuple(dataset.native_class_names)
    if not names:
        raise DatasetError("the training datasets define no categories; set model.class_names")
    return (BACKGROUND, *names)
