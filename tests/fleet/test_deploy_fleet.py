"""The Kubernetes fleet (deploy/k8s/fleet): a valid pipeline with a fleet: section, a
Deployment whose pods are named by the fleet, an HPA aimed at it."""

from __future__ import annotations

from pathlib import Path

import pytest
from ruamel.yaml import YAML

from streamseg.config import ConfigError, load_pipeline

REPO = Path(__file__).resolve().parents[2]
FLEET = REPO / "deploy/k8s/fleet"
ENV = {"CAM_USER": "u", "CAM_PASSWORD": "p", "REDIS_PASSWORD": "r", "POD_NAME": "pod-abc12",
       "POD_IP": "10.1.2.3"}  # fmt: skip


def _docs(name: str) -> list[dict]:  # type: ignore[type-arg]
    return list(YAML(typ="safe").load_all((FLEET / name).read_text()))


def test_fleet_pipeline_is_valid_but_for_the_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "pipeline.yaml"
    path.write_text(_docs("configmap.yaml")[0]["data"]["pipeline.yaml"])
    with pytest.raises(ConfigError) as info:
        load_pipeline(path, environ=ENV)
    assert [i.path for i in info.value.issues] == ["model.weights"]
    text = path.read_text().replace("weights: /models/maskrcnn_r50_fpn.pth", "")
    path.write_text(text)
    config = load_pipeline(path, environ=ENV)
    assert config.fleet is not None and config.fleet.worker_name == "pod-abc12"
    assert config.fleet.console_url == "http://10.1.2.3:8080"


def test_deployment_has_no_shard_and_the_hpa_scales_it() -> None:
    deployment, service = _docs("deployment.yaml")
    assert deployment["kind"] == "Deployment" and service["kind"] == "Service"
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"] for e in container["env"]}
    assert "POD_NAME" in env and "POD_IP" in env and "STREAMSEG_SHARD" not in env
    (hpa,) = _docs("hpa.yaml")
    assert hpa["spec"]["scaleTargetRef"]["name"] == deployment["metadata"]["name"]
    (kustomization,) = _docs("kustomization.yaml")
    assert sorted(kustomization["resources"]) == ["configmap.yaml", "deployment.yaml", "hpa.yaml"]
