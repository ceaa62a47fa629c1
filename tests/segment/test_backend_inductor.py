"""``backend: inductor``: torch.compile of the dense parts matches eager.

Compiling every part of the small model takes minutes on 2 busy cores, so
the comparison compiles three small parts (an image part with a static
batch, and two RoI parts padded to power-of-two counts); the benchmark
(``streamseg bench model --backend inductor``) compiles them all. Inductor
caches its code, so later runs take seconds.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from streamseg.segment import Segmenter
from streamseg.segment.dense import dense_parts
from tests.segment.backend_cases import assert_close_results, write_checkpoint
from tests.segment.conftest import SMALL, scene_batch


@pytest.fixture(scope="module")
def weights(tmp_path_factory: pytest.TempPathFactory) -> str:
    return write_checkpoint(tmp_path_factory.mktemp("inductor") / "a.pth", seed=1)


PARTS = ("rpn.head", "roi_heads.box_predictor", "roi_heads.mask_predictor")


@pytest.fixture(scope="module")
def compiled(weights: str) -> Segmenter:
    return Segmenter(weights=weights, backend="inductor", compiled_parts=PARTS, **SMALL)


def test_the_chosen_dense_parts_are_compiled(compiled: Segmenter) -> None:
    parts = dense_parts(compiled.model)
    assert [p.path for p in parts] == [
        "backbone",
        "rpn.head",
        "roi_heads.box_head",
        "roi_heads.box_predictor",
        "roi_heads.mask_head",
        "roi_heads.mask_predictor",
    ]
    assert [p.path for p in parts if "forward" in p.module.__dict__] == list(PARTS)
    # The module tree and its weights are untouched: checkpoints still fit.
    assert not any("_orig_mod" in k for k in compiled.model.state_dict())


def test_unknown_part_is_a_clear_error() -> None:
    message = r"unknown dense part\(s\) neck; valid: backbone, rpn\.head"
    with pytest.raises(ValueError, match=message):
        Segmenter(backend="inductor", compiled_parts=("neck",), **SMALL)


def test_inductor_matches_eager(compiled: Segmenter, weights: str) -> None:
    eager = Segmenter(weights=weights, **SMALL)
    two = scene_batch([(96, 160)] * 2)
    assert_close_results(eager.segment(two), compiled.segment(two))
    one = scene_batch([(96, 160)])  # padded to the batch of 2 already compiled
    assert_close_results(eager.segment(one), compiled.segment(one))


def test_hot_swap_needs_no_recompile(compiled: Segmenter, tmp_path: Path) -> None:
    other = write_checkpoint(tmp_path / "b.pth", seed=2)
    compiled.load_weights(other)
    batch = scene_batch([(96, 160)] * 2)
    assert_close_results(Segmenter(weights=other, **SMALL).segment(batch), compiled.segment(batch))


def test_close_gives_the_eager_forward_back(weights: str) -> None:
    seg = Segmenter(weights=weights, backend="inductor", **SMALL)
    assert all("forward" in p.module.__dict__ for p in dense_parts(seg.model))
    seg.close()
    assert not any("forward" in p.module.__dict__ for p in dense_parts(seg.model))
