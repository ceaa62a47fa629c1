"""``docs/performance.md`` from the JSON that ``scripts/bench.sh`` writes.

A run folder holds ``meta.json`` (written by ``perf_report.py meta`` before
the benchmarks: machine, date, versions, commit, quick or full) and, per
benchmark ``NAME``, ``NAME.cmd`` (the command as typed), ``NAME.json`` (what
it printed), ``NAME.rc`` (its exit code) and ``NAME.err``, and ``runs.txt``
lists the names in the order they ran. ``render`` turns
them into Markdown: the run's header, then each benchmark's figures with the
command that produced them. A benchmark that failed is listed as failed.

Usage::

    python scripts/perf_report.py meta DIR --mode quick|full
    python scripts/perf_report.py render DIR [--out docs/performance.md]
    python scripts/perf_report.py splice DIR --doc docs/performance.md

``splice`` (``scripts/bench.sh --only NAME``) reruns part of the page: each
of DIR's sections replaces the one of its name and says when and at which
commit it was measured; the header keeps describing the last full run.

Exit codes: 0 done, 2 a missing folder or meta.json.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from perf_dispatch import comparison, dispatch_rows

from streamseg.runtime.stats import STAGE_CPU

REPO = Path(__file__).resolve().parents[1]

Rows = list[tuple[str, str]]

# Columns of the oracle table: CPU ms per frame of each stage, in the pipeline's
# own list, with the oracle "model" moved last (it is not part of the host path)
# and the CPU no stage could claim after it.
ORACLE_STAGES = (*(s for s in STAGE_CPU if s != "model"), "model", "other")


# -- meta ----------------------------------------------------------------------------
def collect_meta(mode: str) -> dict[str, Any]:
    """What the figures depend on: the machine, the versions, the commit, the date."""
    return {
        "mode": mode,
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": {
            "cpu": _cpu_model(),
            "cores": os.cpu_count(),
            "arch": platform.machine(),
            "os": f"{platform.system()} {platform.release()}",
            "gpu": _gpu(),
            "load_1min": round(os.getloadavg()[0], 1),
        },
        "versions": _versions(),
        "commit": _commit(),
    }


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _gpu() -> str | None:
    try:
        import torch
    except ImportError:
        return None
    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in ("torch", "streamseg", "av", "redis"):
        try:
            module = __import__(name)
        except ImportError:
            continue
        out[name] = str(getattr(module, "__version__", "?"))
    return out


def _commit() -> str:
    def git(*args: str) -> str:
        proc = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True)
        return proc.stdout.strip() if proc.returncode == 0 else ""

    commit = git("rev-parse", "--short=12", "HEAD") or "unknown"
    return commit + ("-dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


# -- figures per benchmark ----------------------------------------------------------------
def _num(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}g}" if abs(value) < 10**digits else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def ops_rows(data: dict[str, Any]) -> Rows:
    rows = [
        (f"{name}: native / reference ms (x faster)", _ops_cell(op))
        for name, op in data["ops"].items()
    ]
    return [("threads", _num(data.get("threads"))), *rows]


def _ops_cell(op: dict[str, Any]) -> str:
    return (
        f"{_num(op.get('native_ms'))} / {_num(op.get('reference_ms'))} ({_num(op.get('ratio'))}x)"
    )


def model_rows(data: dict[str, Any]) -> Rows:
    size = "x".join(str(v) for v in data.get("size", []))
    what = " ".join(
        str(v)
        for v in (
            data.get("arch"),
            size,
            "batch",
            data.get("batch"),
            data.get("backend"),
            data.get("precision"),
        )
    )
    latency, cpu = data.get("latency_ms", {}), data.get("cpu_ms", {})
    return [
        ("model", what),
        ("frames/s", _num(data.get("fps"))),
        ("latency p50 ms", _num(latency.get("p50"))),
        ("CPU ms per batch, p50", _num(cpu.get("p50"))),
        ("timed batches", _num(data.get("iters"))),
    ]


def track_rows(data: dict[str, Any]) -> Rows:
    rows: Rows = []
    for name, q in (data.get("quality") or {}).items():
        if isinstance(q, dict) and "idf1" in q:
            rows.append((f"{name}: IDF1 / MOTA", f"{_num(q['idf1'])} / {_num(q['mota'])}"))
    for cost in data.get("cost") or []:
        n = cost["objects"]
        rows.append((f"tracker p50 ms, {n} objects", _num(cost.get("track_ms_p50"))))
        rules = cost.get("rules")
        rows.append(
            (f"tracker + {rules} rules p50 ms, {n} objects", _num(cost.get("track_rules_ms_p50")))
        )
    return rows


def pipeline_rows(data: dict[str, Any]) -> Rows:
    model = f"{data.get('arch')} {data.get('backend')} batch {data.get('batch_size')}"
    if data.get("model_process"):
        model += ", in its own process"
    rows = [
        ("model", model),
        ("frames x cameras", f"{data.get('frames')} x {data.get('cameras')}"),
        ("model-only frames/s", _num(data.get("model_fps"))),
        ("end-to-end frames/s", _num(data.get("e2e_fps"))),
        ("end-to-end / model-only (median pair)", _num(data.get("ratio"))),
    ]
    if data.get("ratios"):
        each = ", ".join(_num(r) for r in data["ratios"])
        rows.append(("end-to-end / model-only, each pair", each))
    rows.append(("latency p50 ms", _num(data.get("latency_p50_ms"))))
    rows.append(("peak memory MB", _num(data.get("peak_rss_mb"))))
    if data.get("model_process_peak_rss_mb"):
        worker = _num(data["model_process_peak_rss_mb"])
        rows.append(("peak memory MB, the model's process", worker))
    live = data.get("live")
    if live:
        rows.append(("live: processed frames/s", _num(live.get("processed_fps"))))
        rows.append(("live: real-time ratio", _num(live.get("realtime_ratio"))))
    return rows


def publish_rows(data: dict[str, Any]) -> Rows:
    rows = [
        (
            f"JSON encoding, {e['objects']} objects: messages per CPU s",
            _num(e.get("messages_per_cpu_s")),
        )
        for e in data.get("encode", [])
    ]
    sink = data.get("sink") or {}
    rows.append(("Redis sink: messages/s", _num(sink.get("messages_per_s"))))
    rows.append(("Redis sink: messages per CPU s", _num(sink.get("messages_per_cpu_s"))))
    bench = data.get("redis_benchmark") or {}
    rows.append(("redis-benchmark XADD: messages/s", _num(bench.get("messages_per_s"))))
    return rows


def synth_rows(data: dict[str, Any]) -> Rows:
    return [
        ("scene", f"{data.get('width')}x{data.get('height')}, {data.get('objects')} objects"),
        ("frames rendered per s", _num(data.get("frames_per_second"))),
    ]


def generic_rows(data: dict[str, Any]) -> Rows:
    return [(k, _num(v)) for k, v in data.items() if isinstance(v, int | float | str)]


KINDS: list[tuple[Callable[[dict[str, Any]], bool], Callable[[dict[str, Any]], Rows]]] = [
    (lambda d: "ops" in d and "native" in d, ops_rows),
    (lambda d: d.get("benchmark") == "track", track_rows),
    (lambda d: "model_fps" in d, pipeline_rows),
    (lambda d: "encode" in d and "sink" in d, publish_rows),
    (lambda d: d.get("benchmark") == "synth_render", synth_rows),
    (lambda d: "latency_ms" in d and "arch" in d, model_rows),
    (lambda d: d.get("benchmark") == "dispatch", dispatch_rows),
]


def rows_of(data: dict[str, Any]) -> Rows:
    for test, rows in KINDS:
        if test(data):
            return rows(data)
    return generic_rows(data)


def oracle_row(name: str, data: dict[str, Any]) -> list[str]:
    per_frame = data.get("cpu_ms_per_frame") or {}
    decode = data.get("decode") or {}
    return [
        name,
        str(data.get("input")),
        _num(data.get("cameras")),
        f"{_num(data.get('scene_objects'))} ({_num(data.get('objects_per_frame'))})",
        _num(data.get("e2e_fps")),
        _num(data.get("host_ms_per_frame")),
        _num(data.get("host_fps_per_core")),
        *(_num(per_frame.get(stage)) for stage in ORACLE_STAGES),
        _num(decode.get("fps_per_core")),
    ]


# -- the document ------------------------------------------------------------------------
def _runs(folder: Path) -> Iterator[tuple[str, str, int, dict[str, Any] | None]]:
    """``(name, command, exit code, JSON or None)`` of each benchmark, in the order run
    (``runs.txt``, one name a line; else by name)."""
    listed = folder / "runs.txt"
    if listed.exists():
        names = [n for n in listed.read_text().split() if n]
    else:
        names = sorted(p.stem for p in folder.glob("*.cmd"))
    for name in names:
        cmd = folder / f"{name}.cmd"
        rc_file = folder / f"{name}.rc"
        rc = int(rc_file.read_text().strip() or 1) if rc_file.exists() else 1
        data = None
        with contextlib.suppress(OSError, ValueError):  # missing or not JSON: failed
            data = json.loads((folder / f"{name}.json").read_text())
        yield name, cmd.read_text().strip(), rc, data if isinstance(data, dict) else None


def render(folder: Path) -> str:
    meta = json.loads((folder / "meta.json").read_text())
    return "\n".join(_header(meta) + _sections(folder)).rstrip() + "\n"


def _sections(folder: Path) -> list[str]:
    """Every benchmark's section, then the oracle table and the dispatch comparison."""
    lines: list[str] = []
    oracle: list[tuple[str, str, dict[str, Any]]] = []
    dispatch: list[dict[str, Any]] = []
    for name, command, rc, data in _runs(folder):
        if rc != 0 or data is None:
            lines += [
                f"## {name}",
                "",
                f"`{command}`",
                "",
                f"**failed** (exit code {rc}; see `{name}.err`)",
                "",
            ]
            continue
        if data.get("model") == "oracle":
            oracle.append((name, command, data))
            continue
        if data.get("benchmark") == "dispatch":
            dispatch.append(data)
        lines += [f"## {name}", "", f"`{command}`", "", "| figure | value |", "| --- | --- |"]
        lines += [f"| {k} | {v} |" for k, v in rows_of(data)]
        lines.append("")
    if oracle:
        lines += _oracle_section(oracle)
    if dispatch:
        lines += comparison(dispatch)
    return lines


def splice(folder: Path, doc: str) -> str:
    """``doc`` with the sections of ``folder``'s benchmarks put in: each replaces the
    section of its name, or comes before the oracle table and the dispatch
    comparison, which close the page; each says which commit and date it was
    measured at."""
    meta = json.loads((folder / "meta.json").read_text())
    stamp = f"(measured {meta['date']} at {meta['commit']}, spliced into the full run above)"
    blocks = _blocks(doc)
    for block in _blocks("\n".join(_sections(folder))):
        title = block[0]
        if not title.startswith("## GPU dispatch") and not title.startswith("## Host path"):
            block = [title, "", stamp, *block[1:]]
        names = [b[0] for b in blocks]
        # The oracle table, then the dispatch comparison, close the page (as render).
        later = ("## GPU",) if title.startswith("## Host path") else ("## Host path", "## GPU")
        if title.startswith("## GPU"):
            later = ()
        tail = [i for i, n in enumerate(names) if later and n.startswith(later)]
        if title in names:
            blocks[names.index(title)] = block
        else:
            blocks.insert(tail[0] if tail else len(blocks), block)
    return "\n\n".join("\n".join(b).strip("\n") for b in blocks) + "\n"


def _blocks(text: str) -> list[list[str]]:
    """The lines of ``text`` cut before each ``## `` heading (the first block: the top)."""
    blocks: list[list[str]] = [[]]
    for line in text.splitlines():
        if line.startswith("## "):
            blocks.append([])
        blocks[-1].append(line)
    return [b for b in blocks if b]


def _header(meta: dict[str, Any]) -> list[str]:
    m, v = meta["machine"], meta["versions"]
    quick = meta.get("mode") == "quick"
    lines = [
        "# Performance",
        "",
        "Generated by `scripts/bench.sh` (`scripts/perf_report.py`); do not edit by hand:",
        "rerun `scripts/bench.sh` and commit the result.",
        "",
    ]
    if quick:
        lines += [
            "> **QUICK RUN (`scripts/bench.sh --quick`): a smoke test with few frames and",
            "> iterations. These figures show that every benchmark runs; they are not",
            "> measurements to quote. Run `scripts/bench.sh` for those.**",
            "",
        ]
    lines += [
        "| | |",
        "| --- | --- |",
        f"| mode | {'quick (smoke test, not for quoting)' if quick else 'full'} |",
        f"| date | {meta['date']} |",
        f"| machine | {m['cpu']}, {m['cores']} cores, {m['arch']}, {m['os']} |",
        f"| GPU | {m.get('gpu') or 'none'} |",
        f"| load (1 min) at start | {m.get('load_1min')} |",
        f"| versions | {', '.join(f'{k} {val}' for k, val in v.items())} |",
        f"| git commit | {meta['commit']} |",
        "",
    ]
    return lines


def _oracle_section(runs: list[tuple[str, str, dict[str, Any]]]) -> list[str]:
    head = [
        "run",
        "input",
        "cameras",
        "objects (visible per frame)",
        "frames/s",
        "host ms",
        "host frames/s per core",
        *ORACLE_STAGES,
        "H.264 decode frames/s per core",
    ]
    lines = [
        "## Host path with the oracle model",
        "",
        "`bench pipeline --model oracle`: the synthetic scene's exact instances replace",
        "the model. CPU milliseconds per frame by stage; `host ms` sums every stage but",
        "decode and model (the oracle), `host frames/s per core` is its inverse.",
        "",
        "| " + " | ".join(head) + " |",
        "| " + " | ".join("---" for _ in head) + " |",
    ]
    lines += ["| " + " | ".join(oracle_row(name, data)) + " |" for name, _cmd, data in runs]
    lines += ["", "Commands:", ""]
    lines += [f"* {name}: `{command}`" for name, command, _data in runs]
    lines.append("")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    meta = sub.add_parser("meta", help="write DIR/meta.json")
    meta.add_argument("folder", type=Path)
    meta.add_argument("--mode", choices=("quick", "full"), required=True)
    doc = sub.add_parser("render", help="Markdown from DIR")
    doc.add_argument("folder", type=Path)
    doc.add_argument("--out", type=Path, help="write here instead of stdout")
    part = sub.add_parser("splice", help="put DIR's sections into an existing page")
    part.add_argument("folder", type=Path)
    part.add_argument("--doc", type=Path, required=True, help="the page, rewritten in place")
    args = parser.parse_args(argv)
    if args.what == "meta":
        args.folder.mkdir(parents=True, exist_ok=True)
        (args.folder / "meta.json").write_text(json.dumps(collect_meta(args.mode), indent=2))
        return 0
    if not (args.folder / "meta.json").is_file():
        print(
            f"perf_report: {args.folder}/meta.json not found: run `perf_report.py meta "
            f"{args.folder} --mode ...` first (scripts/bench.sh does)",
            file=sys.stderr,
        )
        return 2
    if args.what == "splice":
        args.doc.write_text(splice(args.folder, args.doc.read_text()))
        return 0
    text = render(args.folder)
    if args.out:
        args.out.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
