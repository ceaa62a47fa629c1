"""``model.<family>:``: options only one family takes, in the section its row names."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from streamseg.config import ConfigError, load_pipeline
from streamseg.models import FAMILIES
from streamseg.segment.config import ModelConfig

HEAD = "cameras:\n  - id: cam\n    url: synthetic://?seed=1\n"


def load(tmp_path: Path, model: str):  # type: ignore[no-untyped-def]
    path = tmp_path / "pipeline.yaml"
    path.write_text(HEAD + "model:\n  missing_weights: random\n" + model)
    return load_pipeline(path)


def test_the_family_section_reaches_the_builder(tmp_path: Path) -> None:
    config = load(tmp_path, "  arch: maskrcnn_small\n  maskrcnn:\n    rpn_nms_threshold: 0.6\n")
    assert config.model.segmenter_options(None)["rpn_nms_threshold"] == 0.6
    assert "rpn_nms_threshold" not in ModelConfig.model_fields  # not a shared option
    assert set(ModelConfig.model_fields) >= {n for n, f in FAMILIES.items() if f.options}


def test_the_old_place_still_loads_with_a_deprecation_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="streamseg.config"):
        config = load(tmp_path, "  arch: maskrcnn_small\n  rpn_nms_threshold: 0.6\n")
    assert config.model.family_options() == {"rpn_nms_threshold": 0.6}
    assert "model.maskrcnn.rpn_nms_threshold" in caplog.text and "deprecated" in caplog.text


@pytest.mark.parametrize(
    ("model", "words"),
    [
        (
            "  arch: mask2former_tiny\n  maskrcnn:\n    rpn_nms_threshold: 0.6\n",
            ["model.maskrcnn", "mask2former_tiny is mask2former"],
        ),
        (
            "  arch: maskrcnn_small\n  rpn_nms_threshold: 0.6\n  maskrcnn:\n"
            "    rpn_nms_threshold: 0.5\n",
            ["set twice", "keep only model.maskrcnn.rpn_nms_threshold"],
        ),
        (
            "  arch: maskrcnn_small\n  maskrcnn:\n    rpn_nms_threshold: 2\n",
            ["model.maskrcnn.rpn_nms_threshold", "less than or equal to 1"],
        ),
    ],
    ids=["other_family", "twice", "out_of_range"],
)
def test_bad_family_sections_are_refused(tmp_path: Path, model: str, words: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, model)
    text = info.value.format()
    for word in words:
        assert word in text, text
