"""Every user mistake ``serve`` can meet while starting: exit 2, the field, the fix, no traceback.

The start-up battery: each case runs through the real CLI, in both
``runtime.model_process`` modes: ``streamseg check`` (which must report it
without opening a camera; run in this process, it is the same ``main``)
and ``streamseg serve`` as a subprocess (which must stop with the same
field named, close what it built, its model's own process included, and
never hang). Nothing here reaches Redis: each mistake stops the service
before it connects.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from streamseg.cli import main
from streamseg.models.checkpoint import CheckpointError
from streamseg.models.trained import load_trained_model
from tests.segment.backend_cases import write_checkpoint
from tests.segment.conftest import SMALL
from tests.support.processes import ended

HAS_GPU = torch.cuda.is_available()
SCENE = "synthetic://?seed=1&width=160&height=96&frames=4"
SMALL_MODEL = {k: v for k, v in SMALL.items() if k != "arch"} | {"arch": "maskrcnn_small"}


def _weights(folder: Path) -> dict[str, Path]:
    """Weights files of every kind of wrong content, plus a good one."""
    good = Path(write_checkpoint(folder / "good.pth", seed=1))
    data = good.read_bytes()
    files = {
        "good": good,
        "empty": folder / "empty.pth",
        "text": folder / "text.pth",
        "random": folder / "random.pth",
        "truncated": folder / "truncated.pth",
        "other_arch": Path(
            write_checkpoint(folder / "m2f.pth", seed=1, config={"arch": "mask2former_tiny"})
        ),
    }
    files["empty"].write_bytes(b"")
    files["text"].write_text("these are not weights\n")
    # Fixed bytes: some random draws begin like a pickle and fail otherwise.
    files["random"].write_bytes(random.Random(7).randbytes(4096))
    files["truncated"].write_bytes(data[: len(data) // 2])
    return files


@pytest.fixture(scope="module")
def weights(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return _weights(tmp_path_factory.mktemp("weights"))


def _pipeline(**sections: Any) -> dict[str, Any]:
    """A pipeline that would serve, with ``sections`` replaced (``model`` is merged)."""
    model = {**SMALL_MODEL, "missing_weights": "random", "hot_swap": False}
    base: dict[str, Any] = {
        "cameras": [{"id": "cam", "url": SCENE}],
        "model": {**model, **sections.pop("model", {})},
        "http": {"enabled": False},
    }
    return {**base, **sections}


def _zone_rule(classes: list[str]) -> dict[str, Any]:
    """Alerts for camera ``cam``: one zone rule on ``classes``."""
    zone = {"polygon": [[0, 0], [160, 0], [160, 96]]}
    rule = {"name": "r", "type": "zone", "zone": "all", "classes": classes}
    return {"cameras": {"cam": {"zones": {"all": zone}, "rules": [rule]}}}


# (name, pipeline built from the weights files, field named, words of the fix)
Case = tuple[str, Callable[[dict[str, Path]], dict[str, Any]], str, list[str]]
CASES: list[Case] = [
    (
        "cuda_without_gpu",
        lambda w: _pipeline(model={"device": "cuda"}),
        "model.device",
        ["sees no CUDA GPU", "device: cpu"],
    ),
    (
        "tensorrt_without_trt_or_gpu",
        lambda w: _pipeline(model={"device": "cuda", "backend": "tensorrt"}),
        "model.backend",
        ["tensorrt", "backend: inductor or aot"],
    ),
    (
        "tensorrt_on_cpu",
        lambda w: _pipeline(model={"backend": "tensorrt"}),
        "model",
        ["needs device 'cuda'"],
    ),
    (
        "aot_package_not_a_package",
        lambda w: _pipeline(model={"backend": "aot", "aot_package": str(w["random"])}),
        "model.aot_package",
        ["not a .pt2 archive", "streamseg export"],
    ),
    (
        "host_cpu_not_usable",
        lambda w: _pipeline(runtime={"host_cpu": 4095}),
        "runtime.host_cpu",
        ["CPU 4095 is not one this process may run on", "use one of 0"],
    ),
    (
        "unknown_file_url_option",
        lambda w: _pipeline(cameras=[{"id": "cam", "url": f"{w['good']}?speed=2"}]),
        "cameras[0].url",
        ["unknown option 'speed'", "allowed: pace, loop"],
    ),
    (
        "unknown_synthetic_url_option",
        lambda w: _pipeline(cameras=[{"id": "cam", "url": "synthetic://?sed=1"}]),
        "cameras[0].url",
        ["sed"],
    ),
    (
        "missing_v4l2_device",
        lambda w: _pipeline(cameras=[{"id": "cam", "url": "v4l2:///dev/video77"}]),
        "cameras[0].url",
        ["/dev/video77 does not exist", "ls /dev/video"],
    ),
    (
        "missing_video_file_url",
        lambda w: _pipeline(cameras=[{"id": "cam", "url": "file:///nowhere/clip.mp4"}]),
        "cameras[0].url",
        ["does not exist", "fix `url`"],
    ),
    *[
        (
            f"weights_{kind}",
            (lambda k: lambda w: _pipeline(model={"weights": str(w[k])}))(kind),
            "model.weights",
            [words],
        )
        for kind, words in [
            ("empty", "truncated or not a PyTorch checkpoint"),
            ("text", "cannot be loaded as 'maskrcnn_small' weights"),
            ("random", "could not be read"),
            ("truncated", "could not be read"),
            ("other_arch", "holds a 'mask2former_tiny' model, not 'maskrcnn_small'"),
        ]
    ],
    (
        "alerts_for_an_unknown_camera",
        lambda w: _pipeline(alerts={"cameras": {"gate": {"rules": []}}}),
        "alerts.cameras.gate",
        ["no camera has id 'gate'", "cam"],
    ),
    (
        "clips_for_an_unknown_camera",
        lambda w: _pipeline(record={"clips": {"enabled": True, "cameras": ["gate"]}}),
        "record.clips.cameras[0]",
        ["no camera has id 'gate'"],
    ),
    (
        "clips_for_an_unknown_rule",
        lambda w: _pipeline(record={"clips": {"enabled": True, "rules": ["doorway"]}}),
        "record.clips.rules[0]",
        ["no alert rule is named 'doorway'"],
    ),
    (
        # Its classes are in the checkpoint's meta: found before the model starts.
        "rule_class_the_model_lacks",
        lambda w: _pipeline(model={"weights": str(w["good"])}, alerts=_zone_rule(["zebra"])),
        "alerts.cameras.cam.rules[0].classes",
        ["unknown class 'zebra'", "the model's classes are"],
    ),
    (
        # Random weights: only the built model knows its classes; what was
        # built (the model's own process) is closed before serve exits.
        "rule_class_the_random_model_lacks",
        lambda w: _pipeline(alerts=_zone_rule(["zebra"])),
        "alerts.cameras.cam.rules[0].classes",
        ["unknown class 'zebra'", "the model's classes are"],
    ),
    (
        # A bare /dev/videoN is a V4L2 device, as ingest opens it; not a file.
        "missing_bare_v4l2_device",
        lambda w: _pipeline(cameras=[{"id": "cam", "url": "/dev/video93"}]),
        "cameras[0].url",
        ["V4L2 device /dev/video93 does not exist", "ls /dev/video"],
    ),
    (
        "rule_class_outside_class_names",
        lambda w: _pipeline(
            model={"class_names": ["__background__", "cat"]},
            alerts={
                "cameras": {
                    "cam": {
                        "zones": {"all": {"polygon": [[0, 0], [160, 0], [160, 96]]}},
                        "rules": [{"name": "r", "type": "zone", "zone": "all", "classes": ["dog"]}],
                    }
                }
            },
        ),
        "alerts.cameras.cam.rules[0].classes[0]",
        ["unknown class 'dog'", "cat"],
    ),
]


def _assert_usage_error(
    proc: subprocess.CompletedProcess[str], field: str, words: list[str]
) -> None:
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert "Traceback" not in out, out
    assert f" {field}:" in out or f"streamseg: error: {field}:" in out, out
    for word in words:
        assert word in out, out


def _skip_where_it_works(name: str) -> None:
    if name.startswith(("cuda", "tensorrt_without")) and HAS_GPU:
        import importlib.util

        if name == "cuda_without_gpu" or importlib.util.find_spec("torch_tensorrt"):
            pytest.skip("this machine has what the case lacks")


# Config-file mistakes reach `serve` through the same loader as `check`: two
# of them (tensorrt_on_cpu, missing_bare_v4l2_device) run under `serve` too,
# the rest only under `check`.
_FILE_ONLY = {
    "unknown_file_url_option",
    "alerts_for_an_unknown_camera",
    "clips_for_an_unknown_camera",
    "clips_for_an_unknown_rule",
    "rule_class_outside_class_names",
}
MODES = {False: "in-process", True: "own-process"}
SERVE_RUNS = [
    pytest.param(*case, model_process, id=f"{case[0]}-{label}")
    for case in CASES
    for model_process, label in MODES.items()
    if case[0] not in _FILE_ONLY
]
CHECK_RUNS = [
    pytest.param(*case, model_process, id=f"{case[0]}-{label}")
    for case in CASES
    for model_process, label in MODES.items()
]


def _write(tmp_path: Path, tree: dict[str, Any], model_process: bool) -> Path:
    tree.setdefault("runtime", {})["model_process"] = model_process
    path = tmp_path / "pipeline.yaml"
    path.write_text(json.dumps(tree, indent=1))  # JSON is YAML
    return path


@pytest.mark.parametrize(("name", "build", "field", "words", "model_process"), CHECK_RUNS)
def test_check_reports_the_mistake(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    weights: dict[str, Path],
    name: str,
    build: Callable[[dict[str, Path]], dict[str, Any]],
    field: str,
    words: list[str],
    model_process: bool,
) -> None:
    _skip_where_it_works(name)
    path = _write(tmp_path, build(weights), model_process)
    code = main(["check", str(path)])
    out, err = capsys.readouterr()
    result = subprocess.CompletedProcess(["check"], code, out, err)
    _assert_usage_error(result, field, words)


@pytest.mark.parametrize(("name", "build", "field", "words", "model_process"), SERVE_RUNS)
def test_serve_stops_on_the_mistake(  # type: ignore[no-untyped-def]
    cli,
    tmp_path: Path,
    weights: dict[str, Path],
    name: str,
    build: Callable[[dict[str, Path]], dict[str, Any]],
    field: str,
    words: list[str],
    model_process: bool,
) -> None:
    """Exit 2 with the field and the fix; what start-up built is closed (no
    model process outlives serve) and nothing hangs (the timeout)."""
    _skip_where_it_works(name)
    path = _write(tmp_path, build(weights), model_process)
    proc = cli("serve", str(path), "--no-status", timeout=240)
    _assert_usage_error(proc, field, words)
    workers = [
        int(pid) for pid in re.findall(r"started its own process \(pid (\d+)\)", proc.stderr)
    ]
    assert bool(workers) <= model_process
    if name == "rule_class_the_model_lacks":  # the checkpoint names its classes: found first
        assert not workers, "a model process was started for a rule that cannot run"
    assert all(ended(pid, 2.0) for pid in workers), "a model process outlived serve"
    if name == "weights_text":  # the loader's own words, across the model's process too
        with pytest.raises(CheckpointError) as owner:
            load_trained_model(str(weights["text"]), arch="maskrcnn_small")
        assert f"streamseg: error: model.weights: {owner.value}\n" in proc.stderr


@pytest.mark.parametrize("model_process", list(MODES), ids=list(MODES.values()))
def test_check_accepts_a_bare_v4l2_device_ingest_opens(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, model_process: bool
) -> None:
    """``/dev/videoN`` with a device there: ``check`` accepts it, as ingest does
    (one owner, ``SourceSpec``, says what it is and whether it exists)."""
    import os
    import stat

    from streamseg.ingest.spec import parse_source_url

    device = Path("/dev/video94")  # a character device (/dev/null's numbers), made for this test
    try:
        os.mknod(device, 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    except (PermissionError, FileExistsError) as exc:
        pytest.skip(f"cannot make {device}: {exc}")
    try:
        spec = parse_source_url(str(device), camera_id="cam")
        spec.check_exists("cam")  # what ingest asks before opening it
        assert spec.kind == "v4l2" and spec.input_format == "v4l2"
        path = _write(
            tmp_path, _pipeline(cameras=[{"id": "cam", "url": str(device)}]), model_process
        )
        assert main(["check", str(path), "--no-model"]) == 0, capsys.readouterr().err
        assert f"camera cam: {device}" in capsys.readouterr().out
    finally:
        device.unlink()
