"""Training config: errors name the field and the line; overrides; record section."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamseg.config.record import RecordConfig
from streamseg.train.config import ConfigError, load_train_config

GOOD = """\
model:
  arch: maskrcnn_small
data:
  train:
    - annotations: a.json
solver:
  iterations: 10
output:
  dir: runs/x
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "train.yaml"
    path.write_text(text)
    return path


def test_good_config_and_defaults(tmp_path: Path) -> None:
    cfg = load_train_config(_write(tmp_path, GOOD))
    assert cfg.model.arch == "maskrcnn_small" and cfg.solver.precision == "fp32"
    assert cfg.solver.batch_size == 2 and cfg.data.workers == 2


def test_model_options_are_plain_python(tmp_path: Path) -> None:
    """They go into checkpoint meta, which torch.load(weights_only=True) must read back."""
    import io

    import torch

    text = GOOD.replace(
        "  arch: maskrcnn_small\n",
        "  arch: maskrcnn_small\n  options: {score_threshold: 0.25, min_size: 64, flag: true}\n",
    )
    options = load_train_config(_write(tmp_path, text)).model.options
    assert options == {"score_threshold": 0.25, "min_size": 64, "flag": True}
    assert [type(v) for v in options.values()] == [float, int, bool]
    buffer = io.BytesIO()
    torch.save({"meta": options}, buffer)
    buffer.seek(0)
    assert torch.load(buffer, weights_only=True) == {"meta": options}


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("  iterations: 10", "  iterations: 0", ":7: solver.iterations: Input should be greater"),
        (
            "  iterations: 10",
            "  iterations: 10\n  lr: fast",
            ":8: solver.lr: Input should be a valid number",
        ),
        (
            "  iterations: 10",
            "  iterations: 10\n  batchsize: 4",
            ":8: solver.batchsize: unknown field",
        ),
        (
            "  arch: maskrcnn_small",
            "  arch: yolo",
            ":2: model.arch: Value error, unknown arch 'yolo'",
        ),
        (
            "    - annotations: a.json",
            "    - images: x/",
            ":5: data.train.0: Value error, give exactly one",
        ),
        ("output:\n  dir: runs/x\n", "", ":1: output: required field is missing"),
        (
            "  iterations: 10",
            "  iterations: 10\n  precision: fp8",
            ":8: solver.precision: Input should be 'fp32'",
        ),
        (
            "  iterations: 10",
            "  iterations: 10\n  schedule: step\n  steps: [20]",
            ":9: solver.steps: Value error, `steps` must be",
        ),
    ],
)
def test_errors_name_field_and_line(tmp_path: Path, old: str, new: str, expected: str) -> None:
    path = _write(tmp_path, GOOD.replace(old, new))
    with pytest.raises(ConfigError) as err:
        load_train_config(path)
    assert f"{path}{expected}" in str(err.value)


def test_not_yaml_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_train_config(_write(tmp_path, "model: [\n"))
    with pytest.raises(ConfigError, match="cannot read config"):
        load_train_config(tmp_path / "nope.yaml")


def test_overrides(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD)
    cfg = load_train_config(
        path, ["solver.iterations=3", "data.min_size=[32, 40]", "eval.period=2"]
    )
    assert cfg.solver.iterations == 3 and cfg.data.min_size == (32, 40) and cfg.eval.period == 2
    with pytest.raises(ConfigError, match=r"\(with --set\):7: solver.iterations"):
        load_train_config(path, ["solver.iterations=-1"])
    with pytest.raises(ConfigError, match=r"must look like section\.field=value"):
        load_train_config(path, ["solver.iterations"])


def test_record_section() -> None:
    cfg = RecordConfig.model_validate({"clips": {"enabled": True, "before_s": 3, "after_s": 4}})
    assert cfg.container == "mp4" and cfg.clips.before_s == 3.0
    with pytest.raises(ValueError, match="max_s"):
        RecordConfig.model_validate({"clips": {"before_s": 100, "after_s": 100, "max_s": 60}})
    with pytest.raises(ValueError, match="Extra inputs"):
        RecordConfig.model_validate({"clip": {}})
