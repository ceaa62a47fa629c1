"""The model in this process as serving runs it: weights found, built, warmed up.

Both sides build it here: ``serve`` in process
(:func:`streamseg.hosting.build.build_model_stage`) and the worker of a model
in its own process (:mod:`streamseg.hosting.worker`), so both load the same
weights, backend and warm-up.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from streamseg.segment.config import ModelConfig

if TYPE_CHECKING:
    from streamseg.segment.segmenter import Segmenter

__all__ = ["build_segmenter", "resolve_weights"]

log = logging.getLogger("streamseg.runtime")


def resolve_weights(model: ModelConfig) -> str | None:
    """The checkpoint to load, or ``None`` for random weights (``missing_weights: random``)."""
    path = model.weights_file()
    if path is None:
        return None
    if Path(path).exists():  # a file, or a Hugging Face model folder
        return path
    if model.missing_weights == "random":
        log.warning(
            "model: %s does not exist; starting %s from RANDOM weights "
            "(missing_weights: random): detections are meaningless until a checkpoint is there",
            path,
            model.arch,
        )
        return None
    entry = model.catalogue_entry()
    if entry is not None:
        from streamseg.models.weights import not_cached_message

        raise FileNotFoundError(not_cached_message(entry))
    raise FileNotFoundError(f"model weights not found: {path}")


def build_segmenter(model: ModelConfig) -> Segmenter:
    """The model in this process, warmed up, as serving reads it (masks as box-local crops)."""
    from streamseg.segment.segmenter import Segmenter

    options = model.segmenter_options(resolve_weights(model))
    log.info(
        "model: loading %s on %s (%s, %s)", model.arch, model.device, model.precision, model.backend
    )
    # Serving reads masks only through RLE, the tracker's grid and the zones'
    # mask share, all of which take box-local crops: no frame-size masks.
    segmenter = Segmenter(**options, mask_crops=True)
    # The first batch's one-off costs (native kernels, a compiled backend's
    # first run) are paid here, before the cameras start and while /readyz
    # still says the model is loading.
    log.info("model: warm-up batch took %.1f s", segmenter.warm_up())
    return segmenter
