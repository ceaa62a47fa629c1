"""Hot swap: tell running services to load a new checkpoint, between batches.

Protocol (Redis Streams, ``<prefix>`` is the publisher's key prefix):

* ``<prefix>:control``: requests, one field ``data`` holding JSON
  ``{"schema_version": 1, "type": "swap", "id": str, "weights": path, "time": unix_s,
  "token": str}`` (``token`` only when the sender has one).
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

Authorisation: a controller given a ``token`` (``model.swap_token``) refuses
every Redis request whose ``token`` is missing or different: the request is
answered ``ok: false``, logged (never with the token) and counted
(``on_refused(reason)``, ``reason`` is ``missing_token`` or ``wrong_token``).
"""

from __future__ import annotations

import dataclasses
import hmac
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from streamseg.redact import redact_text
from streamseg.streams import control_status_stream, control_stream

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
    return control_stream(prefix)


def status_key(prefix: str) -> str:
    return control_status_stream(prefix)


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
    """The result of one swap: ``ok``, the error when not, seconds it took, when it ended."""

    request: SwapRequest
    ok: bool
    error: str | None
    load_s: float
    finished: float = dataclasses.field(default_factory=time.time)


def request_swap(client: Any, prefix: str, weights: str, token: str | None = None) -> str:
    """Publish a swap request; returns its id. ``client`` is a ``redis.Redis``;
    ``token``: the services' ``model.swap_token``, when they have one."""
    request_id = uuid.uuid4().hex
    message: dict[str, Any] = {
        "schema_version": SWAP_SCHEMA_VERSION,
        "type": "swap",
        "id": request_id,
        "weights": weights,
        "time": time.time(),
    }
    if token is not None:
        message["token"] = token
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
        client_factory: returns the Redis client to listen on
            ``<prefix>:control`` with (``streamseg.publish.connect.redis_client``
            of the ``redis:`` section); ``None``: no Redis.
        prefix: the Redis key prefix of the service.
        watch: a checkpoint path to watch; a change of its size or mtime that
            stays put for one ``poll_s`` triggers a swap to it.
        poll_s: file-watch period, and the Redis read timeout (seconds).
        instance: names this process in status messages (default host:pid).
        token: when set, Redis requests must carry it (see the module docstring).
        on_refused: called with the reason of each refused request (metrics).
    """

    def __init__(
        self,
        *,
        client_factory: Callable[[], Any] | None = None,
        prefix: str = "streamseg",
        watch: str | Path | None = None,
        poll_s: float = 1.0,
        instance: str | None = None,
        token: str | None = None,
        on_refused: Callable[[str], None] | None = None,
    ) -> None:
        self.client_factory = client_factory
        self.prefix = prefix
        self.watch = Path(watch) if watch is not None else None
        self.poll_s = poll_s
        self.instance = instance or f"{socket.gethostname()}:{os.getpid()}"
        self.outcomes: list[SwapOutcome] = []
        self.refused = 0
        self._token = token.encode() if token else None
        self._on_refused = on_refused
        self._pending: list[SwapRequest] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._client: Any = None
        self._ready = threading.Event()

    def start(self) -> SwapController:
        """Start listening (returns once the Redis position is taken, or Redis failed once)."""
        if self.client_factory is not None:
            self._client = self.client_factory()
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
        failures = 0
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
                failures += 1
                self._listen_failed(exc, failures)
                continue
            if failures:
                log.info("swap listener: Redis answers again; listening for swap requests")
                failures = 0
            for _key, entries in reply or []:
                for entry_id, fields in entries:
                    last = entry_id
                    self._accept(fields)

    def _listen_failed(self, exc: BaseException, failures: int) -> None:
        """Warn once per outage (then debug), and back off up to 30 s."""
        level = logging.WARNING if failures == 1 else logging.DEBUG
        log.log(
            level,
            "swap listener: Redis unavailable (%s); swap requests are not heard until it "
            "answers, retrying with backoff",
            redact_text(f"{type(exc).__name__}: {exc}"),
        )
        self._stop.wait(min(30.0, self.poll_s * 2 ** min(failures - 1, 5)))

    def _accept(self, fields: dict[Any, Any]) -> None:
        raw: Any = fields.get(b"data", fields.get("data"))
        try:
            message = json.loads(raw)
            if message.get("type") != "swap" or not isinstance(message.get("weights"), str):
                raise ValueError("not a swap request")
        except (TypeError, ValueError) as exc:
            log.warning("swap listener: ignoring a malformed control message (%s)", exc)
            return
        request = SwapRequest(
            id=str(message.get("id", uuid.uuid4().hex)),
            weights=message["weights"],
            source="redis",
            time=float(message.get("time", time.time())),
        )
        refusal = self._check_token(message.get("token"))
        if refusal is not None:
            self._refuse(request, refusal)
            return
        self.submit(request)

    def _check_token(self, token: object) -> str | None:
        """``None`` when the request may proceed, else why not."""
        if self._token is None:
            return None
        if not isinstance(token, str) or not token:
            return "missing_token"
        if not hmac.compare_digest(token.encode(), self._token):
            return "wrong_token"
        return None

    def _refuse(self, request: SwapRequest, reason: str) -> None:
        what = "carries no token" if reason == "missing_token" else "carries a wrong token"
        log.warning(
            "swap request %s for %s refused: it %s (model.swap_token is set)",
            request.id,
            request.weights,
            what,
        )
        with self._lock:
            self.refused += 1
        if self._on_refused is not None:
            self._on_refused(reason)
        error = f"refused: the request {what}; this service requires model.swap_token"
        self._publish(SwapOutcome(request, False, error, 0.0))

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

    def last(self) -> SwapOutcome | None:
        """The last swap applied (or failed), superseded requests aside; ``None`` before any."""
        return self.outcomes[-1] if self.outcomes else None

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
