"""``serve`` publishes to a TLS-only redis-server: verified, with a password, with client certs.

The server is a real redis-server listening for TLS only, with certificates
made by openssl for the test. A server certificate from another CA is
refused: the service keeps running, says why, and publishes nothing there.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.serve import ServeProcess, service_pipeline
from tests.support.servers import RedisServer, make_tls_files

pytestmark = pytest.mark.slow

REDIS_PW = "tlsPW-93ae1"
CAMERAS = [{"id": "synth", "url": "synthetic://?seed=3&width=160&height=120&fps=10"}]


def _redis_section(server: RedisServer, ca: Path, **tls: object) -> dict[str, object]:
    return {
        "url": f"rediss://127.0.0.1:{server.port}/0",
        "password": "${REDIS_PASSWORD}",
        "tls": {"ca_file": str(ca), **tls},
    }


@pytest.mark.parametrize("client_certs", [False, True], ids=["server-auth", "mutual"])
def test_publishes_over_verified_tls(
    serve: Callable[..., ServeProcess], tmp_path: Path, client_certs: bool
) -> None:
    files = make_tls_files(tmp_path / "pki")
    redis = RedisServer(tmp_path, password=REDIS_PW, tls=files, client_certs=client_certs)
    redis.start()
    try:
        extra = (
            {"cert_file": str(files.client_cert), "key_file": str(files.client_key)}
            if client_certs
            else {}
        )
        config = service_pipeline(CAMERAS, _redis_section(redis, files.ca, **extra))
        proc = serve(config, env={"REDIS_PASSWORD": REDIS_PW})
        client = redis.client()
        proc.wait_for(lambda: client.xlen("streamseg:detections:synth") >= 3, 90, "TLS publish")
        assert proc.readyz()["sinks"]["redis"]["connected"] is True
        assert proc.terminate() == 0, proc.tail()
    finally:
        redis.stop()
    assert REDIS_PW not in proc.log


def test_a_server_certificate_of_another_ca_is_refused(
    serve: Callable[..., ServeProcess], tmp_path: Path
) -> None:
    files = make_tls_files(tmp_path / "pki")
    stranger = make_tls_files(tmp_path / "other", name="other-ca")
    redis = RedisServer(tmp_path, password=REDIS_PW, tls=files)
    redis.start()
    try:
        config = service_pipeline(CAMERAS, _redis_section(redis, stranger.ca))
        proc = serve(config, env={"REDIS_PASSWORD": REDIS_PW})
        proc.wait_for(
            lambda: proc.readyz()["sinks"].get("redis", {}).get("buffered", 0) > 0, 90, "buffer"
        )
        ready = proc.readyz()
        assert ready["sinks"]["redis"]["connected"] is False
        assert ready["cameras"]["synth"]["state"] == "streaming"  # cameras carry on
        assert redis.client().xlen("streamseg:detections:synth") == 0
        assert proc.terminate() == 0, proc.tail()
    finally:
        redis.stop()
    assert "certificate verify failed" in proc.log.lower(), proc.tail()
    assert REDIS_PW not in proc.log
