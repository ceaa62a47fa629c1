"""The pipelines shipped for docker compose and Kubernetes are valid configs."""

from __future__ import annotations

from pathlib import Path

import pytest
from ruamel.yaml import YAML

from streamseg.config import ConfigError, load_pipeline
from streamseg.config.shard import parse_shard, select_shard

REPO = Path(__file__).resolve().parents[2]
ENV = {"CAM_USER": "u", "CAM_PASSWORD": "p", "REDIS_PASSWORD": "r"}


def test_compose_pipeline_is_valid(tmp_path: Path) -> None:
    # The compose file mounts ../models at /models; point there from a copy.
    text = (REPO / "deploy" / "pipeline.yaml").read_text()
    assert "weights: /models/demo_small.pth" in text
    path = tmp_path / "pipeline.yaml"
    path.write_text(text.replace("/models/demo_small.pth", str(REPO / "models/demo_small.pth")))
    config = load_pipeline(path, environ=ENV)
    assert config.model.missing_weights == "error"
    assert config.redis.url == "redis://redis:6379/0"
    assert config.telemetry.otlp_endpoint == "http://otel-collector:4318"
    assert config.model.device == "cuda"


def test_k8s_pipeline_valid_but_for_the_checkpoint(tmp_path: Path) -> None:
    docs = list(YAML(typ="safe").load_all((REPO / "deploy/k8s/configmap.yaml").read_text()))
    path = tmp_path / "pipeline.yaml"
    path.write_text(docs[0]["data"]["pipeline.yaml"])
    with pytest.raises(ConfigError) as info:
        load_pipeline(path, environ=ENV)
    # The checkpoint lives on the cluster's volume; everything else must be valid.
    assert [i.path for i in info.value.issues] == ["model.weights"]


def test_k8s_shards_cover_every_camera(tmp_path: Path) -> None:
    docs = list(YAML(typ="safe").load_all((REPO / "deploy/k8s/configmap.yaml").read_text()))
    text = docs[0]["data"]["pipeline.yaml"].replace("weights: /models/maskrcnn_r50_fpn.pth", "")
    path = tmp_path / "pipeline.yaml"
    path.write_text(text)
    cameras = load_pipeline(path, environ=ENV).cameras
    served = [
        c.id
        for pod in ("streamseg-0/2", "streamseg-1/2")
        for c in select_shard(cameras, *parse_shard(pod))
    ]
    assert sorted(served) == sorted(c.id for c in cameras)
