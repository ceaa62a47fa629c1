"""``python -m tests.support.faults serve PATH ...``: a real ``serve`` with faults injected.

``STREAMSEG_TEST_FAULTS`` (JSON) names what fails, so that a service test
can make a change fail where validation cannot see it coming:

* ``"open"``: a camera whose URL contains this text fails to open its source
  (``SourceError``), as a camera that vanished after it was checked;
* ``"start"``: a camera whose URL contains this text opens, but the pipeline
  refuses to start it, once (as a source still stopping);
* ``"rule"``: the alert rule of this name raises on every frame.

Everything else is ``python -m streamseg``.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any


def install(faults: dict[str, str]) -> None:
    import streamseg.runtime.service as service
    from streamseg.ingest.spec import SourceError
    from streamseg.runtime.pipeline import Pipeline
    from streamseg.track.rules.zones import ZoneRule

    urls: dict[int, str] = {}
    real_open, real_add, real_update = service.open_camera, Pipeline.add_source, ZoneRule.update
    refused: set[str] = set()

    def open_camera(cam: Any, **kw: Any) -> Any:
        if faults.get("open") and faults["open"] in cam.url:
            raise SourceError(f"camera {cam.id!r}: injected fault: the source did not open")
        source = real_open(cam, **kw)
        urls[id(source)] = cam.url
        return source

    def add_source(self: Pipeline, camera_id: str, source: Any) -> None:
        url = urls.get(id(source), "")
        mark = faults.get("start")
        if mark and mark in url and url not in refused:
            refused.add(url)
            raise ValueError(f"injected fault: camera {camera_id!r} could not be started")
        real_add(self, camera_id, source)

    def update(self: ZoneRule, view: Any) -> Any:
        if self.name == faults.get("rule"):
            raise RuntimeError("injected fault in the rule")
        return real_update(self, view)

    service.open_camera = open_camera  # type: ignore[assignment]
    Pipeline.add_source = add_source  # type: ignore[method-assign]
    ZoneRule.update = update  # type: ignore[method-assign]


if __name__ == "__main__":
    install(json.loads(os.environ.get("STREAMSEG_TEST_FAULTS", "{}")))
    from streamseg.cli import main

    sys.exit(main(sys.argv[1:]))
