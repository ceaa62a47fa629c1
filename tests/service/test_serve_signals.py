"""Stopping ``serve`` the ways users stop it, in both ``runtime.model_process`` modes.

* ``scripts/demo.sh`` gets SIGTERM or SIGINT (``kill``, a service manager,
  a container stop, Ctrl-C): the signal reaches ``serve``, which drains,
  flushes and exits 0; the script then stops the redis-server it started
  and exits 0. Nothing accepted is lost, and no process is left behind.
* The Dockerfile's entrypoint, run as a container runs it: its exec-form
  ENTRYPOINT + CMD as process 1 of a PID namespace of its own (where a
  signal without a handler is ignored, as in a container), gets SIGTERM
  from outside (``docker stop``, the kubelet) and drains and exits 0, well
  within the grace the compose file and the StatefulSet give it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.processes import children, ended
from tests.support.serve import (
    REPO,
    ServeProcess,
    checkpoint_model,
    service_pipeline,
    summary,
    write_pipeline,
)
from tests.support.servers import RedisServer, cli_env, free_port

pytestmark = pytest.mark.slow

URL = "synthetic://?seed=5&width=96&height=64&fps=10&objects=3"


def _pipeline(
    folder: Path,
    http_port: int,
    redis_url: str,
    model_process: bool,
    *,
    weights: Path = REPO / "models" / "demo_small.pth",
    arch: str = "maskrcnn_small",
    drain_timeout: float = 10,
) -> Path:
    config = service_pipeline(
        [{"id": "cam", "url": URL}],
        {"url": redis_url},
        model=checkpoint_model(weights, arch=arch, min_size=64, max_size=96, hot_swap=False),
        http={"host": "127.0.0.1", "port": http_port},
        runtime={
            "torch_threads": 1,
            "model_process": model_process,
            "drain_timeout": drain_timeout,
        },
    )
    return write_pipeline(folder, config)


def _published(proc: ServeProcess, at_least: int) -> None:
    def enough() -> bool:
        ready = proc.readyz()
        counts = ready.get("cameras", {}).get("cam", {}).get("counts", {})
        return bool(ready.get("ready")) and counts.get("published", 0) >= at_least

    proc.wait_for(enough, 180, f"{at_least} frames published")


@pytest.mark.parametrize(
    ("model_process", "sig"),
    [(False, signal.SIGTERM), (True, signal.SIGTERM), (True, signal.SIGINT)],
    ids=["in-process-TERM", "own-process-TERM", "own-process-INT"],
)
def test_demo_script_forwards_the_signal_and_stops_its_redis_last(
    tmp_path: Path, model_process: bool, sig: signal.Signals
) -> None:
    redis_port, http_port = free_port(), free_port()
    path = _pipeline(tmp_path, http_port, "${STREAMSEG_REDIS_URL}", model_process)
    env = {**cli_env(), "STREAMSEG_SKIP_SETUP": "1", "STREAMSEG_REDIS_PORT": str(redis_port)}
    demo = ServeProcess(
        None,
        tmp_path,
        path=path,
        http_port=http_port,
        env=env,
        command=["scripts/demo.sh", str(path)],
    ).start()
    try:
        _published(demo, 6)
        assert demo.proc is not None
        serve = [pid for pid, cmd in children(demo.proc.pid) if b"serve" in cmd]
        assert len(serve) == 1, children(demo.proc.pid)
        worker = demo.readyz()["model"].get("process", {}).get("pid")
        redis_pid = int(Path(f"/tmp/streamseg-demo-redis-{redis_port}.pid").read_text())
        os.kill(demo.proc.pid, sig)  # the script only, as `kill` or a service manager does
        assert demo.wait(60) == 0, demo.tail()
    finally:
        demo.kill()
    log = demo.log
    assert f"runtime: {sig.name} received" in log and "second" not in log
    # serve drained and summed up, then the script stopped its Redis.
    assert log.index("summary[cam]") < log.index("demo: stopping the redis-server it started")
    counts = summary(log, "cam")
    assert counts["lost"] == 0 and counts["read"] == counts["published"] + counts["skipped"]
    assert counts["published"] >= 6
    assert all(ended(p) for p in (serve[0], redis_pid, worker) if p is not None)


def _entrypoint() -> list[str]:
    """The Dockerfile's ENTRYPOINT + CMD, both in exec form (JSON arrays)."""
    text = (REPO / "Dockerfile").read_text()
    found = {}
    for key in ("ENTRYPOINT", "CMD"):
        lines = re.findall(rf"^{key} (.*)$", text, flags=re.MULTILINE)
        assert len(lines) == 1, f"one {key} line"
        value = json.loads(lines[0])  # shell form would not parse: sh -c, as PID 1, drops signals
        assert isinstance(value, list)
        found[key] = value
    return [*found["ENTRYPOINT"], *found["CMD"]]


def _deploy_drain_timeout() -> float:
    """``runtime.drain_timeout`` of the pipeline compose mounts (its default when unset)."""
    from ruamel.yaml import YAML

    from streamseg.config.runtime import RuntimeConfig

    tree = YAML(typ="safe").load((REPO / "deploy" / "pipeline.yaml").read_text())
    runtime = RuntimeConfig.model_validate(tree.get("runtime") or {})
    return runtime.drain_timeout


def _grace_seconds() -> dict[str, float]:
    """The stop grace docker compose and the StatefulSet give the container."""
    compose = (REPO / "deploy" / "docker-compose.yml").read_text()
    statefulset = (REPO / "deploy" / "k8s" / "statefulset.yaml").read_text()
    stop = re.search(r"stop_grace_period: (\d+)s", compose)
    k8s = re.search(r"terminationGracePeriodSeconds: (\d+)", statefulset)
    assert stop is not None and k8s is not None
    assert re.search(r"stop_signal: SIGTERM", compose)
    return {"compose": float(stop.group(1)), "k8s": float(k8s.group(1))}


@pytest.mark.parametrize("model_process", [False, True], ids=["in-process", "own-process"])
def test_container_entrypoint_as_process_one_drains_on_sigterm(
    tmp_path: Path, redis_server: RedisServer, model_process: bool
) -> None:
    argv = _entrypoint()
    assert argv[:2] == ["streamseg", "serve"]
    http_port = free_port()
    path = _pipeline(tmp_path, http_port, redis_server.url, model_process)
    drain = _deploy_drain_timeout()
    for where, grace in _grace_seconds().items():
        assert grace >= drain + 10, f"{where} kills serve before it can drain"
    unshare = shutil.which("unshare")
    # The container's command with this test's pipeline, the package from this checkout.
    command = [sys.executable, "-m", "streamseg", *argv[1:-1], str(path)]
    as_pid_one = [unshare, "--pid", "--fork", "--kill-child", *command] if unshare else command
    probe = subprocess.run([*as_pid_one[:4], "true"], capture_output=True) if unshare else None
    if probe is not None and probe.returncode != 0:
        pytest.skip(f"no PID namespace here: {probe.stderr.decode().strip()}")
    proc = ServeProcess(None, tmp_path, path=path, http_port=http_port, command=as_pid_one).start()
    try:
        _published(proc, 6)
        # serve is the namespace's process 1: unshare's one child.
        assert proc.proc is not None
        serve = [pid for pid, cmd in children(proc.proc.pid) if b"serve" in cmd]
        serve_pid = serve[0] if unshare else proc.proc.pid
        t0 = time.monotonic()
        os.kill(serve_pid, signal.SIGTERM)
        assert proc.wait(60) == 0, proc.tail()
        stopped_in = time.monotonic() - t0
    finally:
        proc.kill()
    log = proc.log
    assert "runtime: SIGTERM received" in log
    counts = summary(log, "cam")
    assert counts["lost"] == 0 and counts["read"] == counts["published"] + counts["skipped"]
    assert stopped_in < min(_grace_seconds().values()), stopped_in  # not killed by the grace


def test_sigterm_while_the_models_process_starts_ends_both(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    """The model's warm-up hangs (maskrcnn_small_faulty, forward pass 0): SIGTERM
    while its own process starts cancels the start, ends that process and exits 0."""
    from tests.support.checkpoints import random_checkpoint

    http_port = free_port()
    weights = random_checkpoint(tmp_path / "hang.pth", 0, faults="0=hang")
    path = _pipeline(
        tmp_path,
        http_port,
        redis_server.url,
        model_process=True,
        weights=weights,
        arch="maskrcnn_small_faulty",
    )
    proc = ServeProcess(None, tmp_path, path=path, http_port=http_port).start()
    try:
        proc.wait_for(lambda: "model: loading" in proc.log, 120, "the model's process loading")
        worker = int(re.findall(r"started its own process \(pid (\d+)\)", proc.log)[0])
        assert proc.terminate(60) == 0, proc.tail()
    finally:
        proc.kill()
    assert "runtime: SIGTERM received" in proc.log and "Traceback" not in proc.log
    assert ended(worker, 2.0)


def test_a_drain_that_cannot_finish_says_what_it_waits_for(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    """The in-process model hangs on its second batch: SIGTERM cannot drain, so after
    runtime.drain_timeout serve names what is stuck, prints its summary and exits 1."""
    from tests.support.checkpoints import random_checkpoint

    http_port = free_port()
    weights = random_checkpoint(tmp_path / "hang.pth", 0, faults="2=hang")  # 0: warm-up
    path = _pipeline(
        tmp_path,
        http_port,
        redis_server.url,
        model_process=False,
        weights=weights,
        arch="maskrcnn_small_faulty",
        drain_timeout=2,
    )
    proc = ServeProcess(None, tmp_path, path=path, http_port=http_port).start()
    try:
        _published(proc, 1)
        time.sleep(1.0)  # the second batch is in the model now, and stays there
        assert proc.terminate(30) == 1, proc.tail()
    finally:
        proc.kill()
    stuck = re.search(r"drain did not finish within 2s \(runtime.drain_timeout\): (.*)", proc.log)
    assert stuck is not None, proc.tail()
    assert re.search(r"cam: \d+ frames", stuck.group(1)), stuck.group(1)
    assert "stages still running: " in stuck.group(1) and "segment" in stuck.group(1)
    counts = summary(proc.log, "cam")
    assert counts["published"] >= 1 and counts["read"] > counts["published"] + counts["skipped"]
    assert "Traceback" not in proc.log
