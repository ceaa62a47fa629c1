"""``streamseg serve`` with Mask2Former: a synthetic camera into Redis, then a clean exit.

The tiny Mask2Former with random weights in the Hugging Face layout (a
``save_pretrained`` folder, as a hub download is), classes counted the
pipeline.yaml way (``num_classes`` with the background).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import jsonschema
import pytest
import torch

from streamseg.schemas import load_schema
from streamseg.synthetic.scene import SYNTHETIC_CLASS_NAMES as NAMES
from tests.support.serve import ServeProcess, detections, service_pipeline, summary
from tests.support.servers import RedisServer

pytestmark = pytest.mark.slow


def _hub_folder(path: Path) -> Path:
    from transformers.models.mask2former.modeling_mask2former import (
        Mask2FormerForUniversalSegmentation,
    )

    from streamseg.models.mask2former.config import hf_config

    torch.manual_seed(0)
    hf = Mask2FormerForUniversalSegmentation(hf_config("tiny", num_classes=len(NAMES) - 1))
    hf.save_pretrained(path)
    return path


def test_mask2former_camera_into_redis(
    serve: Callable[..., ServeProcess], redis_server: RedisServer, tmp_path: Path
) -> None:
    cams = [{"id": "cam", "url": "synthetic://?seed=3&width=160&height=120&fps=10&objects=3"}]
    config = service_pipeline(cams, {"url": redis_server.url})
    config["model"].update(
        arch="mask2former_tiny",
        weights=str(_hub_folder(tmp_path / "mask2former-tiny")),
        missing_weights="error",
        num_classes=len(NAMES),  # counts the background, as for Mask R-CNN
        class_names=list(NAMES),
        score_threshold=0.0,  # random weights: keep whatever the queries give
    )
    proc = serve(config)
    client = redis_server.client()
    proc.wait_for(lambda: len(detections(client, "cam")) >= 6, 120, "6 detections messages")
    r = proc.readyz()
    assert r["http_status"] == 200 and r["model"]["arch"] == "mask2former_tiny"
    assert r["model"]["loaded"] and r["model"]["state"] == "running"

    validator = jsonschema.Draft202012Validator(load_schema("detections"))
    messages = detections(client, "cam")
    for msg in messages:
        validator.validate(msg)
        assert msg["model"]["arch"] == "mask2former_tiny"
        assert msg["image"] == {"height": 120, "width": 160}
        assert 0 < len(msg["instances"]) <= config["model"]["detections_per_image"]
        for inst in msg["instances"]:
            assert inst["label_name"] == NAMES[inst["label"]] and inst["label"] >= 1
            assert inst["mask"] is not None and inst["mask"]["size"] == [120, 160]
            x1, y1, x2, y2 = inst["box"]
            assert 0 <= x1 <= x2 <= 160 and 0 <= y1 <= y2 <= 120

    assert proc.terminate(timeout=40) == 0, proc.tail()
    assert "Traceback" not in proc.log and "RANDOM weights" not in proc.log
    counts = summary(proc.log, "cam")
    assert counts["read"] == counts["published"] + counts["skipped"] + counts["lost"]
    assert client.xlen("streamseg:detections:cam") == counts["published"]
