"""Compiled backends on the tiny Mask2Former: inductor and ``streamseg export`` + aot match eager.

Inductor compiles the decoder head only (the pixel level module adds about
two minutes on 2 busy cores; its inductor compile was checked by hand and
matches). The AOT package holds both parts: running one compiled part on
another's output, and the pixel decoder's traced constants, are what broke
before (see ``dense_layout`` and ``AotBackend.weights_loaded``); the export
takes about three minutes, hence ``slow``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from torch._dynamo.utils import counters

from streamseg.segment import Segmenter
from streamseg.segment.dense import dense_parts
from tests.conftest import run_cli
from tests.segment.backend_cases import assert_close_results, write_checkpoint
from tests.segment.conftest import TINY_M2F, scene_batch


@pytest.fixture(scope="module")
def weights(tmp_path_factory: pytest.TempPathFactory) -> str:
    return write_checkpoint(tmp_path_factory.mktemp("m2f") / "a.pth", seed=1, config=TINY_M2F)


def test_inductor_head_matches_eager(weights: str, tmp_path: Path) -> None:
    compiled = Segmenter(weights=weights, backend="inductor", compiled_parts=("head",), **TINY_M2F)
    parts = dense_parts(compiled.model)
    assert [p.path for p in parts] == ["model.pixel_level_module", "head"]
    assert [p.path for p in parts if "forward" in p.module.__dict__] == ["head"]
    eager = Segmenter(weights=weights, **TINY_M2F)
    graphs = counters["stats"]["unique_graphs"]
    two = scene_batch([(96, 160)] * 2)
    assert_close_results(eager.segment(two), compiled.segment(two))
    one = scene_batch([(96, 160)])  # padded to the batch of 2 already compiled
    assert_close_results(eager.segment(one), compiled.segment(one))
    # One compile: the padded batch's features are laid out as the full batch's
    # (the pixel decoder returns strided views; a fresh padded tensor is dense).
    assert counters["stats"]["unique_graphs"] == graphs + 1
    # A hot swap copies weights in place: no recompilation, new results.
    other = write_checkpoint(tmp_path / "b.pth", seed=2, config=TINY_M2F)
    compiled.load_weights(other)
    fresh = Segmenter(weights=other, **TINY_M2F)
    assert_close_results(fresh.segment(two), compiled.segment(two))
    compiled.close()
    assert not any("forward" in p.module.__dict__ for p in parts)


@pytest.fixture(scope="module")
def package(weights: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("m2f-aot") / "tiny.pt2"
    result = run_cli(
        "export", "--arch", "mask2former_tiny", "--weights", weights, "--size", "96x160",
        "--batch", "2", "--min-size", "96", "--max-size", "160", "--out", str(out),
        timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    info = json.loads(result.stdout)
    assert info["arch"] == "mask2former_tiny" and info["batch"] == 2
    assert info["parts"] == [["model.pixel_level_module", "image"], ["head", "image"]]
    assert [info["input_height"], info["input_width"]] == [96, 160]
    return out


@pytest.mark.slow
@pytest.mark.timeout(1200)  # the export's own limit is 900 s; beside 3 busy workers it needs it
def test_aot_package_matches_eager_and_takes_new_weights(
    package: Path, weights: str, tmp_path: Path
) -> None:
    eager = Segmenter(weights=weights, **TINY_M2F)
    aot = Segmenter(weights=weights, backend="aot", aot_package=str(package), **TINY_M2F)
    for cameras in (1, 2, 3):  # padded to 2, exactly 2, two chunks
        batch = scene_batch([(96, 160)] * cameras)
        assert_close_results(eager.segment(batch), aot.segment(batch))
    other = write_checkpoint(tmp_path / "b.pth", seed=2, config=TINY_M2F)
    aot.load_weights(other)
    batch = scene_batch([(96, 160)] * 2)
    assert_close_results(Segmenter(weights=other, **TINY_M2F).segment(batch), aot.segment(batch))
    aot.close()
