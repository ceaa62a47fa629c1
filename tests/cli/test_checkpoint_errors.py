"""One owner of "is this checkpoint usable": ``eval``, ``label`` and ``weights verify --load``
explain a bad weights file exactly as ``serve`` does, exit 2, and never show a traceback.

The files are those of the start-up battery (tests/cli/test_startup_errors.py):
empty, text, random bytes, truncated, another architecture's checkpoint. What
``serve`` says of each is taken from ``check``, which runs the same loader;
the battery shows ``serve`` saying it, word for word for the text file, in
both ``runtime.model_process`` modes.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from streamseg.cli import main
from tests.cli.test_startup_errors import SMALL_MODEL, _pipeline, _weights

BAD = ("empty", "text", "random", "truncated", "other_arch")


@pytest.fixture(scope="module")
def weights(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return _weights(tmp_path_factory.mktemp("weights"))


def _error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """The one ``streamseg: error:`` line ``argv`` ends with (exit code 2, no traceback)."""
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2, out + err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith("streamseg: error:")]
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize("kind", BAD)
def test_eval_label_and_weights_verify_say_what_serve_says(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, weights: dict[str, Path], kind: str
) -> None:
    path = str(weights[kind])
    config = tmp_path / "pipeline.yaml"
    config.write_text(json.dumps(_pipeline(model={"weights": path})))
    # What serve says of this file (its start-up check runs the same loader).
    check = _error_lines(capsys, ["check", str(config)])
    serve_says = re.sub(r"^.*? model\.weights: ", "", check)
    assert SMALL_MODEL["arch"] == "maskrcnn_small" and serve_says

    data = "synthetic://?seed=1&frames=2&width=96&height=64"
    arch = ["--arch", "maskrcnn_small"]
    said = _error(capsys, ["eval", "--weights", path, "--data", data, *arch])
    assert said == f"streamseg: error: --weights: {serve_says}"
    video = tmp_path / "clip.mp4"
    video.write_bytes(b"")  # never read: the teacher is loaded first
    out = str(tmp_path / "labels")
    said = _error(capsys, ["label", str(video), "--weights", path, "--out", out, *arch])
    assert said == f"streamseg: error: --weights: {serve_says}"

    # weights verify --load: the file is the catalogue's (same hash), it does not load.
    blob = Path(path).read_bytes()
    entry = {
        "name": "bad",
        "arch": "maskrcnn_small",
        "classes": "checkpoint",
        "url": "http://127.0.0.1:9/bad.pth",
        "filename": Path(path).name,
        "size": len(blob),
        "sha256": hashlib.sha256(blob).hexdigest(),
        "licence": "test",
    }
    catalogue = tmp_path / "catalogue.json"
    catalogue.write_text(json.dumps({"entries": [entry]}))
    argv = ["weights", "--catalogue", str(catalogue), "verify", path, "--name", "bad", "--load"]
    said = _error(capsys, argv)
    assert said == f"streamseg: error: {path}: does not load as maskrcnn_small: {serve_says}"


def _error_lines(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """``check``'s report: its one problem line."""
    code = main(argv)
    _out, err = capsys.readouterr()
    assert code == 2, err
    lines = [line for line in err.splitlines() if " model.weights: " in line]
    assert len(lines) == 1, err
    return lines[0]
