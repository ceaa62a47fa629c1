"""Small checkpoints the tests make: maskrcnn_small with random weights, as the trainer saves it."""

from __future__ import annotations

from pathlib import Path

import torch

from streamseg.models.checkpoint import save_checkpoint

# The synthetic scene's classes.
NAMES = ["__background__", "disc", "square", "triangle", "star"]
# The small input size of the model tests, trainer tests and checkpoints: quick to run.
SMALL_INPUT = {"min_size": 64, "max_size": 96}
# Small inputs and every detection kept: quick, and random weights still find something.
OPTIONS = {**SMALL_INPUT, "score_threshold": 0.0, "detections_per_image": 5}


def random_checkpoint(
    path: Path, seed: int, names: list[str] = NAMES, *, faults: str | None = None
) -> Path:
    """maskrcnn_small with random weights of ``seed`` and classes ``names``, saved at ``path``.

    ``faults``: a ``maskrcnn_small_faulty`` checkpoint instead (the same
    weights), failing on the forward passes ``faults`` names
    (``tests/support/faulty_model.py``); the model's own process builds
    it from the file as ``serve`` does.
    """
    from streamseg.models import build_model

    torch.manual_seed(seed)
    model = build_model("maskrcnn_small", class_names=names, **OPTIONS)
    options: dict[str, object] = dict(OPTIONS)
    arch = "maskrcnn_small"
    if faults is not None:
        arch, options["faults"] = "maskrcnn_small_faulty", faults
    meta = {"arch": arch, "class_names": names, "model_options": options}
    save_checkpoint(path, model.state_dict(), **meta)
    return path
