"""``streamseg serve`` as a real subprocess, with its HTTP endpoint and Redis output.

``ServeProcess`` writes a pipeline.yaml, starts ``python -m streamseg serve``
in its own session, keeps every line it prints, and offers what the service
tests need: ``/healthz`` ``/readyz`` ``/metrics``, waiting for a condition
(failing with the log tail if the process died), SIGTERM and the exit code.

``service_pipeline(...)`` builds the config the service tests share: the small
Mask R-CNN with random weights on the CPU at the frames' own size (160x120),
one torch thread, fast reconnects. ``checkpoint_model(weights)`` is the model
section of a checkpoint instead, and ``write_pipeline(folder, tree)`` writes a
tree where ``serve``, ``check`` and the loader read it: the one pipeline builder
of the suite (tests add or replace sections, they do not write their own).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from tests.support.servers import cli_env, free_port

__all__ = [
    "FAST_RECONNECT",
    "ServeProcess",
    "checkpoint_model",
    "detections",
    "metric",
    "metric_sum",
    "scene_pipeline",
    "service_pipeline",
    "summary",
    "write_pipeline",
]

REPO = Path(__file__).resolve().parents[2]

FAST_RECONNECT = {
    "initial_backoff": 0.2,
    "max_backoff": 1.0,
    "connect_timeout": 3.0,
    "read_timeout": 5.0,
}


def service_pipeline(cameras: list[dict[str, Any]], redis: dict[str, Any], **sections: Any) -> dict:  # type: ignore[type-arg]
    """A pipeline.yaml (as a dict) for service tests; ``sections`` replace whole sections."""
    config: dict[str, Any] = {
        "version": 1,
        "cameras": cameras,
        "model": {
            "arch": "maskrcnn_small",
            "weights": "no-such-checkpoint.pth",
            "missing_weights": "random",
            "device": "cpu",
            "batch_size": 2,
            "max_wait_ms": 20,
            # Random weights score every class about equally (~0.2 with the
            # synthetic classes): a low threshold gives instances with masks.
            "score_threshold": 0.05,
            "detections_per_image": 5,
            "min_size": 120,  # the test frames' own size: no upscaling
            "max_size": 160,
        },
        "redis": {"maxlen": 100_000, "reconnect_initial": 0.1, "reconnect_max": 0.5, **redis},
        "telemetry": {"metrics": "prometheus", "traces": "none"},
        "runtime": {"torch_threads": 1, "status_interval": 1.0, "drain_timeout": 20},
    }
    config.update(sections)
    return config


def checkpoint_model(weights: Path | str, *, arch: str = "maskrcnn_small", **fields: Any) -> dict:  # type: ignore[type-arg]
    """The ``model:`` section of a checkpoint (or a catalogue name): ``arch`` with
    ``weights`` in batches of two; ``fields`` add or replace keys."""
    return {"arch": arch, "weights": str(weights), "batch_size": 2, **fields}


def write_pipeline(folder: Path, tree: Mapping[str, Any]) -> Path:
    """``tree`` written to ``folder/pipeline.yaml`` (as JSON, which is YAML); its path."""
    path = folder / "pipeline.yaml"
    path.write_text(json.dumps(tree, indent=1), encoding="utf-8")
    return path


def _default_signals() -> None:
    """In the child before it runs: SIGINT and SIGTERM as a shell leaves them
    (default, unblocked), whatever this test process did with them. A shell
    started with a signal ignored can never trap it (demo.sh traps both)."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})


def scene_pipeline(
    folder: Path,
    redis_url: str,
    weights: Path,
    *,
    url: str,
    arch: str = "maskrcnn_small",
    model_process: bool = True,
) -> Any:
    """A loaded ``PipelineConfig`` for pipeline tests: camera ``scene`` at ``url``,
    ``weights`` of ``arch`` in full batches of two frames, one torch thread, no
    tracking; written to ``folder/pipeline.yaml`` first."""
    from streamseg.config import load_pipeline

    tree = service_pipeline(
        [{"id": "scene", "url": url}],
        {"url": redis_url},
        runtime={"torch_threads": 1, "model_process": model_process},
        model=checkpoint_model(weights, arch=arch, max_wait_ms=1000),  # full batches of two
        tracking={"enabled": False},
    )
    return load_pipeline(write_pipeline(folder, tree))


class ServeProcess:
    """One ``streamseg serve`` subprocess.

    Args:
        config: the pipeline as a dict (written as JSON, which is YAML);
            ``http`` is set to a free loopback port unless given.
        workdir: where pipeline.yaml is written.
        env: extra environment variables (``${ENV}`` values of the config).
        path: serve this existing pipeline.yaml instead of writing one.
        http_port: the port its ``http`` section uses (default: a free one).
        args: extra ``serve`` arguments.
        status: leave the status display on (no ``--no-status``).
        terminal: ``(rows, columns)``: run on a new pseudo-terminal of that
            size (stdin, stdout and stderr), as in an interactive shell;
            ``output`` then holds every byte it wrote, escape codes included.
        command: run this instead of ``python -m streamseg serve PATH``
            (``scripts/demo.sh PATH``, serve as process 1 of a PID
            namespace); it must serve ``path`` on ``http_port``.
    """

    def __init__(
        self,
        config: Mapping[str, Any] | None,
        workdir: Path,
        *,
        env: Mapping[str, str] | None = None,
        path: Path | None = None,
        http_port: int | None = None,
        args: tuple[str, ...] = ("--log-level", "INFO"),
        status: bool = False,
        terminal: tuple[int, int] | None = None,
        command: list[str] | None = None,
    ) -> None:
        self.http_port = http_port or free_port()
        if path is None:
            assert config is not None
            cfg = dict(config)
            cfg.setdefault("http", {"host": "127.0.0.1", "port": self.http_port})
            self.http_port = int(cfg["http"]["port"])
            path = workdir / "pipeline.yaml"
            path.write_text(json.dumps(cfg, indent=2))
        self.path = path
        self.env = {**cli_env(), "OMP_NUM_THREADS": "1", **(env or {})}
        self.args = args
        self.status = status
        self.terminal = terminal
        self.command = command
        self.proc: subprocess.Popen[str] | None = None
        self.lines: list[str] = []
        self._raw: list[str] = []
        self._lock = threading.Lock()

    # -- process -----------------------------------------------------------
    def start(self) -> ServeProcess:
        cmd = [sys.executable, "-m", "streamseg", "serve", str(self.path)]
        if not self.status:
            cmd.append("--no-status")
        if self.terminal is not None:
            return self._start_on_terminal([*cmd, *self.args], *self.terminal)
        self.proc = subprocess.Popen(
            self.command or [*cmd, *self.args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=self.env,
            cwd=REPO,
            start_new_session=True,
            preexec_fn=_default_signals,
        )
        threading.Thread(target=self._pump, daemon=True).start()
        return self

    def _start_on_terminal(self, cmd: list[str], rows: int, columns: int) -> ServeProcess:
        import fcntl
        import pty
        import struct
        import termios

        main_fd, child_fd = pty.openpty()
        fcntl.ioctl(child_fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        env = {k: v for k, v in self.env.items() if k not in ("COLUMNS", "LINES")}
        self.proc = subprocess.Popen(
            cmd,
            stdin=child_fd,
            stdout=child_fd,
            stderr=child_fd,
            text=True,
            env=env,
            cwd=REPO,
            start_new_session=True,
        )
        os.close(child_fd)
        threading.Thread(target=self._pump_terminal, args=(main_fd,), daemon=True).start()
        return self

    def _pump(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._lock:
                self.lines.append(line.rstrip("\n"))

    def _pump_terminal(self, fd: int) -> None:
        pending = ""
        try:
            while True:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:  # EIO: every process on the terminal is gone
                    break
                if not chunk:
                    break
                text = chunk.decode("utf-8", errors="replace")
                with self._lock:
                    self._raw.append(text)
                    pending += text.replace("\r\n", "\n")
                    *done, pending = pending.split("\n")
                    self.lines.extend(done)
        finally:
            os.close(fd)

    @property
    def output(self) -> str:
        """Everything written to the terminal (``terminal`` runs only)."""
        with self._lock:
            return "".join(self._raw)

    @property
    def log(self) -> str:
        with self._lock:
            return "\n".join(self.lines)

    def tail(self, n: int = 40) -> str:
        with self._lock:
            return "\n".join(self.lines[-n:])

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def terminate(self, timeout: float = 30.0) -> int:
        """SIGTERM, then wait for the exit code (SIGKILL and fail after ``timeout``)."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.wait(timeout)

    def wait(self, timeout: float) -> int:
        assert self.proc is not None
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"serve did not exit within {timeout}s:\n{self.tail()}") from None

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    # -- HTTP --------------------------------------------------------------
    def get(self, path: str) -> tuple[int, str]:
        """``(status, body)`` of ``GET http://127.0.0.1:PORT/path``; ``(0, "")`` if refused."""
        url = f"http://127.0.0.1:{self.http_port}{path}"
        try:
            with urllib.request.urlopen(url, timeout=5) as resp:
                return int(resp.status), resp.read().decode()
        except urllib.error.HTTPError as exc:
            return int(exc.code), exc.read().decode()
        except OSError:
            return 0, ""

    def readyz(self) -> dict[str, Any]:
        code, body = self.get("/readyz")
        if code == 0:
            return {}
        out: dict[str, Any] = json.loads(body)
        out["http_status"] = code
        return out

    def camera(self, camera_id: str) -> dict[str, Any]:
        cams: dict[str, Any] = self.readyz().get("cameras", {})
        return dict(cams.get(camera_id, {}))

    # -- waiting -----------------------------------------------------------
    def wait_for(self, predicate: Callable[[], Any], timeout: float, what: str) -> Any:
        """Poll until ``predicate()`` is truthy (returns it); fail with the log if not."""
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if not self.running:
                raise AssertionError(f"serve exited while waiting for {what}:\n{self.tail()}")
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"timed out after {timeout}s waiting for {what}; /readyz: "
                    f"{self.readyz()}\n{self.tail()}"
                )
            time.sleep(0.1)

    def __enter__(self) -> ServeProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.kill()


def summary(log: str, camera: str) -> dict[str, int]:
    """The frame counters of ``serve``'s exit summary line for ``camera``
    (``read``, ``skipped``, ``segmented``, ``published``, ``lost``)."""
    from streamseg.telemetry.counters import FRAME_COUNTERS

    words = ", ".join(rf"(\d+) {word}" for word in FRAME_COUNTERS)
    m = re.search(rf"summary\[{re.escape(camera)}\]: frames {words}", log)
    assert m is not None, f"no summary line for {camera}:\n{log[-3000:]}"
    return dict(zip(FRAME_COUNTERS, map(int, m.groups()), strict=True))


def metric(text: str, name: str, **labels: str) -> float | None:
    """The value of the Prometheus sample ``name`` whose labels include ``labels``."""
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return float(s.value)
    return None


def metric_sum(text: str, name: str, **labels: str) -> float:
    """The sum of every Prometheus sample ``name`` whose labels include ``labels``."""
    from prometheus_client.parser import text_string_to_metric_families

    return sum(
        float(s.value)
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    )


def detections(client: Any, camera: str, prefix: str = "streamseg") -> list[dict[str, Any]]:
    """Every detections message of ``camera`` in Redis, oldest first."""
    entries = client.xrange(f"{prefix}:detections:{camera}")
    return [json.loads(fields[b"data"]) for _id, fields in entries]
