"""``scripts/perf_report.py``: docs/performance.md from benchmark JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "perf_report.py"


def _report(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60
    )


def _bench(folder: Path, name: str, command: str, data: object, rc: int = 0) -> None:
    (folder / f"{name}.cmd").write_text(command + "\n")
    (folder / f"{name}.json").write_text(json.dumps(data) if data is not None else "")
    (folder / f"{name}.rc").write_text(f"{rc}\n")
    with (folder / "runs.txt").open("a") as runs:
        runs.write(name + "\n")


def _oracle(objects: int, fps: float) -> dict[str, object]:
    stages = ("decode", "batching", "model", "host_copy", "track", "rules", "masks", "json")
    per_frame = {s: 0.125 for s in stages} | {"publish": 0.25, "other": 0.5, "process": 2.0}
    return {
        "model": "oracle",
        "input": "h264",
        "cameras": 8,
        "scene_objects": objects,
        "objects_per_frame": objects - 2.5,
        "e2e_fps": fps,
        "cpu_ms_per_frame": per_frame,
        "host_ms_per_frame": 1.0,
        "host_fps_per_core": 1000.0,
        "decode": {"fps_per_core": 123.4},
    }


def test_render_lists_every_figure_with_its_command(tmp_path: Path) -> None:
    run = tmp_path / "run"
    proc = _report("meta", str(run), "--mode", "quick")
    assert proc.returncode == 0, proc.stderr
    meta = json.loads((run / "meta.json").read_text())
    assert meta["mode"] == "quick" and meta["versions"]["python"]
    assert meta["commit"] and meta["machine"]["cores"] >= 1
    _bench(run, "pipeline", "streamseg bench pipeline pipeline.yaml --frames 8", {
        "arch": "maskrcnn_small", "backend": "eager", "batch_size": 2, "frames": 8,
        "cameras": 1, "model_fps": 4.5, "e2e_fps": 4.25, "ratio": 0.944,
        "ratios": [0.95, 0.944, 0.9], "latency_p50_ms": 812.0, "live": None,
    })  # fmt: skip
    _bench(run, "publish", "python -m streamseg.bench.publish --messages 2000", {
        "encode": [{"objects": 10, "messages_per_cpu_s": 364737}],
        "sink": {"messages_per_s": 99330, "messages_per_cpu_s": 293185},
        "redis_benchmark": {"messages_per_s": 102400},
    })  # fmt: skip
    _bench(run, "broken", "streamseg bench model --arch nope", None, rc=2)
    _bench(run, "oracle-10obj", "streamseg bench pipeline x.yaml --model oracle", _oracle(10, 77.5))
    out = tmp_path / "performance.md"
    proc = _report("render", str(run), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()

    assert text.startswith("# Performance\n")
    assert "QUICK RUN" in text and "| mode | quick" in text  # a quick run says so on top
    assert f"| git commit | {meta['commit']} |" in text
    assert f"python {meta['versions']['python']}" in text
    pipeline = text.split("## pipeline")[1].split("## ")[0]
    assert "`streamseg bench pipeline pipeline.yaml --frames 8`" in pipeline
    assert "| end-to-end frames/s | 4.25 |" in pipeline
    assert "| end-to-end / model-only (median pair) | 0.944 |" in pipeline
    assert "| end-to-end / model-only, each pair | 0.95, 0.944, 0.9 |" in pipeline
    assert "| JSON encoding, 10 objects: messages per CPU s | 364,737 |" in text
    assert "| redis-benchmark XADD: messages/s | 102,400 |" in text
    assert "**failed** (exit code 2; see `broken.err`)" in text
    oracle = text.split("## Host path with the oracle model")[1]
    row = next(line for line in oracle.splitlines() if line.startswith("| oracle-10obj"))
    assert row.split(" | ")[1:8] == ["h264", "8", "10 (7.5)", "77.5", "1", "1,000", "0.125"]
    assert row.rstrip(" |").endswith("123")
    assert "* oracle-10obj: `streamseg bench pipeline x.yaml --model oracle`" in oracle
    # the order of runs.txt: pipeline first, the oracle table last
    assert text.index("## pipeline") < text.index("## publish") < text.index("## broken")


def test_full_run_has_no_quick_banner(tmp_path: Path) -> None:
    assert _report("meta", str(tmp_path), "--mode", "full").returncode == 0
    proc = _report("render", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "QUICK" not in proc.stdout and "| mode | full |" in proc.stdout


def test_render_without_meta_says_what_to_run(tmp_path: Path) -> None:
    proc = _report("render", str(tmp_path))
    assert proc.returncode == 2
    assert "meta.json not found" in proc.stderr and "--mode" in proc.stderr


def _dispatch(batch: int, detections: int, ops: float) -> dict[str, object]:
    counts = {
        "ops_per_frame": ops,
        "kernel_launches_per_frame": ops / 2,
        "triton_launches_per_frame": 14.0,
        "host_syncs_per_frame": 5.0 / batch,
        "per_batch": {"ops": ops * batch, "launches": ops * batch / 2, "syncs": 5},
    }
    return {
        "benchmark": "dispatch",
        "arch": "maskrcnn_r50_fpn",
        "batch": batch,
        "detections": detections,
        "size": [160, 160],
        "paths": {"triton": counts},
    }


def test_dispatch_counts_sit_beside_the_kept_ones(tmp_path: Path) -> None:
    assert _report("meta", str(tmp_path), "--mode", "full").returncode == 0
    _bench(tmp_path, "dispatch-b1", "streamseg bench dispatch --batch 1", _dispatch(1, 10, 1237.0))
    proc = _report("render", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "| triton: ops / kernel launches / host syncs per frame | 1,237 / 618.5 / 5 |" in (
        proc.stdout
    )
    table = proc.stdout.split("## GPU dispatch: before, after and torchvision")[1]
    row = next(line for line in table.splitlines() if line.startswith("| maskrcnn_r50_fpn | 1 |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[3:7] == ["triton", "1,237", "618.5", "5"]
    assert cells[7] != "-" and cells[8] != "-"  # before and torchvision, from the kept counts


def test_splice_replaces_and_adds_sections(tmp_path: Path) -> None:
    run = tmp_path / "run"
    assert _report("meta", str(run), "--mode", "full").returncode == 0
    _bench(run, "dispatch-b1", "streamseg bench dispatch --batch 1", _dispatch(1, 10, 900.0))
    doc = tmp_path / "performance.md"
    doc.write_text(
        "# Performance\n\n| mode | full |\n\n## ops\n\nold ops\n\n## dispatch-b1\n\nold\n\n"
        "## Host path with the oracle model\n\noracle\n"
    )
    proc = _report("splice", str(run), "--doc", str(doc))
    assert proc.returncode == 0, proc.stderr
    text = doc.read_text()
    assert "old ops" in text and "\nold\n" not in text and "oracle" in text
    section = text.split("## dispatch-b1")[1].split("## ")[0]
    assert "spliced into the full run above" in section and "900 / 450 / 5" in section
    assert text.index("## dispatch-b1") < text.index("## Host path")
    assert text.index("## Host path") < text.index("## GPU dispatch: before")
