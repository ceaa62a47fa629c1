"""The report of ``scripts/gpu-check.sh``: rewritten after every step, so a killed run keeps it.

``gpu-check.sh`` calls this after each step (standard library only: it
starts in a fraction of a second and needs no GPU)::

    python scripts/gpu_report.py step OUT NAME EXIT SECONDS LIMIT COMMAND...
    python scripts/gpu_report.py skip OUT NAME REASON
    python scripts/gpu_report.py finish OUT

``OUT/steps.jsonl`` gets one line per step; ``OUT/report.json`` is then
rebuilt from it, ``OUT/env.json`` (the GPU, versions, optional parts,
written by the first step) and each step's output: ``OUT/NAME.json`` when
the step wrote one (possibly partial: its last state), else the JSON it
printed on stdout (``OUT/NAME.out``), else the tail of its output.

A step's ``status``: ``passed`` (exit 0), ``failed``, ``timed_out`` (killed
at its limit by ``timeout``: exit 124 or 137; ``seconds`` is then its
limit) or ``skipped`` (with the reason: an optional part not installed, no
time left in the run's budget). ``passed`` in the report: no step failed
or timed out. ``goals`` gathers the figures the issues set goals for.
``finish`` prints a summary and exits 0 when passed, else 1.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

TIMED_OUT = (124, 137)


def status_of(code: int) -> str:
    """``passed``, ``timed_out`` or ``failed`` for a step's exit code."""
    if code == 0:
        return "passed"
    return "timed_out" if code in TIMED_OUT else "failed"


def _output(out: Path, name: str) -> Any:
    for path in (out / f"{name}.json", out / f"{name}.out"):
        if path.is_file():
            text = path.read_text(errors="replace")
            try:
                return json.loads(text)
            except ValueError:
                if path.suffix == ".out":
                    return _tail(out, name, text)
    return _tail(out, name, "")


def _tail(out: Path, name: str, text: str) -> str:
    err = out / f"{name}.err"
    if err.is_file():
        text += err.read_text(errors="replace")
    return text[-3000:]


def goals(steps: list[dict[str, Any]]) -> dict[str, Any]:
    """The goals' figures from the steps that measure them (missing: not measured)."""
    found: dict[str, Any] = {}
    for step in steps:
        output = step.get("output")
        if not isinstance(output, dict):
            continue
        if isinstance(output.get("goals"), dict):
            found.update(output["goals"])
        ratio = output.get("ratio")
        if step["step"].startswith("pipeline") and isinstance(ratio, (int, float)):
            found["e2e_vs_model_only_4_cameras"] = {
                "ratio": ratio, "goal": ">= 0.9", "met": ratio >= 0.9,
            }  # fmt: skip
    return found


def build(out: Path) -> dict[str, Any]:
    """The report from what ``out`` holds now."""
    steps = []
    lines = (out / "steps.jsonl").read_text().splitlines() if (out / "steps.jsonl").exists() else []
    for line in lines:
        step = json.loads(line)
        if step["status"] != "skipped":
            step["output"] = _output(out, step["step"])
        steps.append(step)
    env = json.loads((out / "env.json").read_text()) if (out / "env.json").is_file() else {}
    bad = [s["step"] for s in steps if s["status"] in ("failed", "timed_out")]
    return {
        **env,
        "passed": not bad,
        "not_passed": bad,
        "seconds": sum(s.get("seconds", 0) for s in steps),
        "goals": goals(steps),
        "steps": steps,
    }


def record(out: Path, step: dict[str, Any]) -> dict[str, Any]:
    """Append ``step`` and rewrite ``report.json`` (atomically); the report."""
    out.mkdir(parents=True, exist_ok=True)
    with (out / "steps.jsonl").open("a") as f:
        f.write(json.dumps(step) + "\n")
    report = build(out)
    tmp = out / "report.json.tmp"
    tmp.write_text(json.dumps(report, indent=2))
    tmp.replace(out / "report.json")
    return report


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] not in ("step", "skip", "finish"):
        print(__doc__, file=sys.stderr)
        return 2
    verb, out = argv[0], Path(argv[1])
    if verb == "step":
        name, code, seconds, limit = argv[2], int(argv[3]), int(argv[4]), int(argv[5])
        status = status_of(code)
        step = {"step": name, "status": status, "exit": code, "seconds": seconds, "limit": limit,
                "command": " ".join(argv[6:])}  # fmt: skip
        if status == "timed_out":
            step["reason"] = f"killed at its limit of {limit} s"
        record(out, step)
    elif verb == "skip":
        record(out, {"step": argv[2], "status": "skipped", "reason": " ".join(argv[3:])})
    else:
        report = build(out)
        for s in report["steps"]:
            why = f" ({s['reason']})" if s.get("reason") else ""
            print(f"gpu-check: {s['step']:<28} {s['status']:<9} {s.get('seconds', 0):>4} s{why}")
        for name, goal in report["goals"].items():
            print(f"gpu-check: goal {name}: {goal}")
        print(f"gpu-check: report in {out / 'report.json'}; passed: {report['passed']}")
        return 0 if report["passed"] else 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
