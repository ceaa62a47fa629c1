"""The fleet's state in Redis: members, camera list, leases. Every key in one place.

Keys (``P`` is ``redis.stream_prefix``)::

    P:fleet:workers           SET    names of workers that announced themselves
    P:fleet:worker:NAME       STRING JSON {name, capacity, cameras: {id: state}, beat, started,
                                     console (its console's address, or null)}
                                     expires lease_s after the last heartbeat
    P:fleet:cameras           HASH   camera id -> the camera's config as JSON
    P:fleet:seeded            STRING set once pipeline.yaml has seeded the camera list
    P:fleet:lease:CAMERA      STRING "WORKER EPOCH SINCE", expires lease_s after renewal
    P:fleet:epoch:CAMERA      STRING the camera's last epoch (INCR at each acquisition)
    P:fleet:changes           pub/sub: "cameras", "joined NAME", "left NAME",
                                     "released CAMERA": look again now

A lease is taken only where none exists (and its epoch incremented in the
same step), renewed and released only by the holder whose value it still
has: three short Lua scripts, Redis's own atomic compare-and-set. Nothing
here decides anything; ``streamseg.fleet.worker`` does.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from streamseg.ingest.config import CameraConfig

if TYPE_CHECKING:
    import redis

__all__ = ["FleetStore", "Lease", "WorkerInfo", "keyspace_events", "relevant"]

log = logging.getLogger("streamseg.fleet")

_ACQUIRE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return false end
local epoch = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], ARGV[1] .. ' ' .. epoch .. ' ' .. ARGV[3], 'PX', ARGV[2])
return epoch
"""
_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


@dataclasses.dataclass(frozen=True)
class Lease:
    """One camera's lease: who holds it, its epoch, since when (unix seconds)."""

    camera: str
    worker: str
    epoch: int
    since: float

    @property
    def value(self) -> str:
        """The lease key's value, compared on renewal and release."""
        return f"{self.worker} {self.epoch} {self.since!r}"

    @classmethod
    def parse(cls, camera: str, value: str | bytes) -> Lease:
        text = value.decode() if isinstance(value, bytes) else value
        worker, epoch, since = text.rsplit(" ", 2)
        return cls(camera, worker, int(epoch), float(since))


@dataclasses.dataclass(frozen=True)
class WorkerInfo:
    """A worker's heartbeat: capacity, its cameras' states, last beat (unix seconds),
    and the address of its console (``http://HOST:PORT``; ``None``: it has none)."""

    name: str
    capacity: int
    cameras: dict[str, str]
    beat: float
    started: float
    console: str | None = None

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str | bytes) -> WorkerInfo:
        d = json.loads(text)
        return cls(
            d["name"], int(d["capacity"]), dict(d["cameras"]), d["beat"], d["started"],
            d.get("console"),
        )  # fmt: skip


class FleetStore:
    """The fleet's keys under ``prefix`` on one redis-py client (``redis_client``)."""

    def __init__(self, client: redis.Redis, *, prefix: str) -> None:
        self.client = client
        self.prefix = f"{prefix}:fleet"
        self.channel = f"{self.prefix}:changes"
        self._acquire = client.register_script(_ACQUIRE)
        self._renew = client.register_script(_RENEW)
        self._release = client.register_script(_RELEASE)

    def _lease_key(self, camera: str) -> str:
        return f"{self.prefix}:lease:{camera}"

    # -- members ------------------------------------------------------------
    def beat(self, info: WorkerInfo, ttl_s: float) -> None:
        """Announce ``info`` for ``ttl_s`` seconds."""
        pipe = self.client.pipeline(transaction=False)
        pipe.sadd(f"{self.prefix}:workers", info.name)
        pipe.set(f"{self.prefix}:worker:{info.name}", info.to_json(), px=int(ttl_s * 1000))
        pipe.execute()

    def leave(self, name: str) -> None:
        self.client.delete(f"{self.prefix}:worker:{name}")
        self.client.srem(f"{self.prefix}:workers", name)
        self.notify(f"left {name}")

    def workers(self) -> dict[str, WorkerInfo]:
        """The live workers (heartbeat not expired); the expired ones leave the set."""
        names = sorted(_text(n) for n in self.client.smembers(f"{self.prefix}:workers"))
        if not names:
            return {}
        values = self.client.mget([f"{self.prefix}:worker:{n}" for n in names])
        gone = [n for n, v in zip(names, values, strict=True) if v is None]
        if gone:
            self.client.srem(f"{self.prefix}:workers", *gone)
        return {
            n: WorkerInfo.from_json(v) for n, v in zip(names, values, strict=True) if v is not None
        }

    # -- the camera list ----------------------------------------------------------
    def seed(self, cameras: list[CameraConfig]) -> bool:
        """Write ``cameras`` as the fleet's list unless a worker did before (``True``: seeded)."""
        if not self.client.set(f"{self.prefix}:seeded", str(time.time()), nx=True):
            return False
        if cameras:
            self.client.hset(
                f"{self.prefix}:cameras", mapping={c.id: _camera_json(c) for c in cameras}
            )
        self.notify("cameras")
        return True

    def cameras(self) -> dict[str, CameraConfig]:
        raw = self.client.hgetall(f"{self.prefix}:cameras")
        return {_text(k): CameraConfig.model_validate_json(v) for k, v in sorted(raw.items())}

    def put_camera(self, camera: CameraConfig, *, new: bool) -> None:
        """Add (``new``: ``ValueError`` when the id is taken) or replace one camera."""
        key = f"{self.prefix}:cameras"
        if new:
            if not self.client.hsetnx(key, camera.id, _camera_json(camera)):
                raise ValueError(f"camera {camera.id!r} is already in the fleet")
        else:
            self.client.hset(key, camera.id, _camera_json(camera))
        self.notify("cameras")

    def remove_camera(self, camera_id: str) -> None:
        """``KeyError`` when the fleet has no such camera."""
        if not self.client.hdel(f"{self.prefix}:cameras", camera_id):
            raise KeyError(camera_id)
        self.notify("cameras")

    # -- leases -----------------------------------------------------------------
    def acquire(self, camera: str, worker: str, ttl_s: float) -> Lease | None:
        """Take ``camera``'s lease when nobody holds it (a new epoch); else ``None``."""
        since = round(time.time(), 3)
        keys = [self._lease_key(camera), f"{self.prefix}:epoch:{camera}"]
        epoch = self._acquire(keys=keys, args=[worker, int(ttl_s * 1000), repr(since)])
        return None if epoch is None else Lease(camera, worker, int(epoch), since)

    def renew(self, leases: list[Lease], ttl_s: float) -> list[bool]:
        """Extend each of ``leases`` by ``ttl_s``, in one round trip; ``False`` for a lease
        that is no longer ours."""
        if not leases:
            return []
        pipe = self.client.pipeline(transaction=False)
        for lease in leases:
            args: list[str | int] = [lease.value, int(ttl_s * 1000)]
            self._renew(keys=[self._lease_key(lease.camera)], args=args, client=pipe)
        return [bool(ok) for ok in pipe.execute()]

    def release(self, lease: Lease) -> None:
        self._release(keys=[self._lease_key(lease.camera)], args=[lease.value])
        self.notify(f"released {lease.camera}")

    def leases(self, cameras: list[str]) -> dict[str, Lease]:
        if not cameras:
            return {}
        values = self.client.mget([self._lease_key(c) for c in cameras])
        return {c: Lease.parse(c, v) for c, v in zip(cameras, values, strict=True) if v is not None}

    def notify(self, what: str) -> None:
        self.client.publish(self.channel, what)

    def snapshot(self) -> dict[str, Any]:
        """Workers and cameras as ``streamseg fleet status`` shows them."""
        workers = self.workers()
        cameras = self.cameras()
        leases = self.leases(list(cameras))
        return {
            "workers": {
                n: {
                    "capacity": w.capacity,
                    "cameras": sorted(w.cameras),
                    "last_beat": w.beat,
                    "started": w.started,
                    "console": w.console,
                }
                for n, w in workers.items()
            },
            "cameras": {cid: _camera_row(cid, leases.get(cid), workers) for cid in cameras},
        }


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _camera_json(camera: CameraConfig) -> str:
    return camera.model_dump_json()


def _camera_row(cid: str, lease: Lease | None, workers: Mapping[str, WorkerInfo]) -> dict[str, Any]:
    if lease is None:
        return {"owner": None, "state": "unassigned", "epoch": None, "since": None}
    holder = workers.get(lease.worker)
    state = holder.cameras.get(cid, "starting") if holder is not None else "owner gone"
    return {"owner": lease.worker, "state": state, "epoch": lease.epoch, "since": lease.since}


def keyspace_events(client: Any) -> bool:
    """Ask Redis to announce expired keys (``notify-keyspace-events Ex``), keeping the
    flags already set; ``False`` where the server refuses (managed Redis): then
    the worker notices an expiry at its next tick."""
    import redis

    try:
        flags = str(client.config_get("notify-keyspace-events").get("notify-keyspace-events", ""))
        if not ("E" in flags and ("x" in flags or "A" in flags)):
            client.config_set("notify-keyspace-events", "".join(sorted(set(flags) | {"E", "x"})))
    except redis.ResponseError:
        log.info("fleet: Redis does not announce expired keys; noticing them every tick")
        return False
    return True


def relevant(msg: dict[str, Any], prefix: str) -> bool:
    """Whether a pub/sub message concerns the fleet under ``prefix`` (an expired key of
    another application does not)."""
    if msg.get("type") == "pmessage":
        data = msg.get("data")
        key = data.decode() if isinstance(data, bytes) else str(data)
        return key.startswith(prefix)
    return True
