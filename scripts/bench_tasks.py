#!/usr/bin/env python3
"""Instance vs panoptic (vs semantic) end to end, alternated: ``streamseg bench pipeline --task``.

    .venv/bin/python scripts/bench_tasks.py [--pipeline P] [--rounds 3] [--tasks instance,panoptic]

Runs ``streamseg bench pipeline PIPELINE --task T`` for each task in turn,
``--rounds`` times (so each pair shares the machine's state of the moment on
a busy machine), and prints one JSON object: every run's ``e2e_fps`` and
``model_fps``, their medians per task, and ``ratio_e2e``: each task's median
end-to-end frames/s over the first task's. The pipeline defaults to
configs/bench_panoptic.yaml (720p, mask2former_tiny trained for panoptic).
Other arguments go to ``bench pipeline`` as they are (e.g. ``--frames 24 --repeat 1``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _bench(pipeline: str, task: str, extra: list[str]) -> dict:
    cmd = [sys.executable, "-m", "streamseg", "bench", "pipeline", pipeline, "--task", task]
    done = subprocess.run(cmd + extra, cwd=REPO, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"bench pipeline --task {task} failed ({done.returncode}):\n{done.stderr}")
    return json.loads(done.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pipeline", default="configs/bench_panoptic.yaml")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tasks", default="instance,panoptic")
    args, extra = parser.parse_known_args()
    tasks = args.tasks.split(",")
    runs: dict[str, list[dict]] = {t: [] for t in tasks}
    for _ in range(args.rounds):
        for task in tasks:
            result = _bench(args.pipeline, task, extra)
            runs[task].append({k: result.get(k) for k in ("e2e_fps", "model_fps", "ratio")})
    median = {t: statistics.median(r["e2e_fps"] for r in runs[t]) for t in tasks}
    model = {t: statistics.median(r["model_fps"] for r in runs[t]) for t in tasks}
    print(
        json.dumps(
            {
                "pipeline": args.pipeline,
                "runs": runs,
                "e2e_fps_median": median,
                "model_fps_median": model,
                "ratio_e2e": {t: round(median[t] / median[tasks[0]], 3) for t in tasks},
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
