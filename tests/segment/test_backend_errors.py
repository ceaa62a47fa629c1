"""Backends that cannot run here say why and how to fix it; config checks."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pydantic
import pytest
import torch

from streamseg.config import ConfigError, load_pipeline
from streamseg.segment import Segmenter
from streamseg.segment.backends import BackendError
from streamseg.segment.backends.tensorrt import tensorrt_problems
from streamseg.segment.config import ModelConfig
from tests.segment.conftest import SMALL

HAS_TRT = importlib.util.find_spec("torch_tensorrt") is not None


def test_tensorrt_on_cpu_names_the_device_and_the_install() -> None:
    with pytest.raises(BackendError) as info:
        Segmenter(backend="tensorrt", **SMALL)
    assert info.value.field == "model.backend"
    message = str(info.value)
    assert "backend 'tensorrt' cannot run" in message
    assert "set device: cuda" in message and "backend: inductor or aot" in message
    if not HAS_TRT:
        assert "pip install 'streamseg[tensorrt]'" in message


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU message")
def test_tensorrt_on_cuda_without_a_gpu() -> None:
    problems = tensorrt_problems(torch.device("cuda"))
    assert any("sees no CUDA GPU" in p for p in problems)
    with pytest.raises(BackendError, match="sees no CUDA GPU"):
        Segmenter(backend="tensorrt", device="cuda", **SMALL)


def test_config_aot_needs_a_package() -> None:
    with pytest.raises(pydantic.ValidationError, match="backend 'aot' needs aot_package"):
        ModelConfig(backend="aot")
    options = ModelConfig(backend="aot", aot_package="m.pt2").segmenter_options(None)
    assert options["aot_package"] == "m.pt2" and options["backend"] == "aot"
    assert "aot_package" not in ModelConfig().segmenter_options(None)


def test_pipeline_with_a_missing_package_names_the_field(tmp_path: Path) -> None:
    path = tmp_path / "pipeline.yaml"
    path.write_text(
        "cameras:\n  - id: a\n    url: synthetic://?seed=1\n"
        "model:\n  arch: maskrcnn_small\n  backend: aot\n  aot_package: small.pt2\n"
    )
    with pytest.raises(ConfigError) as info:
        load_pipeline(path)
    text = info.value.format()
    assert "aot_package not found" in text and "streamseg export" in text
    (tmp_path / "small.pt2").write_bytes(b"")
    config = load_pipeline(path)
    assert config.model.aot_package == str(tmp_path / "small.pt2")
