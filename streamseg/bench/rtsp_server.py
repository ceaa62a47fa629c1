"""A real RTSP server: GStreamer's gst-rtsp-server in a subprocess.

``RtspServer`` runs ``rtsp_server_gst.py`` (beside this file) with Debian's
``/usr/bin/python3`` (GStreamer's Python bindings live there, not in the
venv) on 127.0.0.1 and a free port, serving a live H.264 (or VP9) test
pattern. The soak, the benchmarks and the tests use it. One can

* ``kill()`` it (SIGKILL, like a camera losing power) and ``start()`` it
  again on the same port, or ``restart()`` it;
* ``stall()`` it: every stream stops sending while its RTSP session and TCP
  connection stay open (a hung encoder), and ``resume()`` it;
* require Basic authentication (``user``/``password``).

``gstreamer_missing()`` says why it cannot run on this machine (and how to
install what is missing), or ``None``.
"""

from __future__ import annotations

import functools
import os
import queue
import signal
import subprocess
import threading
import time
from pathlib import Path

from streamseg.bench.ports import end_process, free_port, wait_for_port

__all__ = ["SERVER_SCRIPT", "RtspServer", "gstreamer_missing"]

SERVER_SCRIPT = Path(__file__).with_name("rtsp_server_gst.py")
SYSTEM_PYTHON = "/usr/bin/python3"
INSTALL_HINT = (
    "GStreamer's RTSP server is missing: run scripts/setup.sh --dev, or apt-get install "
    "gstreamer1.0-rtsp gir1.2-gst-rtsp-server-1.0 python3-gi gstreamer1.0-plugins-ugly "
    "gstreamer1.0-plugins-good gstreamer1.0-plugins-bad"
)


@functools.cache
def gstreamer_missing() -> str | None:
    """Why the server cannot run here, or ``None`` when it can."""
    if not os.path.exists(SYSTEM_PYTHON):
        return f"{SYSTEM_PYTHON} not found. {INSTALL_HINT}"
    probe = (
        "import gi; gi.require_version('Gst', '1.0'); gi.require_version('GstRtspServer', '1.0');"
        "from gi.repository import Gst, GstRtspServer; Gst.init(None);"
        "assert Gst.ElementFactory.find('x264enc') and Gst.ElementFactory.find('valve')"
    )
    done = subprocess.run([SYSTEM_PYTHON, "-c", probe], capture_output=True, text=True)
    return None if done.returncode == 0 else f"{done.stderr.strip()[-300:]}\n{INSTALL_HINT}"


class RtspServer:
    """One gst-rtsp-server process on a fixed free port (kept across restarts)."""

    def __init__(
        self,
        *,
        width: int = 160,
        height: int = 120,
        fps: int = 15,
        gop: int = 15,
        codec: str = "h264",
        path: str = "/stream",
        user: str | None = None,
        password: str | None = None,
        rtcp_interval: float = 0.5,
    ) -> None:
        self.width, self.height, self.fps, self.gop = width, height, fps, gop
        self.codec, self.path = codec, path
        self.user, self.password = user, password
        self.rtcp_interval = rtcp_interval
        self.port = free_port()
        self.proc: subprocess.Popen[str] | None = None
        self._lines: queue.Queue[str] = queue.Queue()

    @property
    def url(self) -> str:
        """``rtsp://[user:password@]127.0.0.1:PORT/stream``."""
        auth = f"{self.user}:{self.password}@" if self.user else ""
        return f"rtsp://{auth}127.0.0.1:{self.port}{self.path}"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout: float = 20.0) -> None:
        if self.running:
            return
        args = [SYSTEM_PYTHON, str(SERVER_SCRIPT), "--port", str(self.port), "--path", self.path]
        args += ["--width", str(self.width), "--height", str(self.height)]
        args += ["--fps", str(self.fps), "--gop", str(self.gop), "--codec", self.codec]
        args += ["--rtcp-interval", str(self.rtcp_interval)]
        if self.user:
            args += ["--user", self.user, "--password", self.password or ""]
        self._lines = queue.Queue()
        self.proc = subprocess.Popen(
            args,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        threading.Thread(target=self._pump, args=(self.proc, self._lines), daemon=True).start()
        self._expect("READY", timeout)
        wait_for_port(self.port, timeout)

    @staticmethod
    def _pump(proc: subprocess.Popen[str], lines: queue.Queue[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line.rstrip("\n"))

    def _expect(self, word: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        seen: list[str] = []
        while time.monotonic() < deadline:
            try:
                line = self._lines.get(timeout=0.1)
            except queue.Empty:
                if not self.running:
                    break
                continue
            if line.strip() == word:
                return
            seen.append(line)
        out = "\n".join(seen[-20:])
        raise RuntimeError(f"RTSP server did not say {word} within {timeout}s; output:\n{out}")

    def _signal(self, sig: int, word: str) -> None:
        if not self.running:
            raise RuntimeError("the RTSP server is not running")
        assert self.proc is not None
        self.proc.send_signal(sig)
        self._expect(word, 10.0)

    def stall(self) -> None:
        """Stop sending media on every session; connections stay open."""
        self._signal(signal.SIGUSR1, "STALLED")

    def resume(self) -> None:
        self._signal(signal.SIGUSR2, "RESUMED")

    def stop(self) -> None:
        """Terminate cleanly (sessions get closed)."""
        self._end(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL: the process vanishes, TCP connections are reset."""
        self._end(signal.SIGKILL)

    def restart(self) -> None:
        self.kill()
        self.start()

    def _end(self, sig: int) -> None:
        proc, self.proc = self.proc, None
        end_process(proc, sig)

    def __enter__(self) -> RtspServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
