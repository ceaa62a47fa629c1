"""``streamseg serve`` with ``model.task: panoptic``, end to end.

A synthetic camera with stuff (ground, road, water under moving shapes) runs
through ``models/panoptic_tiny.pth`` (mask2former_tiny trained for panoptic
segmentation by ``scripts/train_panoptic.sh``) into a real redis-server. A
subscriber (``streamseg.client``) sees regions and tracked things in every
message; a ``region`` and a ``coverage`` rule fire; ``streamseg replay`` on
the recorded messages gives the same events.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import jsonschema
import pytest

from streamseg.cli import main
from streamseg.client import Client
from streamseg.schemas import load_schema
from tests.support.serve import REPO, ServeProcess, service_pipeline
from tests.support.servers import RedisServer

pytestmark = pytest.mark.slow

CHECKPOINT = REPO / "models" / "panoptic_tiny.pth"
STUFF = ("ground", "road", "water")

RULES = {
    "coordinates": "normalized",
    "zones": {"all": {"polygon": [[0, 0], [1, 0], [1, 1], [0, 1]]}},
    "rules": [
        # Any shape with ground around it (the ground is most of the frame).
        {
            "name": "on-ground",
            "type": "region",
            "region": "ground",
            "min_fraction": 0.3,
            "events": ["on_region"],
        },
        {"name": "has-road", "type": "coverage", "zone": "all", "region": "road", "above": 0.01},
    ],
}


def _events(stdout: str) -> list[tuple[int, str, str, int | None]]:
    rows = [json.loads(line) for line in stdout.splitlines() if line.strip()]
    return [(e["frame_seq"], e["rule"], e["kind"], e["track_id"]) for e in rows]


def test_panoptic_camera_regions_things_and_region_rules(
    serve: Callable[..., ServeProcess],
    redis_server: RedisServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    cams = [
        {
            "id": "yard",
            "url": "synthetic://?seed=3001&width=256&height=192&fps=10&objects=3&stuff=1",
        }
    ]
    config = service_pipeline(cams, {"url": redis_server.url})
    config["model"] = {
        "arch": "mask2former_tiny",
        "weights": str(CHECKPOINT),
        "task": "panoptic",
        "device": "cpu",
        "batch_size": 2,
        "max_wait_ms": 20,
    }
    config["alerts"] = {"cameras": {"yard": RULES}}
    proc = serve(config)
    client = redis_server.client()
    kinds = lambda: {json.loads(f[b"data"])["kind"] for _, f in client.xrange("streamseg:alerts")}  # noqa: E731
    proc.wait_for(
        lambda: (
            {"on_region", "coverage"} <= kinds() and client.xlen("streamseg:detections:yard") >= 8
        ),
        240,
        "an on_region and a coverage alert, and 8 frames",
    )
    assert proc.terminate(timeout=40) == 0, proc.tail()
    assert "Traceback" not in proc.log

    # A subscriber sees both: the stuff as regions, the shapes as tracked instances.
    validator = jsonschema.Draft202012Validator(load_schema("detections"))
    frames = list(
        Client(redis_server.url).detections(cameras=["yard"], start="begin", idle_timeout=1)
    )
    assert len(frames) >= 8
    for entry in client.xrange("streamseg:detections:yard"):
        validator.validate(json.loads(entry[1][b"data"]))
    for frame in frames:
        assert frame.regions, frame.seq
        assert {r.label_name for r in frame.regions} <= set(STUFF)
        assert sum(r.area for r in frame.regions) <= 192 * 256
        assert all(i.label_name not in STUFF for i in frame.instances)
    assert "ground" in {r.label_name for f in frames for r in f.regions}
    tracked = [i for f in frames for i in f.instances if i.track_id is not None]
    assert tracked, "no tracked thing in any frame"

    # The rules replay from the recorded messages with the events they gave live.
    live = [json.loads(f[b"data"]) for _, f in client.xrange("streamseg:alerts")]
    live_events = sorted((e["frame_seq"], e["rule"], e["kind"], e["track_id"]) for e in live)
    capsys.readouterr()
    code = main(["replay", str(proc.path), "--redis", redis_server.url, "--recorded-ids"])
    out, err = capsys.readouterr()
    assert code == 0, err
    replayed = sorted(_events(out))
    assert {k for _, _, k, _ in replayed} >= {"on_region", "coverage"}
    assert replayed == live_events
