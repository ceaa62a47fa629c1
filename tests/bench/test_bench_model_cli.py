"""``streamseg bench model`` prints its figures as JSON; `--size` is the model input; bad
arguments exit 2."""

from __future__ import annotations

import json

import pytest


def test_bench_model_prints_json(cli) -> None:  # type: ignore[no-untyped-def]
    out = cli(
        "bench", "model", "--arch", "maskrcnn_small", "--size", "90x160", "--batch", "2",
        "--iters", "2", "--warmup", "1", "--threads", "1",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["arch"] == "maskrcnn_small" and report["backend"] == "eager"
    assert report["batch"] == 2 and report["size"] == [90, 160] and report["iters"] == 2
    assert report["input_size"] == [96, 160]  # 90x160, padded to multiples of 32
    lat = report["latency_ms"]
    assert 0 < lat["min"] <= lat["p50"] <= lat["p90"]
    assert report["cpu_ms"]["p50"] > 0
    assert report["fps"] > 0 and report["peak_rss_mb"] > 0
    assert report["torch_threads"] == 1


@pytest.mark.parametrize(
    ("arch", "args", "resize", "input_size"),
    [
        # --size alone is the input the model runs at, whatever the model's own resize
        # (maskrcnn_small: 360/640, Mask2Former: 800/1333; maskrcnn_small's case is
        # test_bench_model_prints_json).
        ("mask2former_tiny", ["--size", "100x70"], [70, 100], [128, 96]),
        # --min-size/--max-size: --size is the frame size, resized as when serving
        # (one given: the other is the model's own).
        ("mask2former_tiny", ["--size", "48x72", "--min-size", "96"], [96, 1333], [96, 160]),
        ("maskrcnn_small", ["--size", "64x96", "--min-size", "96", "--max-size", "128"],
         [96, 128], [96, 128]),
    ],
)  # fmt: skip
def test_size_is_the_model_input(
    cli, arch: str, args: list[str], resize: list[int], input_size: list[int]
) -> None:  # type: ignore[no-untyped-def]
    out = cli(
        "bench", "model", "--arch", arch, "--iters", "1", "--warmup", "0", "--threads", "1",
        "--score-threshold", "0", *args,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["arch"] == arch
    assert [report["min_size"], report["max_size"]] == resize
    assert report["input_size"] == input_size
    assert report["detections_per_frame"] > 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--size", "640"], "--size must be HEIGHTxWIDTH"),
        (["--batch", "0"], "--batch and --iters must be >= 1"),
        (["--backend", "aot"], "streamseg export"),
        (["--backend", "tensorrt"], "pip install 'streamseg\\[tensorrt\\]'"),
        (["--min-size", "700", "--max-size", "600"], "need 1 <= min <= max"),
    ],
)
def test_bad_arguments_exit_2_with_the_reason(cli, args: list[str], message: str) -> None:  # type: ignore[no-untyped-def]
    import re

    out = cli("bench", "model", "--arch", "maskrcnn_small", "--iters", "1", *args)
    assert out.returncode == 2
    assert re.search(message, out.stderr), out.stderr


def test_compare_times_backends_in_turn(cli) -> None:  # type: ignore[no-untyped-def]
    out = cli(
        "bench", "model", "--arch", "maskrcnn_small", "--size", "90x160", "--iters", "2",
        "--warmup", "0", "--compare", "eager",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["backend"] == "eager"
    assert report["speedup_p50"] == {"eager": 1.0}
    assert report["results"]["eager"]["latency_ms"]["p50"] > 0
