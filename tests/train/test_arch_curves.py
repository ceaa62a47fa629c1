"""scripts/arch_curves.py, tiny: the three runs train for a CPU-second budget from the
demo model's trunk, save and evaluate points, and write the JSON and the PNG; a longer
budget continues a run. The plumbing, not the AP (the real curves are in
docs/training.md, "Both architectures per CPU minute")."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from tests.support.scripts import load_script

REPO = Path(__file__).resolve().parents[2]
TINY = ["--every-s", "0.5", "--eval-frames", "1", "--eval-scenes", "1",
        "--train-scenes", "1", "--train-frames", "4"]  # fmt: skip


def test_three_runs_give_points_json_and_png(tmp_path: Path) -> None:
    script = load_script("arch_curves")
    work, out = tmp_path / "work", tmp_path / "curves"
    script.main(["--budget-s", "0.5", "--work", str(work), "--out", str(out), *TINY])

    result = json.loads(out.with_suffix(".json").read_text())
    assert set(result["runs"]) == {"maskrcnn_instance", "m2f_instance", "m2f_panoptic"}
    for name, run in result["runs"].items():
        points = run["points"]
        # The start (CPU 0, iteration 0), then at least the point where the budget ran out.
        assert points[0]["cpu_s"] == 0 and points[0]["iteration"] == 0, name
        assert points[-1]["cpu_s"] >= 0.5 and points[-1]["iteration"] >= 1, name
        assert all(0 <= p["segm_AP"] <= 1 for p in points), name
        assert ("PQ" in points[-1]) == (name == "m2f_panoptic"), name
    assert result["runs"]["m2f_panoptic"]["task"] == "panoptic"
    png = out.with_suffix(".png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 10_000

    # Each run starts from the demo model's trunk: the same tensors in both archs.
    demo = torch.load(REPO / "models/demo_small.pth", weights_only=True)["model"]
    key = "backbone.body.layer1.0.conv1.weight"
    mrcnn = torch.load(work / "maskrcnn_instance/init.pth", weights_only=True)["model"]
    m2f = torch.load(work / "m2f_instance/init.pth", weights_only=True)["model"]
    assert torch.equal(mrcnn[key], demo[key])
    assert torch.equal(
        m2f["model.pixel_level_module.encoder.body.layer1.0.conv1.weight"], demo[key]
    )

    # A longer budget continues the run where it stopped (CPU count and iterations go on).
    before = result["runs"]["maskrcnn_instance"]["points"][-1]
    script.main(["--budget-s", "1.0", "--runs", "maskrcnn_instance", "--work", str(work),
                 "--out", str(out), *TINY])  # fmt: skip
    after = json.loads(out.with_suffix(".json").read_text())["runs"]["maskrcnn_instance"]
    last = after["points"][-1]
    assert last["cpu_s"] >= 1.0 and last["iteration"] > before["iteration"]
    assert len(after["points"]) > len(result["runs"]["maskrcnn_instance"]["points"])
