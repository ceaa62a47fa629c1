"""One fleet worker: heartbeat, leases, placement, and the cameras it starts and stops.

Every ``tick_s`` (and at once when another worker announces a change on
the fleet's channel, or a key expires) the worker

1. renews its heartbeat and the lease of every camera it holds; a lease it
   has not renewed for ``lease_s - guard_s`` seconds (Redis away, the
   network slow) is given up locally *before* Redis can expire it: from
   then on :meth:`FleetWorker.admits` refuses the camera's messages in every
   sink, and the camera is stopped;
2. computes the placement (``streamseg.fleet.placement``) over the live
   workers and the fleet's camera list, lets go of the cameras placed
   elsewhere (stop, then release the lease, so the new owner takes it at
   once) and takes the leases of the cameras placed here that nobody holds.

So a camera is published by one worker at a time: another can take its
lease only after it expired in Redis, at least ``guard_s`` after its holder
stopped admitting the camera's messages. Each taking increments the
camera's epoch; every message carries the worker and the epoch
(:meth:`FleetWorker.stamp`), so a consumer sees a handover.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from streamseg.fleet.config import FleetConfig
from streamseg.fleet.host import CameraHost
from streamseg.fleet.placement import place
from streamseg.fleet.store import FleetStore, Lease, WorkerInfo, keyspace_events, relevant
from streamseg.fleet.view import FleetView
from streamseg.ingest.config import CameraConfig
from streamseg.publish.redis_config import RedisConfig
from streamseg.publish.sink import Message

__all__ = ["FleetWorker"]

log = logging.getLogger("streamseg.fleet")

FENCED_KINDS = frozenset({"detections", "alert", "snapshot"})


@dataclasses.dataclass
class _Tenure:
    """A camera this worker holds: its lease, config, and until when it may publish it."""

    lease: Lease
    camera: CameraConfig
    valid_until: float  # time.monotonic()
    running: bool = False


class FleetWorker:
    """This process's membership of the fleet.

    Args:
        config: the ``fleet:`` section.
        redis: the ``redis:`` section (``streamseg.publish.connect.redis_client``).
        host: starts and stops cameras (the service).
        seeds: pipeline.yaml's cameras: the fleet's list if it has none yet.
    """

    def __init__(
        self,
        *,
        config: FleetConfig,
        redis: RedisConfig,
        host: CameraHost,
        seeds: Sequence[CameraConfig] = (),
    ) -> None:
        self.config, self.redis, self.host = config, redis, host
        self.name = config.worker_name
        self.seeds = list(seeds)
        self.started = time.time()
        self.joined = False  # the last heartbeat reached Redis
        self._seeded = False
        self._held: dict[str, _Tenure] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closed = threading.Event()
        self._actions: dict[str, threading.Thread] = {}
        self._threads: list[threading.Thread] = []
        self.console: str | None = None  # this worker's console address (``advertise``)
        self.store = FleetStore(
            self._client(min(1.0, config.lease_s / 5)), prefix=redis.stream_prefix
        )
        self.view = FleetView(
            store=self.store, name=self.name, held=self.held, prefix=redis.stream_prefix
        )

    def _client(self, timeout: float) -> Any:
        from streamseg.publish.connect import redis_client

        return redis_client(self.redis, socket_timeout=timeout)

    # -- what the pipeline asks --------------------------------------------------
    def stamp(self, camera_id: str) -> dict[str, Any] | None:
        """``{"worker", "epoch"}`` for ``camera_id``'s messages (``None``: not held)."""
        t = self._held.get(camera_id)
        return None if t is None else {"worker": self.name, "epoch": t.lease.epoch}

    def admits(self, message: Message) -> bool:
        """Whether ``message`` may still be published: its camera is held, the lease is
        safely within its time, and the message was made during this tenure (when its
        time is known)."""
        if message.kind not in FENCED_KINDS:
            return True
        t = self._held.get(message.camera)
        if t is None or time.monotonic() >= t.valid_until:
            return False
        made = message.published_time  # 0: not known (alert snapshots)
        return made <= 0 or made >= t.lease.since

    def add_camera(self, camera: CameraConfig) -> None:
        """Add ``camera`` to the fleet's list (``ValueError``: the id is taken); the worker
        it is placed on starts it."""
        self.store.put_camera(camera, new=True)
        self.wake()

    def remove_camera(self, camera_id: str) -> None:
        """Remove a camera from the fleet's list (``KeyError``: no such camera); its owner
        stops it."""
        self.store.remove_camera(camera_id)
        self.wake()

    def remote_cameras(self) -> dict[str, dict[str, Any]]:
        """The fleet's cameras served by other workers (or by none), for the console
        (``FleetView.cameras``)."""
        return self.view.cameras()

    def advertise(self, console: str | None) -> None:
        """Announce ``console`` (``http://HOST:PORT``) as this worker's console from the
        next heartbeat on: other workers' consoles fetch its cameras' live views there."""
        self.console = console

    def held(self) -> dict[str, int]:
        """``{camera: epoch}`` of the cameras this worker holds now."""
        with self._lock:
            return {c: t.lease.epoch for c, t in self._held.items()}

    # -- life ------------------------------------------------------------------------
    def start(self) -> FleetWorker:
        """Join the fleet: threads that keep the heartbeat, the leases and the placement."""
        for name, target in (("fleet", self._loop), ("fleet:listen", self._listen)):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)
        log.info(
            "fleet: worker %s joins (capacity %d, lease %.1fs)",
            self.name,
            self.config.capacity,
            self.config.lease_s,
        )
        return self

    def close(self, *, stop_cameras: bool = False) -> None:
        """Leave: release every lease at once (others take the cameras now), end the
        heartbeat. ``stop_cameras``: also stop them here (the service goes on)."""
        if self._closed.is_set():
            return
        self._closed.set()
        self._wake.set()
        with self._lock:
            tenures, self._held = list(self._held.values()), {}
        for t in tenures:
            self._try(functools.partial(self.store.release, t.lease), "release")
            if stop_cameras:
                self._act(t.camera.id, self._stop_camera)
        self._try(lambda: self.store.leave(self.name), "leave")
        for thread in self._threads:
            thread.join(5)
        log.info("fleet: worker %s left; released %d camera(s)", self.name, len(tenures))

    def wake(self) -> None:
        """Look at the fleet now rather than at the next tick."""
        self._wake.set()

    def _loop(self) -> None:
        while not self._closed.is_set():
            self._wake.clear()
            try:
                self.step()
            except Exception:
                log.exception("fleet: a round failed")
            self._wake.wait(self.config.tick_s)

    def _listen(self) -> None:
        """Wake the loop on the fleet's channel and on expired keys (when Redis tells them)."""
        import redis

        expired = False
        while not self._closed.is_set():
            try:
                client = self._client(max(2.0, self.config.lease_s))
                expired = expired or keyspace_events(client)
                pubsub = client.pubsub(ignore_subscribe_messages=True)
                pubsub.subscribe(self.store.channel)
                if expired:
                    pubsub.psubscribe("__keyevent@*__:expired")
                while not self._closed.is_set():
                    msg = pubsub.get_message(timeout=0.5)
                    if msg is not None and relevant(msg, self.store.prefix):
                        self._wake.set()
            except redis.RedisError:
                self._closed.wait(self.config.tick_s)

    # -- one round ------------------------------------------------------------------------
    def step(self) -> None:
        """One round: heartbeat, renewals, local expiry, then placement (Redis permitting)."""
        import redis

        reached = self._beat()
        if reached:  # else Redis is away: renewals would only wait out their timeouts
            self._renew()
        self._expire()
        if not reached or self._closed.is_set():
            return
        try:
            if not self._seeded:
                if self.store.seed(self.seeds):
                    log.info("fleet: seeded the camera list with %d camera(s)", len(self.seeds))
                self._seeded = True
            workers = self.store.workers()
            cameras = self.store.cameras()
            placement = place(cameras, {n: w.capacity for n, w in workers.items()})
            self._let_go_misplaced(cameras, placement)
            self._take(cameras, placement)
        except redis.RedisError as exc:
            log.warning("fleet: Redis: %s", type(exc).__name__)
        self._retry_starts()

    def _beat(self) -> bool:
        states = self.host.camera_states()
        with self._lock:
            mine = {c: states.get(c, "starting") for c in self._held}
        info = WorkerInfo(
            self.name, self.config.capacity, mine, time.time(), self.started, self.console
        )
        ok = self._try(lambda: self.store.beat(info, self.config.lease_s), "heartbeat")
        if ok and not self.joined:
            self._try(lambda: self.store.notify(f"joined {self.name}"), "announce")
        self.joined = ok
        return ok

    def _renew(self) -> None:
        import redis

        with self._lock:
            tenures = list(self._held.values())
        sent = time.monotonic()
        try:
            renewed = self.store.renew([t.lease for t in tenures], self.config.lease_s)
        except redis.RedisError:
            return  # _expire() gives them up in time
        for t, ok in zip(tenures, renewed, strict=True):
            if ok:
                t.valid_until = sent + self.config.lease_s - self.config.guard
            else:
                log.warning("fleet: lease of %s was lost; stopping it", t.camera.id)
                self._let_go(t.camera.id, release=False)

    def _expire(self) -> None:
        now = time.monotonic()
        with self._lock:
            late = [c for c, t in self._held.items() if now >= t.valid_until]
        for cid in late:
            log.warning("fleet: could not renew the lease of %s in time; stopping it", cid)
            self._let_go(cid, release=False)

    def _let_go_misplaced(
        self, cameras: dict[str, CameraConfig], placement: dict[str, str | None]
    ) -> None:
        with self._lock:
            held = dict(self._held)
        for cid, t in held.items():
            if cid not in cameras or placement.get(cid) != self.name:
                log.info("fleet: %s goes to %s", cid, placement.get(cid) or "nobody")
                self._let_go(cid, release=True)
            elif cameras[cid] != t.camera:
                log.info("fleet: %s changed; restarting it", cid)
                t.camera, t.running = cameras[cid], False
                self._act(cid, self._stop_camera)

    def _take(self, cameras: dict[str, CameraConfig], placement: dict[str, str | None]) -> None:
        for cid, worker in placement.items():
            if worker != self.name or cid in self._held:
                continue
            sent = time.monotonic()
            lease = self.store.acquire(cid, self.name, self.config.lease_s)
            if lease is None:
                continue  # still held elsewhere: its holder lets go, or it expires
            valid = sent + self.config.lease_s - self.config.guard
            with self._lock:
                self._held[cid] = _Tenure(lease, cameras[cid], valid)
            log.info("fleet: took %s (epoch %d)", cid, lease.epoch)
            self._act(cid, self._start_camera)

    def _retry_starts(self) -> None:
        with self._lock:
            idle = [c for c, t in self._held.items() if not t.running]
        for cid in idle:
            pending = self._actions.get(cid)
            if pending is None or not pending.is_alive():
                self._act(cid, self._start_camera)

    def _let_go(self, camera_id: str, *, release: bool) -> None:
        with self._lock:
            t = self._held.pop(camera_id, None)
        if t is None:
            return
        self._act(camera_id, self._stop_camera)
        if release:
            self._try(lambda: self.store.release(t.lease), "release")

    # -- the host's calls, in order per camera, off the loop --------------------------------
    def _act(self, camera_id: str, action: Callable[[str], None]) -> None:
        before = self._actions.get(camera_id)

        def run() -> None:
            if before is not None:
                before.join()
            action(camera_id)

        thread = threading.Thread(target=run, name=f"fleet:{camera_id}", daemon=True)
        self._actions[camera_id] = thread
        thread.start()

    def _start_camera(self, camera_id: str) -> None:
        t = self._held.get(camera_id)
        if t is None or t.running:
            return
        try:
            self.host.start_camera(t.camera)
        except ValueError as exc:
            log.info("fleet: %s cannot start yet (%s); retrying", camera_id, exc)
            return
        except Exception:
            log.exception("fleet: starting %s failed", camera_id)
            return
        t.running = True
        if self._held.get(camera_id) is not t:  # let go meanwhile
            self._stop_camera(camera_id)

    def _stop_camera(self, camera_id: str) -> None:
        try:
            self.host.stop_camera(camera_id)
        except KeyError:
            pass
        except Exception:
            log.exception("fleet: stopping %s failed", camera_id)

    def _try(self, call: Callable[[], object], what: str) -> bool:
        import redis

        try:
            call()
        except redis.RedisError as exc:
            log.debug("fleet: %s failed: %s", what, type(exc).__name__)
            return False
        return True
