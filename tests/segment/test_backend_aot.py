"""``streamseg export`` + ``backend: aot``: a package loads without compiling and matches eager.

The export compiles two dense parts (``--parts``: the RPN head, an image part
with a static batch, and the box predictor, a RoI part with a dynamic first
dimension) to keep the test within a minute on 2 cores; the rest stays eager.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamseg.segment import Segmenter
from streamseg.types import FrameBatch
from tests.conftest import run_cli
from tests.segment.backend_cases import assert_close_results, write_checkpoint
from tests.segment.conftest import SMALL, scene_batch

PARTS = "rpn.head,roi_heads.box_predictor"


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    folder = tmp_path_factory.mktemp("aot")
    weights = write_checkpoint(folder / "a.pth", seed=1)
    out = folder / "small.pt2"
    result = run_cli(
        "export", "--arch", "maskrcnn_small", "--weights", weights, "--size", "96x160",
        "--batch", "2", "--min-size", "96", "--max-size", "160", "--parts", PARTS,
        "--out", str(out),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    info = json.loads(result.stdout)
    assert info["batch"] == 2 and [info["input_height"], info["input_width"]] == [96, 160]
    assert [p[0] for p in info["parts"]] == PARTS.split(",")
    assert out.is_file()
    return out, weights


@pytest.mark.parametrize("cameras", [1, 2, 3])  # padded to 2, exactly 2, two chunks
def test_aot_matches_eager(package: tuple[Path, str], cameras: int) -> None:
    path, weights = package
    batch = scene_batch([(96, 160)] * cameras)
    eager = Segmenter(weights=weights, **SMALL)
    aot = Segmenter(weights=weights, backend="aot", aot_package=str(path), **SMALL)
    assert_close_results(eager.segment(batch), aot.segment(batch))
    aot.close()


def test_warm_up_uses_the_package_frame_size(package: tuple[Path, str]) -> None:
    path, weights = package
    aot = Segmenter(weights=weights, backend="aot", aot_package=str(path), **SMALL)
    # A frame at the model's own largest input would not fit the package.
    assert aot.backend.warm_up_frame(800, 1333) == (96, 160)
    assert aot.warm_up() > 0
    aot.close()


def test_hot_swap_reloads_the_package_weights(package: tuple[Path, str], tmp_path: Path) -> None:
    path, weights = package
    batch: FrameBatch = scene_batch([(96, 160)] * 2)
    aot = Segmenter(weights=weights, backend="aot", aot_package=str(path), **SMALL)
    other = write_checkpoint(tmp_path / "b.pth", seed=2)
    aot.load_weights(other)
    assert_close_results(Segmenter(weights=other, **SMALL).segment(batch), aot.segment(batch))


def test_a_package_for_other_settings_is_a_clear_error(package: tuple[Path, str]) -> None:
    path, _ = package
    with pytest.raises(ValueError, match="precision: package 'fp32', model 'bf16'"):
        Segmenter(backend="aot", aot_package=str(path), precision="bf16", **SMALL)
    with pytest.raises(ValueError, match="arch: package 'maskrcnn_small'"):
        Segmenter(
            backend="aot", aot_package=str(path), arch="maskrcnn_r50_fpn", min_size=96, max_size=160
        )
    with pytest.raises(ValueError, match="style: package 'torchvision', model 'detectron2'"):
        Segmenter(backend="aot", aot_package=str(path), style="detectron2", **SMALL)
    aot = Segmenter(backend="aot", aot_package=str(path), **SMALL)
    with pytest.raises(ValueError, match="export it again with --size"):
        aot.segment(scene_batch([(200, 120)]))  # portrait: 160x96 > 96x160


def test_a_file_that_is_no_package_is_a_clear_error(tmp_path: Path) -> None:
    bogus = tmp_path / "model.pt2"
    bogus.write_bytes(b"not a zip")
    with pytest.raises(ValueError, match=r"is not a \.pt2 archive.*streamseg export"):
        Segmenter(backend="aot", aot_package=str(bogus), **SMALL)


@pytest.mark.parametrize("command", ["check", "serve"])
def test_serve_and_check_refuse_a_package_for_other_settings(
    package: tuple[Path, str], tmp_path: Path, command: str
) -> None:
    path, weights = package
    model = {k: v for k, v in SMALL.items() if k != "score_threshold"}
    model |= {"weights": weights, "backend": "aot", "aot_package": str(path)}
    model |= {"precision": "bf16", "hot_swap": False}  # the package is fp32
    pipeline = {
        "cameras": [{"id": "cam", "url": "synthetic://?seed=1&width=160&height=96&frames=2"}],
        "model": model,
        "http": {"enabled": False},
    }
    config = tmp_path / "pipeline.yaml"
    config.write_text(json.dumps(pipeline))  # JSON is YAML
    args = [command, str(config)] + (["--no-status"] if command == "serve" else [])
    proc = run_cli(*args)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert "model.aot_package:" in out and "precision: package 'fp32', model 'bf16'" in out
    assert "export it again" in out and "Traceback" not in out
