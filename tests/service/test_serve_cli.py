"""``streamseg serve`` refuses what it cannot run with exit code 2 and one clear message."""

from __future__ import annotations

import socket
from pathlib import Path

from tests.support.servers import RedisServer


def test_bad_pipeline_exits_2_naming_the_line(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "bad.yaml"
    path.write_text("cameras:\n  - id: a\n    url: synthetic://?seed=1\n    fps: 3\n")
    proc = cli("serve", str(path))
    assert proc.returncode == 2
    assert f"{path}:4: cameras[0].fps:" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_http_port_in_use_exits_2(cli, tmp_path: Path, redis_server: RedisServer) -> None:  # type: ignore[no-untyped-def]
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        path = tmp_path / "p.yaml"
        path.write_text(
            "cameras:\n  - id: a\n    url: synthetic://?seed=1&width=64&height=48\n"
            f"redis:\n  url: {redis_server.url}\nhttp:\n  port: {port}\n"
        )
        proc = cli("serve", str(path), timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert f"http: port {port} is in use" in proc.stderr
    assert "Traceback" not in proc.stderr
