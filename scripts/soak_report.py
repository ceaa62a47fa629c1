"""What scripts/soak.py measured, judged and drawn.

* :func:`latency_buckets` reads the capture-to-publish latency histogram of
  ``/metrics`` (cumulative counts per bucket); the difference between two
  samples gives that interval's p50 and p99 (:func:`quantile`).
* :func:`parse_summary` reads ``serve``'s exit summary (frame and message
  counters, in the words of ``streamseg.telemetry.counters``).
* :func:`delivered` counts what reached Redis and the MQTT subscriber, per
  camera (distinct frames and duplicates).
* :func:`verdict` says whether the soak passed: ``serve`` exited 0, nothing
  accepted was lost, every fault was recovered from, RSS stayed flat after
  the warm-up.
* :func:`plot` draws it all over time, with the faults marked (matplotlib).
"""

from __future__ import annotations

import itertools
import json
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["delivered", "latency_buckets", "parse_summary", "plot", "quantile", "verdict"]

LATENCY = "streamseg_pipeline_latency_seconds_bucket"
FRAME_WORDS = ("read", "skipped", "segmented", "published", "lost")
# RSS growth after the warm-up allowed as "flat": this much, or this share.
RSS_SLACK_MB = 24.0
RSS_SLACK_SHARE = 0.05


def latency_buckets(metrics: str) -> dict[str, float]:
    """``{le: cumulative count}`` of the latency histogram, every camera added up."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, float] = {}
    for family in text_string_to_metric_families(metrics):
        for s in family.samples:
            if s.name == LATENCY:
                out[s.labels["le"]] = out.get(s.labels["le"], 0.0) + float(s.value)
    return out


def quantile(before: Mapping[str, float], after: Mapping[str, float], q: float) -> float | None:
    """The ``q`` quantile (0-1) of the latencies observed between two samples, seconds
    (linear within the bucket; ``None`` when none was observed)."""
    bounds = sorted((float(le), after[le] - before.get(le, 0.0)) for le in after)
    total = bounds[-1][1] if bounds else 0.0
    if total <= 0:
        return None
    rank, low, below = q * total, 0.0, 0.0
    for upper, count in bounds:
        if count >= rank:
            if upper == float("inf"):
                return low
            share = (rank - below) / (count - below) if count > below else 1.0
            return low + share * (upper - low)
        low, below = upper, count
    return low


def parse_summary(log: str) -> dict[str, Any]:
    """``serve``'s exit summary: ``{"cameras": {cam: counters}, "sinks": {sink: {...}}}``."""
    words = ", ".join(rf"(\d+) {w}" for w in FRAME_WORDS)
    cameras = {
        m.group(1): dict(zip(FRAME_WORDS, map(int, m.groups()[1:]), strict=True))
        for m in re.finditer(rf"summary\[([\w.-]+)\]: frames {words}", log)
    }
    sinks = {
        m.group(1): {"published": int(m.group(2)), "lost": int(m.group(3))}
        for m in re.finditer(r"messages ([\w.-]+): (\d+) published, (\d+) lost", log)
    }
    return {"cameras": cameras, "sinks": sinks}


def delivered(redis: Any, mqtt: Iterable[bytes]) -> dict[str, Any]:
    """Per camera: frames in Redis and on MQTT (distinct sequence numbers, and duplicates)."""
    out: dict[str, Any] = {"redis": {}, "mqtt": {}}
    for key in redis.scan_iter(match=b"streamseg:detections:*"):
        seqs = [json.loads(f[b"data"])["seq"] for _id, f in redis.xrange(key)]
        camera = key.decode().rsplit(":", 1)[1]
        out["redis"][camera] = {"frames": len(set(seqs)), "duplicates": len(seqs) - len(set(seqs))}
    per_camera: dict[str, list[int]] = {}
    for payload in mqtt:
        message = json.loads(payload)
        per_camera.setdefault(message["camera"], []).append(message["seq"])
    for camera, seqs in per_camera.items():
        out["mqtt"][camera] = {"frames": len(set(seqs)), "duplicates": len(seqs) - len(set(seqs))}
    return out


def _rss_growth(samples: Sequence[Mapping[str, Any]], warmup: float) -> dict[str, Any]:
    """Per process: median RSS of the first and last quarter after the warm-up, MiB."""
    after = [s for s in samples if s["t"] >= warmup and "rss_mb" in s]
    out: dict[str, Any] = {}
    if len(after) < 8:
        return out
    quarter = len(after) // 4
    for name in after[-1]["rss_mb"]:
        first = [s["rss_mb"].get(name) for s in after[:quarter]]
        last = [s["rss_mb"].get(name) for s in after[-quarter:]]
        first_v = [v for v in first if v is not None]
        last_v = [v for v in last if v is not None]
        if not first_v or not last_v:
            continue
        start, end = statistics.median(first_v), statistics.median(last_v)
        allowed = max(RSS_SLACK_MB, RSS_SLACK_SHARE * start)
        out[name] = {
            "start_mb": round(start, 1),
            "end_mb": round(end, 1),
            "growth_mb": round(end - start, 1),
            "flat": end - start <= allowed,
        }
    return out


def verdict(report: Mapping[str, Any]) -> dict[str, Any]:
    """Whether the soak passed, and why not."""
    summary, got = report["summary"], report["delivered"]
    problems = []
    if report["serve_exit_code"] != 0:
        problems.append(f"serve exited {report['serve_exit_code']}")
    if not summary["cameras"]:
        problems.append("no exit summary")
    for cam, c in summary["cameras"].items():
        if c["lost"]:
            problems.append(f"{cam}: {c['lost']} frames lost")
        if c["read"] != c["skipped"] + c["published"] + c["lost"]:
            problems.append(f"{cam}: frames unaccounted for: {c}")
        for where in ("redis", "mqtt"):
            have = got[where].get(cam, {}).get("frames", 0)
            if have < c["published"]:
                problems.append(f"{cam}: {c['published']} published, {have} in {where}")
    for sink, s in summary["sinks"].items():
        if s["lost"]:
            problems.append(f"sink {sink}: {s['lost']} messages lost")
    for f in report["faults"]:
        if f["recovered_s"] is None:
            problems.append(f"no recovery from {f['kind']} at {f['t']} s")
    rss = _rss_growth(report["samples"], report["warmup_s"])
    for name in ("serve", "model"):
        if name in rss and not rss[name]["flat"]:
            problems.append(f"{name} RSS grew {rss[name]['growth_mb']} MiB after the warm-up")
    recoveries = [f["recovered_s"] for f in report["faults"] if f["recovered_s"] is not None]
    return {
        "passed": not problems,
        "problems": problems,
        "faults": len(report["faults"]),
        "worst_recovery_s": max(recoveries) if recoveries else None,
        "rss": rss,
    }


def _series(samples: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    ok = [s for s in samples if "cameras" in s]
    t = [s["t"] / 60 for s in ok]
    frames = {w: [sum(c.get(w, 0) for c in s["cameras"].values()) for s in ok] for w in FRAME_WORDS}
    sinks = sorted({name for s in ok for name in s["sinks"]})
    messages = {
        f"{name} {w}": [s["sinks"].get(name, {}).get(w) or 0 for s in ok]
        for name in sinks
        for w in ("published", "lost")
    }
    p50, p99 = [None], [None]
    for a, b in itertools.pairwise(ok):
        p50.append(quantile(a["latency_buckets"], b["latency_buckets"], 0.5))
        p99.append(quantile(a["latency_buckets"], b["latency_buckets"], 0.99))
    names = sorted({n for s in ok for n in s["rss_mb"]})
    rss = {n: [s["rss_mb"].get(n) for s in ok] for n in names}
    restarts = [s["model"].get("restarts") or 0 for s in ok]
    return {"t": t, "frames": frames, "messages": messages, "p50": p50, "p99": p99,
            "rss": rss, "restarts": restarts}  # fmt: skip


def plot(report: Mapping[str, Any], path: Path) -> None:
    """Frames, messages, restarts, latency and RSS over time, faults as vertical lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = _series(report["samples"])
    fig, axes = plt.subplots(4, 1, figsize=(11, 13), sharex=True)
    ax = axes[0]
    for w in FRAME_WORDS:
        ax.plot(s["t"], s["frames"][w], label=f"frames {w}")
    ax.set_ylabel("frames (all cameras)")
    ax2 = ax.twinx()
    ax2.step(s["t"], s["restarts"], color="black", where="post", label="model restarts")
    ax2.set_ylabel("model process restarts")
    ax.legend(loc="upper left", fontsize=8)
    ax = axes[1]
    for name, values in s["messages"].items():
        ax.plot(s["t"], values, label=f"messages {name}")
    ax.set_ylabel("messages")
    ax.legend(loc="upper left", fontsize=8)
    ax = axes[2]
    ms = [[None if v is None else v * 1000 for v in s[q]] for q in ("p50", "p99")]
    ax.plot(s["t"], ms[0], label="latency p50")
    ax.plot(s["t"], ms[1], label="latency p99")
    ax.set_ylabel("capture to publish, ms")
    ax.set_yscale("log")
    ax.legend(loc="upper left", fontsize=8)
    ax = axes[3]
    for name, values in s["rss"].items():
        ax.plot(s["t"], values, label=name)
    ax.set_ylabel("RSS, MiB")
    ax.set_xlabel("minutes")
    ax.legend(loc="upper left", fontsize=8, ncol=3)
    for f in report["faults"]:
        for a in axes:
            a.axvline(f["t"] / 60, color="grey", alpha=0.35, linewidth=0.8)
        axes[0].annotate(f["kind"], (f["t"] / 60, 1), xycoords=("data", "axes fraction"),
                         rotation=90, fontsize=6, va="top")  # fmt: skip
    v = report.get("verdict", {})
    title = (
        f"streamseg soak: {report['minutes']} min, {report['cameras']} RTSP cameras, "
        f"{len(report['faults'])} faults: {'PASSED' if v.get('passed') else 'FAILED'}"
    )
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
