"""Several datasets read as one, one after another."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from streamseg.train.data.common import DatasetError, DetectionDataset, GroundTruth, Sample

__all__ = ["UnionDataset"]


class UnionDataset:
    """Several datasets one after another, with unique image ids."""

    def __init__(self, datasets: Sequence[DetectionDataset]) -> None:
        if not datasets:
            raise DatasetError("no datasets given")
        self.datasets = list(datasets)
        self._offsets = np.cumsum([0] + [len(d) for d in self.datasets])
        names: list[str] = []
        for d in self.datasets:
            names += [n for n in d.native_class_names if n not in names]
        self.native_class_names = tuple(names)

    def set_class_names(self, class_names: Sequence[str]) -> None:
        for d in self.datasets:
            d.set_class_names(class_names)

    def __len__(self) -> int:
        return int(self._offsets[-1])

    def _locate(self, index: int) -> tuple[int, int]:
        if not 0 <= index < len(self):
            raise IndexError(index)
        which = int(np.searchsorted(self._offsets, index, side="right")) - 1
        return which, index - int(self._offsets[which])

    def __getitem__(self, index: int) -> Sample:
        which, local = self._locate(index)
        return dataclasses.replace(self.datasets[which][local], image_id=index)

    def has_instances(self, index: int) -> bool:
        which, local = self._locate(index)
        return self.datasets[which].has_instances(local)

    def stuff_labels(self) -> set[int]:
        """Training labels that some part holds as stuff (synthetic scenes with stuff)."""
        out: set[int] = set()
        for d in self.datasets:
            stuff_of = getattr(d, "stuff_labels", None)
            out |= stuff_of() if stuff_of is not None else set()
        return out

    def ground_truth(self, index: int) -> GroundTruth:
        which, local = self._locate(index)
        return dataclasses.replace(self.datasets[which].ground_truth(local), image_id=index)
