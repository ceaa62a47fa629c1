"""Training config: errors name the field and the line; overrides; record section."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamseg.config import ConfigError
from streamseg.record.config import RecordConfig
from streamseg.train.config import load_train_config

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
    return _write_as(tmp_path, "train.yaml", text)


def _write_as(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
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
            ":8: solver.batchsize: unknown key 'batchsize' (did you mean 'batch_size'?",
        ),
        (
            "  arch: maskrcnn_small",
            "  arch: yolo",
            ":2: model.arch: unknown arch 'yolo'; valid: 'maskrcnn_r50_fpn', ",
        ),
        (
            "    - annotations: a.json",
            "    - images: x/",
            ":5: data.train[0]: give exactly one",
        ),
        ("output:\n  dir: runs/x\n", "", ":1: output: required key is missing (add `output:`)"),
        (
            "  iterations: 10",
            "  iterations: 10\n  precision: fp8",
            ":8: solver.precision: Input should be 'fp32'",
        ),
        (
            "  iterations: 10",
            "  iterations: 10\n  schedule: step\n  steps: [20]",
            ":9: solver.steps: `steps` must be",
        ),
    ],
)
def test_errors_name_field_and_line(tmp_path: Path, old: str, new: str, expected: str) -> None:
    path = _write(tmp_path, GOOD.replace(old, new))
    with pytest.raises(ConfigError) as err:
        load_train_config(path)
    assert f"{path}{expected}" in str(err.value)


def test_not_yaml_and_missing_file(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD.replace("  iterations: 10", "  iterations: [10"))
    with pytest.raises(ConfigError, match=rf"{path}:8: YAML syntax error") as err:
        load_train_config(path)
    assert "check indentation, colons and quotes" in str(err.value)
    with pytest.raises(ConfigError, match=r"nope.yaml: file not found .*training config"):
        load_train_config(tmp_path / "nope.yaml")
    with pytest.raises(ConfigError, match=r"list.yaml:1: the top level must be a mapping"):
        load_train_config(_write_as(tmp_path, "list.yaml", "- model\n"))


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
    with pytest.raises(ConfigError, match=r"--set 'output.dir.x=1': output.dir is not a section"):
        load_train_config(path, ["output.dir.x=1"])
    # A key the file does not have: the error names the section's line.
    with pytest.raises(ConfigError, match=r"\(with --set\):6: solver.lr: Input should be greater"):
        load_train_config(path, ["solver.lr=0"])


def test_every_error_is_listed_at_once_with_its_line(tmp_path: Path) -> None:
    text = GOOD.replace("  iterations: 10", "  iterations: -1\n  lr: fast").replace(
        "  dir: runs/x", "  dir: runs/x\n  period: 3"
    )
    path = _write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_train_config(path)
    assert [(i.line, i.path) for i in err.value.issues] == [
        (7, "solver.iterations"),
        (8, "solver.lr"),
        (11, "output.period"),
    ]
    assert str(err.value).count(str(path)) == 3
    assert "did you mean 'log_period'?" in str(err.value)


def test_environment_variables_are_substituted(tmp_path: Path) -> None:
    text = GOOD.replace("  dir: runs/x", "  dir: ${RUNS:-runs}/${RUN_NAME}").replace(
        "  iterations: 10", "  iterations: ${ITERS:-10}\n  precision: ${PRECISION}"
    )
    path = _write(tmp_path, text)
    env = {"RUN_NAME": "dock", "PRECISION": "bf16", "ITERS": "25"}
    cfg = load_train_config(path, environ=env)
    assert cfg.output.dir == "runs/dock" and cfg.solver.precision == "bf16"
    assert cfg.solver.iterations == 25
    cfg = load_train_config(path, ["output.dir=${RUNS}/x"], environ={**env, "RUNS": "/r"})
    assert cfg.output.dir == "/r/x"


def test_unset_environment_variable_names_line_field_and_fix(tmp_path: Path) -> None:
    text = GOOD.replace("  dir: runs/x", "  dir: runs/${RUN_NAME}")
    path = _write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_train_config(path, environ={})
    assert str(err.value) == (
        f"{path}:9: output.dir: environment variable RUN_NAME is not set "
        "(export RUN_NAME=... or write ${RUN_NAME:-default})"
    )
    path = _write(tmp_path, GOOD.replace("  iterations: 10", "  iterations: ${1X}"))
    with pytest.raises(ConfigError, match=r":7: solver.iterations: bad variable reference"):
        load_train_config(path, environ={})


def test_record_section() -> None:
    cfg = RecordConfig.model_validate({"clips": {"enabled": True, "before_s": 3, "after_s": 4}})
    assert cfg.container == "mp4" and cfg.clips.before_s == 3.0
    with pytest.raises(ValueError, match="max_s"):
        RecordConfig.model_validate({"clips": {"before_s": 100, "after_s": 100, "max_s": 60}})
    with pytest.raises(ValueError, match="Extra inputs"):
        RecordConfig.model_validate({"clip": {}})
