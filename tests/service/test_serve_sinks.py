"""Two sinks at once: ``redis:`` plus a ``sinks:`` Redis, one of which goes away and comes back.

Both are real redis-servers; the second keeps its data across the restart
(append-only file), so whatever it acknowledged before the outage is still
there. Every frame the service published must be on both, and the sink
that stayed up must not have waited for the other.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.serve import ServeProcess, detections, metric, service_pipeline, summary
from tests.support.servers import RedisServer

pytestmark = pytest.mark.slow

CAMERAS = [{"id": "cam", "url": "synthetic://?seed=5&width=160&height=120&fps=10&objects=3"}]
STREAM = "streamseg:detections:cam"


def test_two_sinks_one_restarts_nothing_lost(
    serve: Callable[..., ServeProcess], redis_server: RedisServer, tmp_path: Path
) -> None:
    (tmp_path / "backup").mkdir()
    backup = RedisServer(tmp_path / "backup", persist=True)
    backup.start()
    try:
        sinks = [
            {
                "type": "redis",
                "name": "backup",
                "url": backup.url,
                "reconnect_initial": 0.1,
                "reconnect_max": 0.5,
                "maxlen": 100_000,
            }
        ]
        proc = serve(service_pipeline(CAMERAS, {"url": redis_server.url}, sinks=sinks))
        main, second = redis_server.client(), backup.client()
        proc.wait_for(lambda: second.xlen(STREAM) >= 5, 90, "first messages on both sinks")
        ready = proc.readyz()
        assert ready["ready"] is True
        assert set(ready["sinks"]) == {"redis", "backup"}
        assert ready["sinks"]["backup"]["type"] == "redis"

        backup.stop()
        proc.wait_for(
            lambda: proc.readyz()["sinks"]["backup"]["connected"] is False, 15, "backup down"
        )
        assert proc.readyz()["http_status"] == 503  # not ready while a sink is away
        before = main.xlen(STREAM)
        proc.wait_for(lambda: main.xlen(STREAM) >= before + 10, 30, "redis carries on alone")
        assert proc.readyz()["sinks"]["backup"]["buffered"] > 0
        assert proc.readyz()["sinks"]["redis"]["connected"] is True

        backup.start()
        second = backup.client()
        proc.wait_for(lambda: proc.readyz().get("ready"), 30, "ready again")
        code, text = proc.get("/metrics")
        assert code == 200
        assert metric(text, "streamseg_publish_reconnects_total", sink="backup", outcome="ok") == 1
        assert metric(text, "streamseg_publish_errors_total", sink="redis") is None
        assert metric(text, "streamseg_publish_connected", sink="backup") == 1
        assert proc.terminate() == 0, proc.tail()
        seq_main = [m["seq"] for m in detections(main, "cam")]
        seq_second = [m["seq"] for m in detections(second, "cam")]
    finally:
        backup.stop()
    published = summary(proc.log, "cam")["published"]
    assert published >= 15  # the waits above saw 5, then 10 more
    # The sink that stayed up got every published frame once, in order.
    assert len(seq_main) == published and seq_main == sorted(set(seq_main))
    # The other got the same frames (at least once: a round trip cut by the
    # outage may have been written and then sent again), in order of first arrival.
    assert set(seq_second) == set(seq_main)
    firsts = list(dict.fromkeys(seq_second))
    assert firsts == seq_main
    assert "backup: unavailable" in proc.log and "backup: reconnected" in proc.log
