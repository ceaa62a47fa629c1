"""What the console tests share: their pipeline.yaml and JSON calls over real HTTP."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from tests.support.serve import service_pipeline

__all__ = ["TOKEN", "call", "console_pipeline", "fields"]

TOKEN = "console-test-token-4f1c"


def console_pipeline(tmp_path: Path, redis_url: str, port: int) -> Path:
    """pipeline.yaml with a comment, two synthetic cameras, the token from the environment."""
    cams = [
        {"id": "a", "url": "synthetic://?seed=1&width=160&height=120&fps=8&objects=3"},
        {"id": "b", "url": "synthetic://?seed=2&width=160&height=120&fps=8&objects=3"},
    ]
    # Random weights score about 0.2: low tracking thresholds make tracks of them.
    tracking = {"high_score": 0.05, "low_score": 0.01, "new_track_score": 0.05, "confirm_hits": 2}
    cfg = service_pipeline(cams, {"url": redis_url}, tracking=tracking)
    cfg["http"] = {
        "host": "127.0.0.1",
        "port": port,
        "token": "${CONSOLE_TOKEN}",
        "health_interval": 0.5,
    }
    cfg["alerts"] = {
        "cameras": {"b": {"zones": {"left": {"polygon": [[0, 0], [80, 0], [80, 120], [0, 120]]}}}}
    }
    path = tmp_path / "pipeline.yaml"
    text = yaml.safe_dump(cfg, sort_keys=False)
    path.write_text("# the console test's pipeline: this comment must survive changes\n" + text)
    return path


def call(
    port: int,
    method: str,
    path: str,
    body: Any = None,
    *,
    token: str | None = None,
    raw: bytes | None = None,
) -> tuple[int, Any]:
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method)
    req.add_header("Content-Type", "application/json")
    if token is not None:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            payload = resp.read()
            status = resp.status
            ctype = resp.headers.get("Content-Type", "")
    except urllib.error.HTTPError as exc:
        payload, status, ctype = exc.read(), exc.code, exc.headers.get("Content-Type", "")
    if "json" in ctype:
        return status, json.loads(payload)
    return status, payload


def fields(reply: Any) -> list[str]:
    return [i["field"] for i in reply.get("issues", [])]
