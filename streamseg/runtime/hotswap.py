"""Hot swap: tell running services to load a new checkpoint, between batches.

Protocol (Redis Streams, ``<prefix>`` is the publisher's key prefix):

* ``<prefix>:control``: requests, one field ``data`` holding JSON
  ``{"schema_version": 1, "type": "swap", "id": str, "weights": path, "time": unix_s}``.
  Every service instance reads every request (plain ``XREAD``, no consumer
  group: a swap is a broadcast to all pods).
* ``<prefix>:control:status``: answers, ``{"schema_version": 1, "type":
  "swap_status", "id", "ok": bool, "weights", "error": str | None,
  "instance": str, "time": unix_s, "load_s": float}``.

Service side: :class:`SwapController` listens in a background thread (the
control stream, and/or a watched checkpoint file) and the runtime calls
:meth:`SwapController.apply_pending` with its segmenter between two batches:
no camera is dropped and no frame of a file source is lost, because the
pipeline only pauses. A checkpoint that fails to load leaves the old weights
in place (``Segmenter.load_weights`` guarantees it); the reason is logged and
published on the status stream.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import socket
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Protocol

from streamseg.ingest.url import redact_text, redact_url

__all__ = [
    "SWAP_SCHEMA_VERSION",
    "SwapController",
    "SwapOutcome",
    "SwapRequest",
    "control_key",
    "request_swap",
    "status_key",
    "wait_for_status",
]

log = logging.getLogger("streamseg.swap")
SWAP_SCHEMA_VERSION = 1


def control_key(prefix: str) -> str:
    return f"{prefix}:control"


def status_key(prefix: str) -> str:
    return f"{prefix}:control:status"


class WeightsTarget(Protocol):
    """What a swap applies to (``streamseg.segment.Segmenter``)."""

    def load_weights(self, path: str) -> None: ...


@dataclasses.dataclass(frozen=True)
class SwapRequest:
    """A request to load ``weights``; ``source`` is ``redis`` or ``file``."""

    id: str
    weights: str
    source: str = "redis"
    time: float = 0.0


@dataclasses.dataclass(frozen=True)
class SwapOutcome:
    """The result of one swap: ``ok``, the error when not, seconds it took."""

    request: SwapRequest
    ok: bool
    error: str | None
    load_s: float


def request_swap(client: Any, prefix: str, weights: str) -> str:
    """Publish a swap request; returns its id. ``client`` is a ``redis.Redis``."""
    request_id = uuid.uuid4().hex
    message = {
        "schema_version": SWAP_SCHEMA_VERSION,
        "type": "swap",
        "id": request_id,
        "weights": weights,
        "time": time.time(),
    }
    client.xadd(control_key(prefix), {"data": json.dumps(message)}, maxlen=1000, approximate=True)
    return request_id


def wait_for_status(
    client: Any, prefix: str, request_id: str, *, after: str, timeout_s: float
) -> dict[str, Any] | None:
    """The first status answer for ``request_id`` published after stream id ``after``."""
    deadline = time.monotonic() + timeout_s
    last = after
    while (left := deadline - time.monotonic()) > 0:
        reply = client.xread({status_key(prefix): last}, block=max(1, int(left * 1000)), count=100)
        for _key, entries in reply or []:
            for entry_id, fields in entries:
                last = entry_id
                message = json.loads(fields[b"data"] if b"data" in fields else fields["data"])
                if message.get("id") == request_id:
                    return dict(message)
    return None


class SwapController:
    """Collects swap requests in the background; applies them when asked.

    Args:
        redis_url: listen on ``<prefix>:control`` (``None``: no Redis).
        prefix: the Redis key prefix of the service.
        watch: a checkpoint path to watch; a change of its size or mtime that
            stays put for one ``poll_s`` triggers a swap to it.
        poll_s: file-watch period, and the Redis read timeout (seconds).
        instance: names this process in status messages (default host:pid).
    """

    def __init__(
        self,
        *,
        redis_url: str | None = None,
        prefix: str = "streamseg",
        watch: str | Path | None = None,
        poll_s: float = 1.0,
        instance: str | None = None,
    ) -> None:
        self.redis_url = redis_url
        self.prefix = prefix
        self.watch = Path(watch) if watch is not None else None
        self.poll_s = poll_s
        self.instance = instance or f"{socket.gethostname()}:{os.getpid()}"
        self.outcomes: list[SwapOutcome] = []
        self._pending: list[SwapRequest] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._client: Any = None
        self._ready = threading.Event()

    def start(self) -> SwapController:
        """Start listening (returns once the Redis position is taken)."""
        if self.redis_url is not None:
            import redis

            self._client = redis.Redis.from_url(self.redis_url, socket_timeout=self.poll_s + 5)
            self._spawn(self._listen_redis, "swap-redis")
        else:
            self._ready.set()
        if self.watch is not None:
            self._spawn(self._watch_file, "swap-watch")
        self._ready.wait(timeout=10)
        return self

    def _spawn(self, target: Any, name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _listen_redis(self) -> None:
        last = "$"
        key = control_key(self.prefix)
        while not self._stop.is_set():
            try:
                if last == "$":
                    # Take the position now, so requests sent after start() are seen.
                    info = self._client.xinfo_stream(key) if self._client.exists(key) else None
                    last = info["last-generated-id"] if info else "0-0"
                    self._ready.set()
                reply = self._client.xread({key: last}, block=int(self.poll_s * 1000), count=10)
            except Exception as exc:
                self._ready.set()
                log.warning(
                    "swap listener: Redis %s: %s; retrying",
                    redact_url(self.redis_url or ""),
                    redact_text(str(exc)),
                )
                self._stop.wait(self.poll_s)
                continue
            for _key, entries in reply or []:
                for entry_id, fields in entries:
                    last = entry_id
                    self._accept(fields)

    def _accept(self, fields: dict[Any, Any]) -> None:
        raw: Any = fields.get(b"data", fields.get("data"))
        try:
            message = json.loads(raw)
            if message.get("type") != "swap" or not isinstance(message.get("weights"), str):
                raise ValueError("not a swap request")
        except (TypeError, ValueError) as exc:
            log.warning("swap listener: ignoring a malformed control message (%s)", exc)
            return
        self.submit(
            SwapRequest(
                id=str(message.get("id", uuid.uuid4().hex)),
                weights=message["weights"],
                source="redis",
                time=float(message.get("time", time.time())),
            )
        )

    def _watch_file(self) -> None:
        assert self.watch is not None
        seen = _signature(self.watch)
        candidate = None
        while not self._stop.wait(self.poll_s):
            now = _signature(self.watch)
            if now == seen:
                candidate = None
            elif now is not None and now == candidate:  # changed, then stable for one poll
                seen, candidate = now, None
                self.submit(
                    SwapRequest(
                        id=uuid.uuid4().hex,
                        weights=str(self.watch),
                        source="file",
                        time=time.time(),
                    )
                )
            else:
                candidate = now

    def submit(self, request: SwapRequest) -> None:
        """Queue a request (also usable directly, e.g. from an HTTP handler)."""
        log.info("swap requested (%s): %s", request.source, request.weights)
        with self._lock:
            self._pending.append(request)

    def has_pending(self) -> bool:
        with self._lock:
            return bool(self._pending)

    def apply_pending(self, target: WeightsTarget) -> SwapOutcome | None:
        """Apply the newest pending request to ``target`` (call between batches).

        Older pending requests are superseded (answered ``ok: false`` with
        that reason). Returns the outcome, or ``None`` when nothing was asked.
        """
        with self._lock:
            pending, self._pending = self._pending, []
        if not pending:
            return None
        for old in pending[:-1]:
            self._publish(SwapOutcome(old, False, f"superseded by {pending[-1].weights}", 0.0))
        request = pending[-1]
        started = time.perf_counter()
        try:
            target.load_weights(request.weights)
            outcome = SwapOutcome(request, True, None, time.perf_counter() - started)
            log.info("hot swap: now serving %s (%.2fs)", request.weights, outcome.load_s)
        except Exception as exc:  # any failure keeps the old model serving
            error = f"{type(exc).__name__}: {exc}"
            outcome = SwapOutcome(request, False, error, time.perf_counter() - started)
            log.error(
                "hot swap to %s failed, the old model keeps running: %s", request.weights, error
            )
        self.outcomes.append(outcome)
        self._publish(outcome)
        return outcome

    def _publish(self, outcome: SwapOutcome) -> None:
        if self._client is None:
            return
        message = {
            "schema_version": SWAP_SCHEMA_VERSION,
            "type": "swap_status",
            "id": outcome.request.id,
            "ok": outcome.ok,
            "weights": outcome.request.weights,
            "error": outcome.error,
            "instance": self.instance,
            "source": outcome.request.source,
            "time": time.time(),
            "load_s": round(outcome.load_s, 4),
        }
        try:
            self._client.xadd(
                status_key(self.prefix),
                {"data": json.dumps(message)},
                maxlen=1000,
                approximate=True,
            )
        except Exception as exc:
            log.warning("could not publish the swap status: %s", redact_text(str(exc)))

    def close(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=self.poll_s + 5)
        if self._client is not None:
            self._client.close()


def _signature(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns)
