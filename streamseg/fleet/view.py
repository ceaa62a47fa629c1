"""What one worker's console shows of the rest of the fleet: cameras, consoles, alerts.

A console lists every camera of the fleet, not only its own: the others
with their owner, state and epoch (from the leases and heartbeats), and the
address of the owner's console (each worker's heartbeat carries it,
``FleetWorker.advertise``), so that the console can fetch a camera's live
view from the worker that serves it. The fleet's alerts are read from the
Redis alert stream every worker publishes to (``P:alerts``); those of other
workers are what this console's own event log does not have.

Reads are cached (``cache_s``) so that a page polling twice a second costs
Redis one round trip per cache period, whatever the number of viewers.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

from streamseg.fleet.store import FleetStore
from streamseg.redact import redact_url
from streamseg.streams import alerts_stream

__all__ = ["FleetView"]


class FleetView:
    """The fleet as seen by worker ``name``.

    Args:
        store: the fleet's keys.
        name: this worker.
        held: ``{camera: epoch}`` of the cameras this worker holds now.
        prefix: ``redis.stream_prefix`` (the alert stream is ``PREFIX:alerts``).
        cache_s: seconds a read of the cameras is kept (the alerts: half that).
    """

    def __init__(
        self,
        *,
        store: FleetStore,
        name: str,
        held: Callable[[], dict[str, int]],
        prefix: str,
        cache_s: float = 1.0,
    ) -> None:
        self.store, self.name, self.held = store, name, held
        self.stream = alerts_stream(prefix)
        self.cache_s = cache_s
        self._lock = threading.Lock()
        self._cameras: tuple[float, dict[str, dict[str, Any]]] = (-1e9, {})
        self._consoles: dict[str, str] = {}
        self._alerts: tuple[float, list[dict[str, Any]]] = (-1e9, [])

    def cameras(self) -> dict[str, dict[str, Any]]:
        """The fleet's cameras served by other workers (or by none): ``{id: {id, url
        (redacted), owner, state, epoch, since, console}}`` (``console``: the owner's
        console address, ``None`` when it has none); ``{}`` while Redis is away."""
        import redis

        now = time.monotonic()
        with self._lock:
            if now - self._cameras[0] < self.cache_s:
                return self._cameras[1]
        try:
            workers = self.store.workers()
            cameras = self.store.cameras()
            rows = self.store.snapshot()["cameras"]
        except redis.RedisError:
            return {}
        consoles = {n: w.console for n, w in workers.items() if w.console}
        held = self.held()
        out = {
            cid: {
                "id": cid,
                "url": redact_url(cam.url),
                **rows.get(cid, {}),
                "console": consoles.get(rows.get(cid, {}).get("owner") or ""),
            }
            for cid, cam in cameras.items()
            if cid not in held
        }
        with self._lock:
            self._cameras, self._consoles = (now, out), consoles
        return out

    def console_of(self, camera_id: str) -> str | None:
        """The console address of the worker that serves ``camera_id``, when another
        worker does (``None``: served here, by nobody, or its owner has no console)."""
        row = self.cameras().get(camera_id)
        return None if row is None else row.get("console")

    def worker_console(self, worker: str) -> str | None:
        """The console address worker ``worker`` announced (``None``: none, or gone)."""
        self.cameras()  # refreshes the addresses at most once per cache period
        with self._lock:
            return self._consoles.get(worker) if worker != self.name else None

    def alerts(self, count: int = 500) -> list[dict[str, Any]]:
        """The last ``count`` alerts published by *other* workers, newest first, as
        published (``schemas/alert.schema.json`` with ``worker`` and ``epoch``);
        ``[]`` while Redis is away."""
        import redis

        now = time.monotonic()
        with self._lock:
            if now - self._alerts[0] < self.cache_s / 2:
                return self._alerts[1]
        try:
            entries = self.store.client.xrevrange(self.stream, count=count)
        except redis.RedisError:
            return []
        out = []
        for _id, fields in entries or []:
            raw = (fields or {}).get(b"data")
            try:
                msg = json.loads(raw) if raw is not None else None
            except ValueError:
                continue
            if isinstance(msg, dict) and msg.get("worker") not in (None, self.name):
                out.append(msg)
        with self._lock:
            self._alerts = (now, out)
        return out
