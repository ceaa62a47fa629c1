"""The soak behind scripts/soak.sh: the default pipeline for a while, with faults on a schedule.

``serve`` runs the shipped pipeline.yaml (the demo model in its own
process, tracking and alert rules) with its cameras replaced by RTSP
cameras from GStreamer's test server, a Redis that keeps what it
acknowledged across a SIGKILL (append-only file, fsync on every write) and
an MQTT sink on a mosquitto broker. After a warm-up, one fault every
``--fault-every`` seconds, in turn: an RTSP server killed and started again,
Redis killed and started again, the MQTT broker restarted, the model's
process killed, a hot swap of the weights. Every ``--sample`` seconds it
records ``/readyz`` (the frame and message counters), latency percentiles
(from the metrics' histogram), and the RSS of every process.

At the end ``serve`` gets SIGTERM; the report (``soak_report``) checks that
it exited 0, that nothing accepted was lost (no frame or message lost, every
frame read accounted for, every published frame in Redis and on MQTT),
that every fault was recovered from, and that RSS stayed flat after the
warm-up. It writes ``soak.json`` and ``soak.png`` to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

import soak_report  # noqa: E402
from ruamel.yaml import YAML  # noqa: E402

from streamseg.bench.mqtt_server import MosquittoServer, MQTTSubscriber  # noqa: E402
from streamseg.bench.ports import free_port  # noqa: E402
from streamseg.bench.redis_server import RedisServer  # noqa: E402
from streamseg.bench.rtsp_server import RtspServer, gstreamer_missing  # noqa: E402

FAULTS = ("rtsp_kill", "redis_kill", "mqtt_restart", "model_kill", "hot_swap")
OUTAGE_S = 3.0  # how long a killed server stays away


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="scripts/soak.sh", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--minutes", type=float, default=30.0, help="how long serve runs, from when it is ready"
    )
    p.add_argument("--out", type=Path, default=None, help="folder for soak.json, soak.png, logs")
    p.add_argument("--cameras", type=int, default=2, help="RTSP cameras (320x240, 10 fps)")
    p.add_argument("--fault-every", type=float, default=None, help="seconds between faults")
    p.add_argument("--warmup", type=float, default=None, help="seconds before the first fault")
    p.add_argument("--sample", type=float, default=5.0, help="seconds between samples")
    return p.parse_args(argv)


class Rig:
    """The servers around ``serve``, and ``serve`` itself."""

    def __init__(self, out: Path, cameras: int) -> None:
        self.out = out
        self.redis = RedisServer(out / "redis", persist=True)
        (out / "redis").mkdir(exist_ok=True)
        self.mqtt = MosquittoServer(out / "mosquitto")
        self.rtsp = [RtspServer(width=320, height=240, fps=10, gop=10) for _ in range(cameras)]
        self.http_port = free_port()
        self.serve: subprocess.Popen[bytes] | None = None
        self.weights = [out / "weights-a.pth", out / "weights-b.pth"]
        for path in self.weights:
            shutil.copy(REPO / "models" / "demo_small.pth", path)
        self.swaps = 0

    def start(self) -> Path:
        self.redis.start()
        self.mqtt.start()
        for server in self.rtsp:
            server.start()
        self.subscriber = MQTTSubscriber(self.mqtt, "streamseg/+/detections")
        pipeline = self._pipeline()
        log = (self.out / "serve.log").open("wb")
        self.serve = subprocess.Popen(
            [sys.executable, "-m", "streamseg", "serve", str(pipeline), "--no-status"],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**cli_env(), "OMP_NUM_THREADS": "1"},
            cwd=REPO,
            start_new_session=True,
        )
        return pipeline

    def _pipeline(self) -> Path:
        """The shipped pipeline.yaml, its cameras on RTSP, Redis and MQTT ours."""
        yaml = YAML()
        tree = yaml.load((REPO / "pipeline.yaml").read_text())
        for cam, server in zip(tree["cameras"], self.rtsp, strict=False):
            cam["url"] = server.url
            cam["reconnect"] = {"initial_backoff": 0.5, "max_backoff": 2.0}
        tree["cameras"] = tree["cameras"][: len(self.rtsp)]
        tree["model"]["weights"] = str(self.weights[0])
        tree["redis"].update(url=self.redis.url, maxlen=10_000_000, buffer_max_messages=100_000)
        tree["sinks"] = [{"name": "mqtt", "type": "mqtt", "url": self.mqtt.url}]
        tree["http"]["port"] = self.http_port
        tree["runtime"]["status_interval"] = 30
        path = self.out / "pipeline.yaml"
        with path.open("w") as f:
            yaml.dump(tree, f)
        return path

    def get(self, path: str) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}{path}", timeout=5) as r:
            return str(r.read().decode())

    def readyz(self) -> dict[str, Any]:
        try:
            return dict(json.loads(self.get("/readyz")))
        except OSError as exc:  # 503 while not ready still has a body
            body = getattr(exc, "read", None)
            return dict(json.loads(body())) if body is not None else {}

    def pids(self) -> dict[str, int | None]:
        model = self.readyz().get("model", {}).get("process", {}).get("pid")
        pids: dict[str, int | None] = {
            "serve": self.serve.pid if self.serve else None,
            "model": model,
            "redis": self.redis.proc.pid if self.redis.proc else None,
            "mosquitto": self.mqtt.proc.pid if self.mqtt.proc else None,
        }
        for i, server in enumerate(self.rtsp):
            pids[f"rtsp{i}"] = server.proc.pid if server.proc else None
        return pids

    def fault(self, kind: str, index: int) -> str:
        """Inject fault ``kind``; returns what was done, in words."""
        if kind == "rtsp_kill":
            server = self.rtsp[index % len(self.rtsp)]
            server.kill()
            time.sleep(OUTAGE_S)
            server.start()
            return f"RTSP server {index % len(self.rtsp)} killed, back after {OUTAGE_S:.0f} s"
        if kind == "redis_kill":
            assert self.redis.proc is not None
            self.redis.proc.kill()
            self.redis.proc.wait()
            time.sleep(OUTAGE_S)
            self.redis.start()
            return f"Redis killed (SIGKILL), back after {OUTAGE_S:.0f} s"
        if kind == "mqtt_restart":
            self.mqtt.restart()
            return "MQTT broker restarted"
        if kind == "model_kill":
            pid = self.pids()["model"]
            if pid is None:
                return "model process not running: nothing killed"
            os.kill(pid, signal.SIGKILL)
            return f"model process {pid} killed (SIGKILL)"
        self.swaps += 1
        weights = self.weights[self.swaps % 2]
        pipeline = str(self.out / "pipeline.yaml")
        done = subprocess.run(
            [sys.executable, "-m", "streamseg", "swap", "--pipeline", pipeline, str(weights)],
            capture_output=True,
            text=True,
            env=cli_env(),
            cwd=REPO,
            timeout=120,
        )
        return f"hot swap to {weights.name}: exit {done.returncode}"

    def stop(self) -> int | None:
        code = None
        if self.serve is not None and self.serve.poll() is None:
            self.serve.send_signal(signal.SIGTERM)
            try:
                code = self.serve.wait(120)
            except subprocess.TimeoutExpired:
                os.killpg(self.serve.pid, signal.SIGKILL)
                self.serve.wait()
        elif self.serve is not None:
            code = self.serve.returncode
        return code

    def close(self) -> None:
        if self.serve is not None and self.serve.poll() is None:
            os.killpg(self.serve.pid, signal.SIGKILL)
        self.subscriber.close()
        for server in self.rtsp:
            server.kill()
        self.mqtt.stop()
        self.redis.stop()


def rss_mb(pid: int | None) -> float | None:
    if pid is None:
        return None
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None


class Sampler(threading.Thread):
    """Every ``every`` seconds: counters, latency buckets and RSS, with the time since ``t0``."""

    def __init__(self, rig: Rig, every: float, t0: float) -> None:
        super().__init__(name="sampler", daemon=True)
        self.rig, self.every, self.t0 = rig, every, t0
        self.samples: list[dict[str, Any]] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.wait(self.every):
            try:
                self.samples.append(self.sample())
            except Exception as exc:  # serve restarting its HTTP, a process gone
                self.samples.append({"t": time.monotonic() - self.t0, "error": repr(exc)})

    def sample(self) -> dict[str, Any]:
        ready = self.rig.readyz()
        pids = self.rig.pids()
        return {
            "t": round(time.monotonic() - self.t0, 2),
            "load": os.getloadavg()[0],
            "ready": bool(ready.get("ready")),
            "cameras": {c: d.get("counts", {}) for c, d in ready.get("cameras", {}).items()},
            "sinks": {
                s: {k: d.get(k) for k in ("published", "lost", "buffered", "connected")}
                for s, d in ready.get("sinks", {}).items()
            },
            "model": {k: ready.get("model", {}).get(k) for k in ("state", "failed_batches")}
            | {"restarts": ready.get("model", {}).get("process", {}).get("restarts")},
            "latency_buckets": soak_report.latency_buckets(self.rig.get("/metrics")),
            "rss_mb": {name: rss_mb(pid) for name, pid in pids.items()},
        }


def wait_recovered(rig: Rig, timeout: float = 120.0) -> float | None:
    """Seconds until ``/readyz`` says ready and every camera published more (``None``: never)."""
    t0 = time.monotonic()
    before = {c: d.get("published", 0) for c, d in _counts(rig).items()}
    while time.monotonic() - t0 < timeout:
        ready, counts = rig.readyz(), _counts(rig)
        if ready.get("ready") and all(counts[c].get("published", 0) > n for c, n in before.items()):
            return round(time.monotonic() - t0, 2)
        time.sleep(0.5)
    return None


def _counts(rig: Rig) -> dict[str, dict[str, int]]:
    cams = rig.readyz().get("cameras", {})
    return {c: d.get("counts", {}) for c, d in cams.items()}


def soak(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    seconds = args.minutes * 60
    warmup = args.warmup if args.warmup is not None else min(120.0, max(20.0, seconds * 0.1))
    every = args.fault_every or max(12.0, (seconds - warmup) / (len(FAULTS) * 6))
    rig = Rig(out, args.cameras)
    faults: list[dict[str, Any]] = []
    load0 = os.getloadavg()
    rig.start()
    try:
        if wait_recovered(rig, timeout=300) is None:
            raise RuntimeError(f"serve never got ready; see {out / 'serve.log'}")
        # The clock starts once serve is ready: a slow start (a first build of the
        # native ops on a busy machine) must not eat the minutes of faults.
        t0 = time.monotonic()
        sampler = Sampler(rig, args.sample, t0)
        sampler.start()
        next_fault, i = t0 + warmup, 0
        end = t0 + seconds
        while time.monotonic() < end:
            if time.monotonic() >= next_fault and end - time.monotonic() > every:
                kind = FAULTS[i % len(FAULTS)]
                at = round(time.monotonic() - t0, 2)
                what = rig.fault(kind, i // len(FAULTS))
                recovered = wait_recovered(rig)
                faults.append({"t": at, "kind": kind, "what": what, "recovered_s": recovered})
                print(f"soak: {at:7.1f} s {what}; recovered in {recovered} s", flush=True)
                i += 1
                next_fault += every
            time.sleep(0.5)
        sampler.stopping.set()
        sampler.join(30)
        code = rig.stop()
        delivered = soak_report.delivered(rig.redis.client(), rig.subscriber.received())
    finally:
        rig.close()
    log = (out / "serve.log").read_text(errors="replace")
    return {
        "minutes": args.minutes,
        "cameras": args.cameras,
        "warmup_s": warmup,
        "fault_every_s": every,
        "load_average_start": load0,
        "load_average_end": os.getloadavg(),
        "cpus": os.cpu_count(),
        "serve_exit_code": code,
        "faults": faults,
        "samples": sampler.samples,
        "summary": soak_report.parse_summary(log),
        "delivered": delivered,
    }


def cli_env() -> dict[str, str]:
    """The environment for ``python -m streamseg`` from this checkout."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("OMP_NUM_THREADS", "2")
    return env


def missing_piece() -> str | None:
    """What the soak needs and this machine lacks (with how to install it), or ``None``."""
    for exe in ("redis-server", "mosquitto"):
        if shutil.which(exe) is None and shutil.which(exe, path="/usr/sbin") is None:
            return f"{exe} is not installed: run scripts/setup.sh --dev"
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return "matplotlib is not installed (it draws soak.png): run scripts/setup.sh --dev"
    return gstreamer_missing()


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    why = missing_piece()
    if why is not None:
        print(f"soak: {why}", file=sys.stderr)
        return 2
    out = args.out or Path(tempfile.mkdtemp(prefix="streamseg-soak-"))
    out.mkdir(parents=True, exist_ok=True)
    report = soak(args, out)
    report["verdict"] = soak_report.verdict(report)
    (out / "soak.json").write_text(json.dumps(report, indent=1))
    soak_report.plot(report, out / "soak.png")
    print(json.dumps(report["verdict"], indent=1))
    print(f"soak: report {out / 'soak.json'}, plot {out / 'soak.png'}")
    return 0 if report["verdict"]["passed"] else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
