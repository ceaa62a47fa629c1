"""``serve`` publishes to a TLS-only redis-server: verified, with a password, with client certs.

The server is a real redis-server listening for TLS only, with certificates
made by openssl for the test. A server certificate from another CA is
refused: the service keeps running, says why, and publishes nothing there.
Hot swap goes over the same TLS connection settings (private CA, mutual
TLS), and with ``model.swap_token`` set only requests carrying it are obeyed.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from streamseg.runtime.hotswap import request_swap, wait_for_status
from tests.conftest import run_cli
from tests.support.serve import REPO, ServeProcess, metric, service_pipeline
from tests.support.servers import RedisServer, make_tls_files

pytestmark = pytest.mark.slow

REDIS_PW = "tlsPW-93ae1"
SWAP_TOKEN = "swapTok-51c7e"
DEMO = REPO / "models" / "demo_small.pth"
CAMERAS = [{"id": "synth", "url": "synthetic://?seed=3&width=160&height=120&fps=10"}]


def _redis_section(server: RedisServer, ca: Path, **tls: object) -> dict[str, object]:
    return {
        "url": f"rediss://127.0.0.1:{server.port}/0",
        "password": "${REDIS_PASSWORD}",
        "tls": {"ca_file": str(ca), **tls},
    }


@pytest.mark.parametrize("client_certs", [False, True], ids=["server-auth", "mutual"])
def test_publishes_and_swaps_over_verified_tls(
    serve: Callable[..., ServeProcess],
    tmp_path: Path,
    client_certs: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    files = make_tls_files(tmp_path / "pki")
    redis = RedisServer(tmp_path, password=REDIS_PW, tls=files, client_certs=client_certs)
    redis.start()
    new_weights = shutil.copyfile(DEMO, tmp_path / "next.pth")
    try:
        extra = (
            {"cert_file": str(files.client_cert), "key_file": str(files.client_key)}
            if client_certs
            else {}
        )
        config = service_pipeline(CAMERAS, _redis_section(redis, files.ca, **extra))
        config["model"].update(weights=str(DEMO), swap_token="${SWAP_TOKEN}")
        proc = serve(config, env={"REDIS_PASSWORD": REDIS_PW, "SWAP_TOKEN": SWAP_TOKEN})
        client = redis.client()
        proc.wait_for(lambda: client.xlen("streamseg:detections:synth") >= 3, 90, "TLS publish")
        assert proc.readyz()["sinks"]["redis"]["connected"] is True

        # Without the token, or with another: refused, answered, counted.
        for token in (None, "not-the-token"):
            request_id = request_swap(client, "streamseg", str(new_weights), token=token)
            answer = wait_for_status(client, "streamseg", request_id, after="0-0", timeout_s=60)
            assert answer is not None, "the hot-swap listener did not answer over TLS"
            assert answer["ok"] is False and answer["error"].startswith("refused")
        # `swap --pipeline` connects like the service (CA, client certificate,
        # password) and sends the service's own token.
        monkeypatch.setenv("REDIS_PASSWORD", REDIS_PW)
        monkeypatch.setenv("SWAP_TOKEN", SWAP_TOKEN)
        swapped = run_cli("swap", "--pipeline", str(proc.path), str(new_weights), "--wait", "60")
        assert swapped.returncode == 0, swapped.stderr
        assert json.loads(swapped.stdout)["ok"] is True
        _code, text = proc.get("/metrics")
        assert metric(text, "streamseg_swap_refused_total", reason="missing_token") == 1
        assert metric(text, "streamseg_swap_refused_total", reason="wrong_token") == 1
        assert proc.terminate() == 0, proc.tail()
    finally:
        redis.stop()
    assert f"now serving {new_weights}" in proc.log
    assert "swap listener: Redis unavailable" not in proc.log
    assert "carries no token" in proc.log and "carries a wrong token" in proc.log
    for secret in (REDIS_PW, SWAP_TOKEN, "not-the-token"):
        assert secret not in proc.log


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
            lambda: proc.readyz().get("sinks", {}).get("redis", {}).get("buffered", 0) > 0,
            90,
            "buffer",
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
