"""``streamseg bench model`` prints its figures as JSON; bad arguments exit 2."""

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
    assert report["input_size"][0] % 32 == 0 and report["input_size"][1] % 32 == 0
    lat = report["latency_ms"]
    assert 0 < lat["min"] <= lat["p50"] <= lat["p90"]
    assert report["fps"] > 0 and report["peak_rss_mb"] > 0
    assert report["torch_threads"] == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--size", "640"], "--size must be HEIGHTxWIDTH"),
        (["--batch", "0"], "--batch and --iters must be >= 1"),
        (["--backend", "aot"], "streamseg export"),
        (["--backend", "tensorrt"], "pip install 'streamseg\\[tensorrt\\]'"),
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
