"""``examples/coco-rtsp.yaml`` is a valid pipeline: ``streamseg check`` finds nothing
wrong with the file itself.

CI has neither a GPU nor the COCO weights (and must not download them), so
``check`` reports exactly those two, each with its fix; everything else in
the file (every key, the RTSP URL, zones, lines and rules) validates. The rule
classes are checked against the catalogue entry's class names, which
``check`` can only do once the weights are there.
"""

from __future__ import annotations

import torch

from streamseg.config import load_pipeline
from streamseg.models.weights import lookup
from tests.conftest import REPO

EXAMPLE = REPO / "examples" / "coco-rtsp.yaml"
PASSWORD = "pa55-word-in-env"


def test_coco_rtsp_example_checks(cli, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("CAMERA_PASSWORD", PASSWORD)
    monkeypatch.setenv("STREAMSEG_WEIGHTS_DIR", str(tmp_path / "empty-cache"))
    monkeypatch.delenv("STREAMSEG_WEIGHTS_CATALOGUE", raising=False)
    proc = cli("check", str(EXAMPLE))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    issues = {line.split(": ", 2)[1]: line for line in lines[:-1]}
    expected = {"model.weights"} | ({"model.device"} if not torch.cuda.is_available() else set())
    assert set(issues) == expected, proc.stderr
    assert lines[-1] == f"{EXAMPLE}: {len(expected)} error{'s' if len(expected) > 1 else ''}"
    name = "torchvision-maskrcnn-r50-fpn-v2-coco"
    assert f"`streamseg weights get {name}`" in issues["model.weights"]
    if "model.device" in issues:
        assert "sees no CUDA GPU" in issues["model.device"]
    assert PASSWORD not in proc.stdout + proc.stderr
    # Every error names its YAML line, those about the machine and the weights too.
    text = EXAMPLE.read_text().splitlines()
    for field, line in issues.items():
        number = int(line.removeprefix(f"{EXAMPLE}:").split(":", 1)[0])
        assert text[number - 1].strip().startswith(field.split(".")[-1] + ":"), (field, line)


def test_coco_rtsp_example_without_the_password(cli, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The unset variable is the one error of that field, at its line (it used to bring a
    second one, about the port of the text ``${CAMERA_PASSWORD}`` left in the url). The
    start-up checks of the other sections are listed with it (every layer in one run):
    on this machine, weights not downloaded and no CUDA GPU."""
    monkeypatch.delenv("CAMERA_PASSWORD", raising=False)
    proc = cli("check", str(EXAMPLE))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    line = next(n for n, t in enumerate(EXAMPLE.read_text().splitlines(), 1) if "url: rtsp" in t)
    assert [t for t in lines if "cameras[0].url" in t] == [
        f"{EXAMPLE}:{line}: cameras[0].url: environment variable CAMERA_PASSWORD is not set "
        "(export CAMERA_PASSWORD=... or write ${CAMERA_PASSWORD:-default})",
    ], proc.stderr
    others = [t for t in lines[:-1] if "cameras[0].url" not in t]
    assert all(": model." in t for t in others), proc.stderr
    n = len(lines) - 1
    assert lines[-1] == f"{EXAMPLE}: {n} error{'s' if n != 1 else ''}", proc.stderr


def test_coco_rtsp_example_names_coco_classes(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("CAMERA_PASSWORD", PASSWORD)
    monkeypatch.delenv("STREAMSEG_WEIGHTS_CATALOGUE", raising=False)
    config = load_pipeline(EXAMPLE)
    entry = lookup(str(config.model.weights))
    assert entry is not None and entry.arch == config.model.arch == "maskrcnn_r50_fpn_v2"
    names = set(entry.class_names() or ())
    rules = [rule for cam in config.alerts.cameras.values() for rule in cam.rules]
    assert {rule.type for rule in rules} >= {"zone", "line"}
    for rule in rules:
        assert rule.classes and set(rule.classes) <= names, rule.name
    assert config.cameras[0].url.startswith("rtsp://") and PASSWORD in config.cameras[0].url


def test_panoptic_example_checks(cli) -> None:  # type: ignore[no-untyped-def]
    """``examples/panoptic.yaml``: the shipped panoptic model, its regions' rules."""
    proc = cli("check", str(REPO / "examples" / "panoptic.yaml"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    config = load_pipeline(REPO / "examples" / "panoptic.yaml")
    assert config.model.task == "panoptic" and config.model.stuff_classes == [
        "ground",
        "road",
        "water",
    ]
    rules = [rule.type for cam in config.alerts.cameras.values() for rule in cam.rules]
    assert {"region", "coverage"} <= set(rules)
