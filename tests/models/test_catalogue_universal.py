"""The COCO panoptic and ADE20K semantic Mask2Former entries of the weights catalogue.

The shipped entries' class tables and tasks; their Swin-T structure against
transformers' (built on the meta device); and loading through
``model.weights: NAME`` in pipeline.yaml, on files this test writes in each
entry's published layout (a ``save_pretrained`` safetensors file with hub key
names, a ``pytorch_model.bin`` state dict), with the tiny backbone standing in
for Swin-T so that it runs in seconds.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from transformers.models.mask2former.modeling_mask2former import (
    Mask2FormerForUniversalSegmentation,
)

from streamseg.config import load_pipeline
from streamseg.models import build_model
from streamseg.models.mask2former.config import hf_config
from streamseg.models.weights import load_catalogue
from streamseg.segment import Segmenter
from tests.segment.conftest import scene_batch

PANOPTIC = "hf-mask2former-swin-t-coco-panoptic"
SEMANTIC = "hf-mask2former-swin-t-ade20k-semantic"


@pytest.fixture
def shipped(monkeypatch: pytest.MonkeyPatch) -> dict:
    monkeypatch.delenv("STREAMSEG_WEIGHTS_CATALOGUE", raising=False)
    return load_catalogue()


def test_shipped_entries_name_their_classes_and_task(shipped: dict) -> None:
    pan, sem = shipped[PANOPTIC], shipped[SEMANTIC]
    assert (pan.task, sem.task) == ("panoptic", "semantic")
    names = pan.class_names()
    assert len(names) == 1 + 133 and names[0] == "__background__"
    stuff = pan.stuff_classes()
    assert len(stuff) == 53 and names[81:] == stuff  # 80 things, then the stuff
    assert {"person", "car"} <= set(names[1:81]) and {"railroad", "road"} <= set(stuff)
    ade = sem.class_names()
    assert len(ade) == 1 + 150 and len(set(ade)) == 151 and ade[1:4] == ("wall", "building", "sky")
    assert sem.stuff_classes() == ()
    for entry in (pan, sem):
        assert entry.sha256 is None and "could not be read from here" in entry.hash_source
        assert entry.url.startswith("https://huggingface.co/facebook/mask2former-swin-tiny-")


@pytest.mark.parametrize(("name", "classes"), [(PANOPTIC, 133), (SEMANTIC, 150)])
def test_swin_t_with_the_entry_classes_has_the_published_layout(
    shipped: dict, name: str, classes: int
) -> None:
    names = shipped[name].class_names()
    with torch.device("meta"):
        ours = build_model("mask2former_swin_t", class_names=names, task=shipped[name].task)
        hf = Mask2FormerForUniversalSegmentation(hf_config("swin_t", num_classes=classes))
    assert {k: tuple(v.shape) for k, v in ours.state_dict().items()} == {
        k: tuple(v.shape) for k, v in hf.state_dict().items()
    }
    assert tuple(ours.class_predictor.weight.shape) == (classes + 1, 256)


def _write_files(folder: Path) -> dict[str, Path]:
    """A 133-class file as ``save_pretrained`` writes it and a 150-class ``.bin``."""
    torch.manual_seed(0)
    coco = Mask2FormerForUniversalSegmentation(hf_config("tiny", num_classes=133)).eval()
    coco.save_pretrained(folder / "coco")
    ade = Mask2FormerForUniversalSegmentation(hf_config("tiny", num_classes=150)).eval()
    torch.save(ade.state_dict(), folder / "ade.bin")
    return {PANOPTIC: folder / "coco" / "model.safetensors", SEMANTIC: folder / "ade.bin"}


@pytest.mark.slow
def test_pipeline_loads_catalogue_weights_with_their_task(
    tmp_path: Path, shipped: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    entries = []
    for name, file in _write_files(tmp_path).items():
        entry = shipped[name]
        (cache / entry.filename).write_bytes(file.read_bytes())
        raw = {k: getattr(entry, k) for k in entry.__dataclass_fields__}
        entries.append(raw | {"arch": "mask2former_tiny"})  # the tiny stand-in for Swin-T
    catalogue = tmp_path / "catalogue.json"
    catalogue.write_text(json.dumps({"entries": entries}))
    monkeypatch.setenv("STREAMSEG_WEIGHTS_CATALOGUE", str(catalogue))
    monkeypatch.setenv("STREAMSEG_WEIGHTS_DIR", str(cache))

    for name, task, classes in ((PANOPTIC, "panoptic", 133), (SEMANTIC, "semantic", 150)):
        path = tmp_path / f"{task}.yaml"
        path.write_text(
            "cameras:\n  - id: a\n    url: synthetic://?seed=1\n"
            f"model:\n  arch: mask2former_tiny\n  weights: {name}\n  min_size: 64\n"
            "  max_size: 96\n"
        )
        options = load_pipeline(path, environ={}).model.segmenter_options(
            str(cache / shipped[name].filename)
        )
        assert options["task"] == task and len(options["class_names"]) == classes + 1
        segmenter = Segmenter(**options)
        model = segmenter.model
        assert model.task == task and model.num_classes == classes
        assert int((~model.is_thing).sum()) == (53 if task == "panoptic" else 0)
        (result,) = segmenter.segment(scene_batch([(64, 96)]))
        assert result.regions is not None and result.regions.image_size == (64, 96)
        if task == "semantic":
            assert int(result.regions.areas.sum()) == 64 * 96 and len(result) == 0
