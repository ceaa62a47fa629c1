"""``streamseg synth``: writes a scene and prints a JSON summary; clear usage errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamseg.cli import main


def test_synth_writes_a_scene(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "scene"
    proc = cli(
        "synth",
        "--out",
        str(out),
        "--seed",
        "3",
        "--frames",
        "6",
        "--size",
        "64x96",
        "--fps",
        "12",
        "--objects",
        "3",
        "--png",
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert (summary["frames"], summary["height"], summary["width"], summary["fps"]) == (
        6,
        64,
        96,
        12.0,
    )
    assert "seed=3" in summary["url"] and "objects=3" in summary["url"]
    for name in ("scene.mp4", "annotations.json", "gt.txt", "seqinfo.ini", "frames/000005.png"):
        assert (out / name).is_file(), name
    coco = json.loads((out / "annotations.json").read_text())
    assert len(coco["images"]) == 6 and len(coco["annotations"]) == summary["annotations"]


def test_synth_bench_prints_timings(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["synth", "--bench", "--frames", "5", "--size", "48x64"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["benchmark"] == "synth_render" and figures["frames"] == 5
    assert figures["ms_per_frame_mean"] > 0 and figures["height"] == 48


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--size", "big"], "--size must be HEIGHTxWIDTH"),
        (["--size", "65x96"], "even height and width"),
        (["--fps", "0"], "fps must be > 0"),
        (["--frames", "0"], "--frames must be >= 1"),
        (["--noise", "30"], "noise must be 0..8"),
        (["--crf", "99"], "--crf must be 0..51"),
    ],
)
def test_synth_usage_errors(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, args: list[str], message: str
) -> None:
    assert main(["synth", "--out", str(tmp_path / "x"), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "x").exists()


def test_synth_needs_out(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["synth", "--frames", "2"]) == 2
    assert "--out DIR is required" in capsys.readouterr().err
