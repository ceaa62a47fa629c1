"""``streamseg bench track`` prints its JSON; the Kalman filter equals the full 8x8 filter."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from streamseg.bench.busy import Busy
from streamseg.cli import main
from streamseg.config.runtime import RuntimeConfig
from streamseg.track import kalman
from streamseg.track.kalman import KalmanBoxes

REPO = Path(__file__).resolve().parents[2]


def test_bench_track_json(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["bench", "track", "--seeds", "1", "--frames", "30", "--objects", "4"]
    code = main([*args, "--size", "320x180", "--cost-objects", "5,20", "--cost-frames", "5"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    q = out["quality"]
    assert q["setup"]["drop"] == 0.1 and q["setup"]["scenes"] == 1
    for name in ("noisy_gt", "exact_gt"):
        assert -1.0 <= q[name]["mota"] <= 1.0 and 0.0 <= q[name]["idf1"] <= 1.0
        assert q[name]["num_frames"] == 30
    # Exact boxes: nothing is missed except each track's first (tentative) frame.
    assert q["exact_gt"]["idf1"] > 0.9 and q["exact_gt"]["num_false_positives"] == 0
    assert q["noisy_gt"]["num_misses"] > q["exact_gt"]["num_misses"]
    assert [row["objects"] for row in out["cost"]] == [5, 20]
    assert all(row["track_rules_ms_p50"] > 0 and row["rules"] == 6 for row in out["cost"])
    assert set(out["goals"]) == {"idf1_noisy_gt_at_least_0.9"}  # no 100-object row


def test_bench_track_loaded(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["bench", "track", "--skip-quality", "--cost-objects", "100", "--cost-frames", "4"]
    assert main([*args, "--load", "1,1", "--load-fps", "500"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["cost"]
    loaded = row["loaded"]
    assert (loaded["processes"], loaded["threads"], loaded["fps"]) == (1, 1, 500.0)
    assert loaded["nice"] == RuntimeConfig().model_nice  # as serve runs the model's process
    for name in ("track", "track_rules"):
        assert loaded[f"quiet_{name}_ms_p50"] > 0 and loaded[f"loaded_{name}_ms_p50"] > 0
        ratio = loaded[f"loaded_{name}_ms_p50"] / loaded[f"quiet_{name}_ms_p50"]
        assert loaded[f"{name}_loaded_over_quiet_p50"] == pytest.approx(ratio, abs=1e-3)


def test_busy_neighbours_run_while_in_with_and_stop_after() -> None:
    import threading

    from streamseg.bench.busy import Busy

    before = threading.active_count()
    with Busy(processes=1, threads=2) as busy:
        (child,) = busy._children
        assert child.poll() is None  # started (it wrote its first bytes) and running
        names = {t.name for t in threading.enumerate()}
        assert {"busy-0", "busy-1"} <= names
    assert child.poll() is not None and threading.active_count() == before


def test_bench_track_on_the_demo_models_detections(capsys: pytest.CaptureFixture[str]) -> None:
    weights = REPO / "models" / "demo_small.pth"
    args = ["bench", "track", "--seeds", "1", "--frames", "40", "--objects", "4"]
    args += ["--size", "320x240", "--skip-cost"]
    code = main([*args, "--detector", "maskrcnn_small", "--weights", str(weights)])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    model = out["quality"]["maskrcnn_small"]
    assert model["num_frames"] == 40 and model["weights"] == "demo_small.pth"
    assert model["model_ms_per_frame"] > 0
    # The trained model finds and follows most objects; a broken detector path
    # (no image, wrong classes, boxes in the wrong frame) scores near zero.
    assert model["idf1"] > 0.5 and model["mota"] > 0.3, model


def test_bench_track_detector_with_a_missing_checkpoint(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    args = ["bench", "track", "--seeds", "1", "--frames", "2", "--skip-cost"]
    code = main([*args, "--detector", "maskrcnn_small", "--weights", str(tmp_path / "no.pth")])
    assert code == 2
    assert "no.pth" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--size", "big"], "expected WIDTHxHEIGHT"),
        (["--cost-objects", "10,x"], "expected numbers"),
        (["--drop", "1.5"], "--drop must be in [0, 1)"),
        (["--detector", "maskrcnn_small"], "--detector needs --weights"),
        (["--load", "two"], "expected PROCESSES,THREADS"),
        (["--load", "0,0"], "not both 0"),
        (["--load", "--load-fps", "0"], "--load-fps must be > 0"),
        (["--load", "--model-nice", "20"], "--model-nice must be 0 to 19"),
    ],
)
def test_bench_track_usage_errors(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    assert main(["bench", "track", *args]) == 2
    assert message in capsys.readouterr().err


def test_busy_processes_run_below_this_one_by_nice() -> None:
    own = os.getpriority(os.PRIO_PROCESS, 0)
    with Busy(processes=2, threads=0, nice=4) as busy:
        assert [os.getpriority(os.PRIO_PROCESS, pid) for pid in busy.pids] == [min(19, own + 4)] * 2
    with Busy(processes=1, threads=0) as busy:
        assert [os.getpriority(os.PRIO_PROCESS, pid) for pid in busy.pids] == [own]


def full_filter(boxes: list[np.ndarray], dts: list[float]) -> tuple[np.ndarray, np.ndarray]:
    """A textbook 8-state Kalman filter (matrices, no shortcuts) for one track."""
    z0 = kalman.boxes_to_xywh(boxes[0][None])[0]
    x = np.concatenate((z0, np.zeros(4)))
    s = np.maximum(np.array([z0[2], z0[3], z0[2], z0[3]]), kalman.MIN_SIZE)
    p = np.diag(
        np.concatenate(((2 * kalman.MEASURE_STD * s) ** 2, (kalman.INIT_VELOCITY_STD * s) ** 2))
    )
    h = np.hstack((np.eye(4), np.zeros((4, 4))))
    for box, dt in zip(boxes[1:], dts, strict=True):
        f = np.eye(8)
        f[:4, 4:] = dt * np.eye(4)
        x = f @ x
        s = np.maximum(np.array([x[2], x[3], x[2], x[3]]), kalman.MIN_SIZE)
        q = np.diag(
            np.concatenate(((kalman.POSITION_STD * s) ** 2, (kalman.VELOCITY_STD * s) ** 2))
        )
        p = f @ p @ f.T + q * dt
        r = np.diag((kalman.MEASURE_STD * s) ** 2)
        k = p @ h.T @ np.linalg.inv(h @ p @ h.T + r)
        x = x + k @ (kalman.boxes_to_xywh(box[None])[0] - h @ x)
        p = (np.eye(8) - k @ h) @ p
    return x, p


def test_blockwise_kalman_equals_the_full_filter() -> None:
    rng = np.random.default_rng(0)
    start = np.array([100.0, 50.0, 140.0, 120.0])
    boxes = [start + rng.normal(0, 3, 4) + np.array([5, 2, 5, 2]) * i for i in range(12)]
    dts = [0.1, 0.1, 0.3, 0.05, 0.1, 0.5, 0.1, 0.1, 0.2, 0.1, 0.1]
    kf = KalmanBoxes()
    kf.add(boxes[0][None])
    for box, dt in zip(boxes[1:], dts, strict=True):
        kf.predict(dt)
        kf.update(np.array([0]), box[None])
    x, p = full_filter(boxes, dts)
    np.testing.assert_allclose(kf.mean[0], x, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(kf.cov[0], p, rtol=1e-9, atol=1e-8)
