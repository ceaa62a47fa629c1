"""The ``bench dispatch`` part of ``docs/performance.md`` (used by ``scripts/perf_report.py``).

``dispatch_rows`` lists one run's counts per ops path; ``comparison`` puts
this run's counts beside the ones measured once and kept in
``scripts/dispatch_reference.json``: the same commands at the commit before
issue 22 (the counting tool applied to that tree) and torchvision's
``maskrcnn_resnet50_fpn`` counted the same way
(``scripts/dispatch_torchvision.py``, in a throw-away venv, since
torchvision does not import beside this project's torch).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

REFERENCE = Path(__file__).with_name("dispatch_reference.json")

Rows = list[tuple[str, str]]
_STAGES = ("preprocess", "model", "postprocess")


def _n(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,.1f}"
    return f"{int(value):,}"


def dispatch_rows(data: dict[str, Any]) -> Rows:
    """Figures of one ``bench dispatch`` run."""
    size = "x".join(str(v) for v in data.get("size", []))
    rows = [
        (
            "model",
            f"{data.get('arch')} {size}, batch {data.get('batch')}, "
            f"{data.get('detections')} detections per frame",
        )
    ]
    for path, c in data.get("paths", {}).items():
        rows.append(
            (
                f"{path}: ops / kernel launches / host syncs per frame",
                f"{_n(c['ops_per_frame'])} / {_n(c['kernel_launches_per_frame'])} / "
                f"{_n(c['host_syncs_per_frame'])}",
            )
        )
        rows.append((f"{path}: host syncs per batch", _n(c["per_batch"]["syncs"])))
        stages = c.get("stages", {})
        if stages:
            rows.append(
                (
                    f"{path}: ops per batch, preprocess / model / postprocess",
                    " / ".join(_n(stages.get(s, {}).get("ops")) for s in _STAGES),
                )
            )
        if path == "triton":
            rows.append(("triton: Triton launches per frame", _n(c["triton_launches_per_frame"])))
    return rows


def _key(arch: str, batch: int, detections: int, path: str) -> tuple[str, int, int, str]:
    return (arch, int(batch), int(detections), path)


def comparison(runs: list[dict[str, Any]]) -> list[str]:
    """A Markdown section: every dispatch run of this report beside the kept counts."""
    kept = json.loads(REFERENCE.read_text()) if REFERENCE.is_file() else {}
    before = {_key(**r["run"]): r for r in kept.get("before", {}).get("rows", [])}
    torchvision = {_key(**r["run"]): r for r in kept.get("torchvision", {}).get("rows", [])}
    lines = [
        "## GPU dispatch: before, after and torchvision",
        "",
        "Per frame: torch ops dispatched, kernel launches (Triton's included) and host",
        "syncs of one inference on the CUDA path, counted on the CPU (`bench dispatch`;",
        "docs/operations.md, GPU dispatch counts, says what each count is); `before`: the same",
        f"count at commit {kept.get('before', {}).get('commit', '?')}, before the",
        "post-processing was batched; torchvision: "
        + kept.get("torchvision", {}).get("what", "not measured")
        + ".",
        "",
        "| model | batch | detections | ops path | ops | launches | syncs per batch "
        "| before: ops / launches / syncs per batch "
        "| torchvision: ops / launches / syncs per batch |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for data in runs:
        for path, c in data.get("paths", {}).items():
            key = _key(data["arch"], data["batch"], data["detections"], path)
            old = before.get(key)
            tv = torchvision.get(_key(data["arch"], data["batch"], data["detections"], "any"))
            lines.append(
                f"| {data['arch']} | {data['batch']} | {data['detections']} | {path} "
                f"| {_n(c['ops_per_frame'])} | {_n(c['kernel_launches_per_frame'])} "
                f"| {_n(c['per_batch']['syncs'])} | {_triple(old)} | {_triple(tv)} |"
            )
    lines.append("")
    return lines


def _triple(row: dict[str, Any] | None) -> str:
    if row is None:
        return "-"
    return (
        f"{_n(row['ops_per_frame'])} / {_n(row['kernel_launches_per_frame'])} / "
        f"{_n(row['host_syncs_per_batch'])}"
    )
