"""Per-class AP, and ``streamseg eval --baseline OLD NEW``: two models on the same data,
per class, with the differences, as a table and as JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from streamseg.models import build_model, class_options
from streamseg.models.checkpoint import read_checkpoint, save_checkpoint
from streamseg.models.class_rows import remap_class_rows
from streamseg.train.compare import compare, format_table
from streamseg.train.datasets import open_dataset, resolve_class_names
from streamseg.train.evaluate import coco_evaluate

REPO = Path(__file__).resolve().parents[2]
SCENE = "synthetic://?seed=5&width=96&height=64&objects=5&frames=6&stride=3"


def test_per_class_ap_is_each_class_alone_and_averages_to_the_overall() -> None:
    ds = open_dataset(SCENE)
    names = resolve_class_names(None, ds)
    ds.set_class_names(names)
    gts = [ds.ground_truth(i) for i in range(len(ds))]
    # Every ground-truth instance detected, except the squares (label 2).
    dets = [
        {**ann, "image_id": gt.image_id, "score": 0.9}
        for gt in gts
        for ann in gt.annotations
        if ann["category_id"] != 2
    ]
    result = coco_evaluate(gts, dets, names, per_class=True)
    per = result["per_class"]
    assert list(per) == list(names[1:])
    counts = {
        n: sum(a["category_id"] == names.index(n) for g in gts for a in g.annotations)
        for n in names[1:]
    }
    assert counts["square"] > 0 and sum(c > 0 for c in counts.values()) >= 3
    for name in names[1:]:
        expected = -1.0 if not counts[name] else 0.0 if name == "square" else 1.0
        assert per[name]["instances"] == counts[name], name
        assert per[name]["segm"] == expected == per[name]["bbox"], name
    scored = [p for p in per.values() if p["instances"]]
    for kind in ("bbox", "segm"):  # COCO's AP is the mean over the classes with ground truth
        assert result[kind]["AP"] == pytest.approx(sum(p[kind] for p in scored) / len(scored))
    assert "per_class" not in coco_evaluate(gts, dets, names)


def _result(weights: str, per_class: dict[str, tuple[float, float]]) -> dict[str, Any]:
    """An eval result: ``per_class`` maps a class to (box AP, mask AP)."""
    return {
        "weights": weights,
        "bbox": {"AP": 0.5, "AP50": 0.7},
        "segm": {"AP": 0.4, "AP50": -1.0},
        "per_class": {n: {"instances": 3, "bbox": b, "segm": s} for n, (b, s) in per_class.items()},
    }


def test_compare_gives_differences_per_class_and_over_the_classes_both_have() -> None:
    old = _result("old.pth", {"disc": (0.5, 0.4), "square": (0.6, 0.5), "star": (0.2, 0.1)})
    new = _result("new.pth", {"square": (0.7, 0.5), "disc": (0.4, 0.6), "hexagon": (0.9, 0.8)})
    new["bbox"]["AP"] = 0.75
    both = compare(old, new)
    assert both["classes"] == {
        "kept": ["square", "disc"],
        "added": ["hexagon"],
        "dropped": ["star"],
    }
    assert both["difference"]["bbox"] == {"AP": 0.25, "AP50": 0.0}
    assert both["difference"]["segm"] == {"AP": 0.0, "AP50": None}  # -1: undefined
    per = both["difference"]["per_class"]
    assert per["square"] == {"bbox": 0.1, "segm": 0.0}
    assert per["disc"] == {"bbox": -0.1, "segm": 0.2}
    assert per["hexagon"] == {"bbox": None, "segm": None} == per["star"]
    kept = both["kept_classes"]
    assert kept["baseline"] == {"bbox": 0.55, "segm": 0.45}
    assert kept["candidate"] == {"bbox": 0.55, "segm": 0.55}
    assert kept["difference"] == {"bbox": 0.0, "segm": 0.1}
    assert both["baseline"] == old and both["candidate"] == new
    table = format_table(both).splitlines()
    assert table[:2] == ["baseline:  old.pth", "candidate: new.pth"]
    row = next(line for line in table if line.startswith("bbox.AP "))
    assert row.split() == ["bbox.AP", "0.500", "0.750", "+0.250"]
    row = next(line for line in table if line.startswith("disc "))
    assert row.split() == [
        "disc",
        "3",
        "0.400",
        "(0.500)",
        "0.600",
        "(0.400)",
        "+0.200",
        "(-0.100)",
    ]
    assert next(line for line in table if line.startswith("hexagon ")).split()[2] == "(absent)"
    assert "(absent)" in next(line for line in table if line.startswith("star "))


def test_eval_baseline_compares_two_checkpoints_on_the_same_data(
    tmp_path: Path,
    cli,  # type: ignore[no-untyped-def]
) -> None:
    """The demo model against itself with its classes reordered and a class added that
    never wins (bias -100): every class the two share scores the same; the added one has
    no ground truth, the table and the JSON say so."""
    demo = read_checkpoint(REPO / "models/demo_small.pth")
    old_names = tuple(demo.meta["class_names"])
    new_names = ("__background__", "star", "hexagon", "triangle", "square", "disc")
    grown = build_model("maskrcnn_small", **class_options("maskrcnn_small", new_names))
    state, change = remap_class_rows(
        "maskrcnn_small", demo.state_dict, old_names, grown.state_dict(), new_names
    )
    assert change.added == ("hexagon",)
    state["roi_heads.box_predictor.cls_score.bias"][2] = -100.0
    new = tmp_path / "new.pth"
    save_checkpoint(new, state, **{**demo.meta, "class_names": list(new_names)})
    data = "synthetic://?seed=1002&width=320&height=240&objects=5&frames=6&stride=5"
    proc = cli(
        "eval", "--baseline", "models/demo_small.pth", str(new), "--data", data,
        "--batch-size", "3",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    both = json.loads(proc.stdout)
    assert both["classes"] == {
        "kept": ["star", "triangle", "square", "disc"],
        "added": ["hexagon"],
        "dropped": [],
    }
    old_pc, new_pc = both["baseline"]["per_class"], both["candidate"]["per_class"]
    seen = [n for n in old_names[1:] if old_pc[n]["instances"]]
    assert len(seen) >= 3 and all(old_pc[n]["segm"] > 0.1 for n in seen)
    for name in old_names[1:]:
        assert new_pc[name] == old_pc[name], name
        same = 0.0 if name in seen else None  # None: no ground truth, no AP to compare
        assert both["difference"]["per_class"][name] == {"bbox": same, "segm": same}
    assert new_pc["hexagon"] == {"instances": 0, "bbox": -1.0, "segm": -1.0}
    assert both["kept_classes"]["difference"] == {"bbox": 0.0, "segm": 0.0}
    assert both["baseline"]["weights"] == "models/demo_small.pth"
    assert both["candidate"]["weights"] == str(new)
    assert "segm.AP (classes both have)" in proc.stderr
    hexagon = next(line for line in proc.stderr.splitlines() if line.startswith("hexagon "))
    assert hexagon.split()[1:5] == ["0", "(absent)", "n/a", "(n/a)"]
