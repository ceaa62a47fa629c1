"""``bench fleet``: three ``serve`` workers, one Redis; kill, stop, join and cut them off.

``run_fleet(pipeline)`` starts ``workers`` real ``streamseg serve``
processes on this machine, each a fleet worker (``fleet:`` added to the
pipeline's own config, ``lease_s`` seconds), each reaching Redis through a
``TcpProxy`` of its own so that it can be cut off for real. The pipeline's
cameras seed the fleet's list. Then, one after the other, each phase
starting at an event and lasting until the next:

* ``kill``: SIGKILL the worker with the most cameras (its whole process
  group, its model's process too);
* ``join``: start it again; it takes its share back;
* ``term``: SIGTERM another (a rolling update);
* ``rejoin``: start that one again;
* ``cut``: cut a third worker off from Redis (every connection reset);
* ``return``: let it reach Redis again; it takes its cameras back.

Each phase waits until every camera publishes again (from the worker the
fleet places it on), then ``settle`` seconds more. The figures come from the
detections streams alone (``streamseg.bench.fleet_report``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import logging
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from streamseg.bench.fleet_report import Sample, camera_phase, overlaps, rate
from streamseg.bench.redis_server import redis_for_bench
from streamseg.bench.tcp_proxy import TcpProxy
from streamseg.config.pipeline import PipelineConfig
from streamseg.streams import detections_stream

__all__ = ["GOALS", "run_fleet"]

log = logging.getLogger("streamseg.bench")

# phase -> the bound on the moved cameras' gap_s (None: not bounded)
GOALS: dict[str, float | None] = {
    "kill": 10.0,
    "join": None,
    "term": 3.0,
    "rejoin": None,
    "cut": None,
    "return": None,
}


@dataclasses.dataclass
class _Worker:
    name: str
    path: Path
    proxy: TcpProxy
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None
    expected: bool = False  # it should be running (started, not killed or stopped since)

    def start(self) -> None:
        self.expected = True
        cmd = [sys.executable, "-m", "streamseg", "serve", str(self.path), "--no-status"]
        with self.log_path.open("ab") as out:
            self.proc = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def kill(self) -> None:
        self.expected = False
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def term(self) -> None:
        self.expected = False
        if self.proc is not None:
            self.proc.send_signal(signal.SIGTERM)

    def wait(self, timeout: float) -> None:
        if self.proc is None:
            return
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class _Fleet:
    """The workers, the Redis they share, and what the streams say."""

    def __init__(self, client: Any, prefix: str, cameras: list[str]) -> None:
        from streamseg.fleet.store import FleetStore

        self.client, self.prefix, self.cameras = client, prefix, cameras
        self.store = FleetStore(client, prefix=prefix)
        self.workers: dict[str, _Worker] = {}

    def last(self, camera: str) -> dict[str, Any] | None:
        got = self.client.xrevrange(detections_stream(self.prefix, camera), count=1)
        return json.loads(got[0][1][b"data"]) if got else None

    def owners(self) -> dict[str, str | None]:
        rows = self.store.snapshot()["cameras"]
        return {c: rows.get(c, {}).get("owner") for c in self.cameras}

    def publishing(self, since: float, *, not_from: str | None = None) -> bool:
        """Every camera published after ``since`` from its lease's owner (not ``not_from``)."""
        owners = self.owners()
        for cid in self.cameras:
            m = self.last(cid)
            if m is None or m["published_time"] <= since or m.get("worker") == not_from:
                return False
            if owners[cid] != m.get("worker"):
                return False
        return True

    def holds(self, worker: str) -> list[str]:
        return [c for c, o in self.owners().items() if o == worker]

    def busiest(self, skip: tuple[str, ...] = ()) -> str:
        owners = self.owners()
        names = [w for w in self.workers if w not in skip]
        return max(names, key=lambda w: (sum(1 for o in owners.values() if o == w), w))

    def samples(self, camera: str) -> list[Sample]:
        out = []
        for _id, fields in self.client.xrange(detections_stream(self.prefix, camera)):
            m = json.loads(fields[b"data"])
            out.append(Sample(m.get("worker"), m.get("epoch"), m["seq"], m["published_time"]))
        return out


def _wait(predicate: Callable[[], bool], timeout: float, what: str, fleet: _Fleet) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"bench fleet: not within {timeout:.0f}s: {what}")
        for w in fleet.workers.values():
            if w.expected and not w.alive():
                tail = w.log_path.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"bench fleet: worker {w.name} ended:\n{tail}")
        time.sleep(0.05)


def run_fleet(
    pipeline: Path,
    config: PipelineConfig,
    *,
    workers: int = 3,
    lease_s: float = 4.0,
    settle: float = 4.0,
    start_timeout: float = 300.0,
) -> dict[str, Any]:
    """Run the phases; the JSON summary (see the module docstring)."""
    if workers < 3:
        raise ValueError("bench fleet needs at least 3 workers")
    t_run, cpu_run = time.monotonic(), time.process_time()
    with redis_for_bench(config.redis) as rcfg, _workspace(pipeline) as folder:
        from streamseg.publish.connect import redis_client

        prefix = f"fleetbench-{uuid.uuid4().hex[:8]}"
        fleet = _Fleet(
            redis_client(rcfg, socket_timeout=5.0), prefix, [c.id for c in config.cameras]
        )
        port = urllib.parse.urlsplit(rcfg.url).port or 6379
        tree = YAML(typ="safe").load(pipeline.read_text())
        # What one worker takes when another is gone: the fleet survives a loss.
        capacity = -(-len(config.cameras) // (workers - 1))
        try:
            for i in range(workers):
                w = _make_worker(
                    f"w{i}", tree, folder, pipeline.parent, port, prefix, lease_s, rcfg.url,
                    capacity,
                )  # fmt: skip
                fleet.workers[w.name] = w
                w.start()
            events = _phases(fleet, settle=settle, start_timeout=start_timeout)
        finally:
            for w in fleet.workers.values():
                w.term()
            for w in fleet.workers.values():
                w.wait(60)
                w.proxy.close()
        result = _report(fleet, events, lease_s=lease_s)
        result["capacity"] = capacity
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    result["wall_s"] = round(time.monotonic() - t_run, 1)
    result["cpu_s"] = {
        "bench": round(time.process_time() - cpu_run, 1),
        "workers": round(children.ru_utime + children.ru_stime, 1),
    }
    return result


@contextlib.contextmanager
def _workspace(pipeline: Path) -> Iterator[Path]:
    """A temporary folder for the workers' logs (kept, for a look after a failure); their
    pipeline files go beside ``pipeline`` (its relative paths hold) and are removed."""
    folder = Path(tempfile.mkdtemp(prefix="streamseg-fleet-bench-"))
    try:
        yield folder
    finally:
        for f in pipeline.parent.glob(f".{folder.name}-*.yaml"):
            f.unlink()
        log.info("bench fleet: worker logs in %s", folder)


def _make_worker(
    name: str, tree: dict[str, Any], folder: Path, base: Path, port: int, prefix: str,
    lease_s: float, redis_url: str, capacity: int,
) -> _Worker:  # fmt: skip
    host = urllib.parse.urlsplit(redis_url).hostname or "127.0.0.1"
    proxy = TcpProxy(port, host=host).start()
    cfg = dict(tree)
    url = urllib.parse.urlsplit(redis_url)._replace(netloc=_netloc(redis_url, proxy.port))
    cfg["redis"] = {**tree.get("redis", {}), "url": url.geturl(), "stream_prefix": prefix}
    cfg["fleet"] = {"name": name, "capacity": capacity, "lease_s": lease_s}
    cfg["http"] = {"enabled": False}
    cfg["telemetry"] = {"metrics": "none", "traces": "none"}
    path = base / f".{folder.name}-{name}.yaml"  # beside pipeline.yaml: its relative paths hold
    with path.open("w") as f:
        YAML(typ="safe").dump(cfg, f)
    return _Worker(name, path, proxy, folder / f"{name}.log")


def _netloc(url: str, port: int) -> str:
    parts = urllib.parse.urlsplit(url)
    auth = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
    return f"{auth}127.0.0.1:{port}"


def _phases(fleet: _Fleet, *, settle: float, start_timeout: float) -> list[tuple[str, str, float]]:
    """Run every phase; ``[(phase, worker, unix time of its event)]``, "steady" first."""
    ws = fleet.workers
    _wait(lambda: fleet.publishing(0) and all(fleet.holds(w) for w in ws), start_timeout,
          "every worker serving and every camera published", fleet)  # fmt: skip
    events = [("steady", "", time.time())]
    time.sleep(settle)

    def event(phase: str, worker: str, act: Callable[[], None]) -> float:
        t = time.time()
        act()
        events.append((phase, worker, t))
        log.info("bench fleet: %s %s", phase, worker)
        return t

    victim = fleet.busiest()
    t = event("kill", victim, ws[victim].kill)
    _wait(lambda: fleet.publishing(t, not_from=victim), 60, "cameras moved off the killed", fleet)
    time.sleep(settle)
    t = event("join", victim, ws[victim].start)
    _wait(lambda: bool(fleet.holds(victim)) and fleet.publishing(t), start_timeout,
          "the restarted worker serving its share", fleet)  # fmt: skip
    time.sleep(settle)
    second = fleet.busiest(skip=(victim,))
    t = event("term", second, ws[second].term)
    _wait(lambda: fleet.publishing(t, not_from=second), 60, "cameras moved off the stopped", fleet)
    time.sleep(settle)
    ws[second].wait(60)
    t = event("rejoin", second, ws[second].start)
    _wait(lambda: bool(fleet.holds(second)) and fleet.publishing(t), start_timeout,
          "the restarted worker serving its share", fleet)  # fmt: skip
    time.sleep(settle)
    third = fleet.busiest(skip=(victim, second))
    t = event("cut", third, ws[third].proxy.cut)
    _wait(lambda: fleet.publishing(t, not_from=third), 60, "cameras moved off the cut-off", fleet)
    time.sleep(settle)
    t = event("return", third, ws[third].proxy.restore)
    _wait(lambda: bool(fleet.holds(third)) and fleet.publishing(t), 60,
          "the returned worker serving its share", fleet)  # fmt: skip
    time.sleep(settle)
    events.append(("end", "", time.time()))
    return events


def _report(
    fleet: _Fleet, events: list[tuple[str, str, float]], *, lease_s: float
) -> dict[str, Any]:
    samples = {c: fleet.samples(c) for c in fleet.cameras}
    steady_from, first_event = events[0][2], events[1][2]
    fps = {
        c: rate([s for s in ss if steady_from <= s.published < first_event])
        for c, ss in samples.items()
    }
    phases: dict[str, Any] = {}
    for (phase, worker, start), (_n, _w, end) in itertools.pairwise(events[1:]):
        cams = {
            c: camera_phase(samples[c], start=start, end=end, fps=fps[c]) for c in fleet.cameras
        }
        moved = [c for c, r in cams.items() if r["moved"]]
        stayed = [c for c in cams if c not in moved]
        gaps = [cams[c]["gap_s"] for c in moved if cams[c]["gap_s"] is not None]
        silences = [cams[c]["silence_s"] for c in moved if cams[c]["silence_s"] is not None]
        goal = GOALS[phase]
        summary = {
            "worker": worker,
            "moved": len(moved),
            "max_gap_s": max(gaps) if gaps else None,
            "goal_gap_s": goal,
            "max_silence_s": max(silences) if silences else None,
            "stayed_lost": sum(cams[c]["lost"] for c in stayed),
            "duplicated": sum(r["duplicated"] for r in cams.values()),
        }
        summary["ok"] = (
            summary["stayed_lost"] == 0
            and summary["duplicated"] == 0
            and (
                goal is None or (summary["max_gap_s"] is not None and summary["max_gap_s"] <= goal)
            )
        )
        phases[phase] = {**summary, "cameras": cams}
    return {
        "workers": len(fleet.workers),
        "cameras": len(fleet.cameras),
        "lease_s": lease_s,
        "camera_fps": {c: round(v, 2) for c, v in fps.items()},
        "two_at_once": sum(overlaps(ss) for ss in samples.values()),
        "phases": phases,
    }
