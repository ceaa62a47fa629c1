"""``model.num_classes`` / ``class_names``: one convention in pipeline.yaml, each family's
own in ``build_model``.

pipeline.yaml counts the background in ``num_classes`` (like ``class_names``);
Mask R-CNN's build option does too, Mask2Former's does not. The options the
loader produces must build a model with the classes the file names.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from streamseg.config import load_pipeline
from streamseg.models import build_model, class_options

NAMES = ["__background__", "person", "car", "bike"]

# Segmenter arguments that are not build_model options.
_SEGMENTER_ONLY = ("arch", "weights", "device", "precision", "backend", "channels_last")


def _model_options(tmp_path: Path, arch: str, lines: str) -> dict[str, Any]:
    path = tmp_path / "pipeline.yaml"
    path.write_text(
        f"cameras:\n  - id: a\n    url: synthetic://?seed=1\nmodel:\n  arch: {arch}\n{lines}"
    )
    options = load_pipeline(path, environ={}).model.segmenter_options(None)
    assert options["arch"] == arch
    return {k: v for k, v in options.items() if k not in _SEGMENTER_ONLY}


@pytest.mark.parametrize(
    ("arch", "lines", "num_classes"),
    [
        ("maskrcnn_small", "  num_classes: 4\n", 4),
        ("maskrcnn_small", f"  class_names: {NAMES}\n", 4),
        ("maskrcnn_small", f"  num_classes: 4\n  class_names: {NAMES}\n", 4),
        ("mask2former_r50", "  num_classes: 4\n", 3),
        ("mask2former_r50", f"  class_names: {NAMES}\n", 3),
        ("mask2former_swin_t", f"  num_classes: 4\n  class_names: {NAMES}\n", 3),
    ],
)
def test_loaded_classes_build_the_named_model(
    tmp_path: Path, arch: str, lines: str, num_classes: int
) -> None:
    options = _model_options(tmp_path, arch, lines)
    assert options["num_classes"] == num_classes  # the family's own convention
    with torch.device("meta"):  # structure only: no memory, no time
        model = build_model(arch, **options)
    assert len(model.class_names) == 4  # __background__ + 3 objects, whatever the family
    if "class_names" in options:
        assert list(model.class_names) == NAMES


def test_no_classes_keep_the_model_default(tmp_path: Path) -> None:
    options = _model_options(tmp_path, "mask2former_r50", "  score_threshold: 0.3\n")
    assert "num_classes" not in options and "class_names" not in options
    assert options["score_threshold"] == 0.3


@pytest.mark.parametrize(
    ("arch", "names", "count", "expected"),
    [
        ("maskrcnn_r50_fpn", None, 91, {"num_classes": 91}),
        ("mask2former_swin_t", None, 81, {"num_classes": 80}),
        ("mask2former_tiny", ("__background__", "a"), None, {"num_classes": 1}),
        ("maskrcnn_small", ("__background__", "a"), None, {"num_classes": 2}),
        ("mask2former_r50", None, None, {}),
    ],
)
def test_class_options_table(
    arch: str, names: tuple[str, ...] | None, count: int | None, expected: dict[str, Any]
) -> None:
    options = class_options(arch, names, count)
    if names is not None:
        expected = {**expected, "class_names": names}
    assert options == expected
