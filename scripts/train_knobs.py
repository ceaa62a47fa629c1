#!/usr/bin/env python3
"""Peak memory and images/s of a training iteration per memory knob (``bench train``).

    python scripts/train_knobs.py [--arch maskrcnn_small] [--out knobs.jsonl] [-- BENCH ARGS]

Runs ``streamseg bench train`` once per row of :data:`KNOBS` (each a change
from the baseline: 360x640, batch 2, fp32, the model's RoI samples, nothing
frozen), each in a process of its own so that its peak memory is its own,
one after the other, writes every report as a JSON line to ``--out`` and
prints the Markdown table of docs/training.md ("Memory knobs, measured").
Arguments after ``--`` go to every run (e.g. ``-- --threads 1 --iters 5``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# knob shown in the table -> the bench arguments that set it (beside the baseline's)
KNOBS: dict[str, list[str]] = {
    "baseline (batch 2, 360x640, fp32)": [],
    "batch 1": ["--batch", "1"],
    "batch 4": ["--batch", "4"],
    "input 288x512": ["--size", "288x512"],
    "input 480x854": ["--size", "480x854"],
    "roi_samples_per_image 128": ["--roi-samples", "128"],
    "precision bf16": ["--precision", "bf16"],
    "freeze_backbone_stages 3": ["--freeze", "3"],
    "channels_last": ["--channels-last"],
}
BASELINE = ["--size", "360x640", "--batch", "2"]


def main() -> int:
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", default="maskrcnn_small")
    parser.add_argument("--out", default="train_knobs.jsonl")
    args = parser.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    rows = []
    with open(args.out, "w") as out:
        for knob, knob_args in KNOBS.items():
            cmd = [sys.executable, "-m", "streamseg", "bench", "train", "--arch", args.arch,
                   *BASELINE, *knob_args, *extra]  # fmt: skip
            proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
            if proc.returncode != 0:
                print(f"{knob}: failed\n{proc.stdout}{proc.stderr[-2000:]}", file=sys.stderr)
                continue
            report = json.loads(proc.stdout)
            report["knob"] = knob
            out.write(json.dumps(report) + "\n")
            out.flush()
            rows.append(report)
    print(table(rows))
    return 0


def table(rows: list[dict]) -> str:
    """The Markdown table: peak memory, images/s, CPU ms per image, per knob."""
    lines = [
        "| knob | peak RSS (MB) | images/s (median) | CPU ms per image | forward / backward ms |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        per_image = r["cpu_ms"]["total"] / r["images_per_iteration"]
        lines.append(
            f"| {r['knob']} | {r['peak_memory_mb']:.0f} | {r['images_per_s']:.2f} | "
            f"{per_image:.0f} | {r['ms']['forward']:.0f} / {r['ms']['backward']:.0f} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
